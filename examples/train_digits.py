"""Train a small CNN on scikit-learn's 8x8 digits with pb.nn, pb.optim and pb.train.

The whole training step (loss, its gradient, Adam's update, the new parameters) is one
``pb.jit``, compiled once (every batch has the same shape), updating the parameters and
Adam's state in place (donated arguments).  The script prints the loss and test
accuracy of each epoch, saves the final model with ``pb.train.save``, loads it back and
checks that the reloaded model scores exactly the same, and exits with status 1 if the
test accuracy misses the target (98%).  Needs scikit-learn (``pip install
pullback[examples]``) for the data.

    python examples/train_digits.py [--epochs 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pullback as pb
from pullback import nn, optim, train

TARGET = 0.98
BATCH = 128
EPOCHS = 50  # at a constant 1e-3, Adam passes 98% from about epoch 30 (seeds 0-2)


@dataclasses.dataclass
class DigitsCNN:
    """conv 3x3 (1->32) - relu - conv 3x3 (32->64) - relu - maxpool 2 - dense 1024->128 -
    relu - dense 128->10 (logits)."""

    conv1: nn.Conv2d
    conv2: nn.Conv2d
    pool: nn.MaxPool2d
    fc1: nn.Linear
    fc2: nn.Linear

    @classmethod
    def init(cls, key: np.ndarray, dtype=np.float32) -> DigitsCNN:
        k1, k2, k3, k4 = pb.random.split(key, 4)
        return cls(nn.Conv2d.init(k1, 1, 32, 3, padding=1, dtype=dtype),
                   nn.Conv2d.init(k2, 32, 64, 3, padding=1, dtype=dtype),
                   nn.MaxPool2d(2),
                   nn.Linear.init(k3, 64 * 4 * 4, 128, dtype=dtype),
                   nn.Linear.init(k4, 128, 10, dtype=dtype))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = nn.relu(self.conv2(nn.relu(self.conv1(x))))
        h = self.pool(h)
        h = nn.relu(self.fc1(h.reshape(h.shape[0], -1)))
        return self.fc2(h)


def loss_fn(model: DigitsCNN, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return nn.softmax_cross_entropy_with_integer_labels(model(x), y)


OPTIMISER = optim.adam(1e-3)


@functools.partial(pb.jit, donate_argnums=(0, 1))
def train_step(model: DigitsCNN, opt_state, x: np.ndarray, y: np.ndarray):
    """One step of Adam; returns the new model and optimiser state and the batch loss.
    The old model and state are donated: the new ones are computed in their place."""
    loss, grads = pb.value_and_grad(loss_fn)(model, x, y)
    updates, opt_state = OPTIMISER.update(grads, opt_state, model)
    return optim.apply_updates(model, updates), opt_state, loss


@pb.jit
def predict(model: DigitsCNN, x: np.ndarray) -> np.ndarray:
    return model(x)


def load_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits as float32 [N, 1, 8, 8] in [0, 1], split 75/25 stratified (fixed)."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit("train_digits.py needs scikit-learn: pip install 'pullback[examples]'")
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=0, stratify=y)
    return x_train, y_train, x_test, y_test


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    x_train, y_train, x_test, y_test = load_data()
    key = pb.random.key(args.seed)
    init_key, key = pb.random.split(key)
    model = DigitsCNN.init(init_key)
    opt_state = OPTIMISER.init(model)
    print(f"{len(x_train)} training and {len(x_test)} test images, batch {BATCH}")

    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_key, key = pb.random.split(key)
        mean_loss = train.RunningMean()
        # drop_last: every step has the same batch shape, so one compiled step serves all
        with train.Progress(total=len(x_train), desc=f"epoch {epoch}", unit="img") as bar:
            for xb, yb in train.batches((x_train, y_train), BATCH, key=epoch_key,
                                        drop_last=True):
                model, opt_state, loss = train_step(model, opt_state, xb, yb)
                mean_loss.update(float(loss), len(xb))
                bar.update(len(xb), loss=mean_loss.value)
        acc = float(train.accuracy(predict(model, x_test), y_test))
        print(f"epoch {epoch:2d}  loss {mean_loss.value:.4f}  test accuracy {acc:.4f}  "
              f"({time.perf_counter() - start:.1f} s)")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "digits_cnn.npz"
        train.save(path, model)
        reloaded = train.load(path, like=model)
    logits, reloaded_logits = predict(model, x_test), predict(reloaded, x_test)
    reloaded_acc = float(train.accuracy(reloaded_logits, y_test))
    if not np.array_equal(logits, reloaded_logits) or reloaded_acc != acc:
        print(f"the reloaded model differs: test accuracy {reloaded_acc:.4f}, not {acc:.4f}")
        return 1
    print(f"saved and reloaded: the same logits, test accuracy {reloaded_acc:.4f}")

    print(f"final test accuracy {acc:.4f} (target {TARGET:.2f}) after "
          f"{time.perf_counter() - start:.1f} s")
    return 0 if acc >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
