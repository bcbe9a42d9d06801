"""One training step of the digits CNN (batch 128, float32, Adam 1e-3): steps per second.

    x [N, 1, 8, 8] -> Conv2d(1, 32, 3, padding 1) -> relu -> Conv2d(32, 64, 3, padding 1)
    -> relu -> MaxPool2d(2) -> [N, 1024] -> Linear(1024, 128) -> relu -> Linear(128, 10)
    -> softmax cross-entropy with integer labels (mean)

A step is the loss, its gradient, the Adam update and the new parameters, in one
compiled function where the system has one: ``pb.jit`` of pb.nn / pb.optim code,
``jax.jit`` of jax.numpy (``lax.conv_general_dilated``, NCHW) with ``optax.adam``, and
torch eager (``nn.Module``, ``torch.optim.Adam`` with ``foreach`` and with ``fused``) and
``torch.compile`` of the whole step (not with ``--quick``).  Every system starts from
pullback's initial parameters (``Conv2d.init``, ``Linear.init``, key 0) and trains on
the same batches: the training quarter split of ``sklearn.datasets.load_digits``
(``train_test_split(test_size=0.25, random_state=0, stratify=y)``, pixels / 16) in a
fixed order, 10 batches of 128 in turn.  ``rel err`` compares the losses of the first 20
steps with torch eager in float64; the note gives the loss at step 20.

    python benchmarks/train_cnn.py [--quick] [--threads 1|2|both] [--only SYSTEMS]
                                   [--json PATH]
"""

from __future__ import annotations

import _harness as H

args = H.setup("train_cnn")

import dataclasses  # noqa: E402

import _training as T  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import pullback as pb  # noqa: E402
from pullback import nn  # noqa: E402

BATCH, LR = 128, 1e-3


def digits_batches() -> list[tuple[np.ndarray, np.ndarray]]:
    """The training split's full batches of 128, in a fixed shuffled order."""
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    x, _, y, _ = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    order = np.random.default_rng(0).permutation(len(x))
    return [(x[idx], y[idx].astype(np.int64))
            for idx in np.split(order[:len(x) // BATCH * BATCH], len(x) // BATCH)]


BATCHES = digits_batches()


# ------------------------------------------------------------------ pullback
@dataclasses.dataclass
class DigitsCNN:
    conv1: nn.Conv2d
    conv2: nn.Conv2d
    fc1: nn.Linear
    fc2: nn.Linear

    @classmethod
    def init(cls, key: np.ndarray) -> DigitsCNN:
        k1, k2, k3, k4 = pb.random.split(key, 4)
        return cls(nn.Conv2d.init(k1, 1, 32, 3, padding=1),
                   nn.Conv2d.init(k2, 32, 64, 3, padding=1),
                   nn.Linear.init(k3, 1024, 128), nn.Linear.init(k4, 128, 10))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = nn.relu(self.conv2(nn.relu(self.conv1(x))))
        h = nn.functional.max_pool(h, 2).reshape(x.shape[0], -1)
        return self.fc2(nn.relu(self.fc1(h)))


def pb_loss(model: DigitsCNN, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return nn.softmax_cross_entropy_with_integer_labels(model(x), y)


MODEL = DigitsCNN.init(pb.random.key(0))
ARRAYS = T.named_arrays(MODEL)  # conv1.weight [32, 1, 3, 3], ..., fc1.weight [1024, 128], ...

# ------------------------------------------------------------------ torch: the reference
REF = H.shared("reference")  # the losses of torch eager in float64, made once per run
torch = H.optional("torch") if H.want("torch") or H.want("torch.compile") or REF is None \
    else None
if torch is not None:
    import torch.nn.functional as F

    H.pin_torch(torch)

    class TorchCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
            self.fc1 = torch.nn.Linear(1024, 128)
            self.fc2 = torch.nn.Linear(128, 10)

        def forward(self, x):
            h = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
            return self.fc2(F.relu(self.fc1(h.flatten(1))))

    def torch_step(dtype, *, fused: bool = False, compiled: bool = False) -> T.Step:
        """A fresh model at the initial parameters (Linear weights transposed to torch's
        [out, in]) and its Adam."""
        arrays = {k: v.T if k.startswith("fc") and k.endswith("weight") else v
                  for k, v in ARRAYS.items()}
        model = T.load_torch(TorchCNN().to(dtype), arrays)
        opt = torch.optim.Adam(model.parameters(), lr=LR, foreach=not fused, fused=fused)
        return T.torch_step(model, F.cross_entropy, opt, compiled=compiled)

    def torch_batches(dtype) -> list[tuple]:
        return [(torch.from_numpy(x).to(dtype), torch.from_numpy(y)) for x, y in BATCHES]

    if REF is None:
        REF = H.share("reference", T.losses(torch_step(torch.float64),
                                            torch_batches(torch.float64)))
elif REF is None:
    H.note("no float64 reference (torch is not installed): rel err not checked")

# ------------------------------------------------------------------ the systems
H.warm("pullback")
T.train_rows("pullback jit(step)", T.pullback_step(pb_loss, pb.optim.adam(LR), MODEL),
             BATCHES, REF, kind="pullback")

jax = H.optional("jax") if H.want("jax") else None
optax = H.optional("optax") if jax is not None else None
if optax is not None:
    import jax.numpy as jnp
    from jax import lax

    H.warm("jax")

    def conv(x, w, b):
        y = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + b[:, None, None]

    def jax_loss(p, x, y):
        h = jax.nn.relu(conv(jax.nn.relu(conv(x, p["conv1.weight"], p["conv1.bias"])),
                             p["conv2.weight"], p["conv2.bias"]))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = jax.nn.relu(h.reshape(x.shape[0], -1) @ p["fc1.weight"] + p["fc1.bias"])
        logits = h @ p["fc2.weight"] + p["fc2.bias"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    jax_batches = [(jax.device_put(x), jax.device_put(y.astype(np.int32))) for x, y in BATCHES]
    params = {k: jax.device_put(v) for k, v in ARRAYS.items()}
    T.train_rows("jax.jit(step), optax.adam", T.jax_step(jax_loss, optax.adam(LR), params),
                 jax_batches, REF)

if torch is not None and H.want("torch"):
    batches = torch_batches(torch.float32)
    for fused in (False, True):
        T.train_rows(f"torch eager, Adam({'fused' if fused else 'foreach'})",
                     torch_step(torch.float32, fused=fused), batches, REF, compiled=False)
if torch is not None and H.want("torch.compile") and not H.quick():
    H.warm("torch.compile")
    T.train_rows("torch.compile(step), Adam(foreach)",
                 torch_step(torch.float32, compiled=True), torch_batches(torch.float32), REF)

H.finish(f"digits CNN 1x8x8 -> conv 32 -> conv 64 -> pool -> 128 -> 10, batch {BATCH}, "
         f"Adam lr={LR}, float32; {len(BATCHES)} batches in turn; rel err: losses of steps "
         f"1..{T.STEPS} against torch eager in float64")
