"""pb.nn losses against NumPy references written out here (and torch where it imports):
values for each reduction, stability at large logits, gradients against float64 central
differences, and the same numbers from compiled code.

``differences`` (the central-difference gradient of a scalar function of a pytree) is
also what the recurrent and attention tests check their gradients against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback import nn

RNG = np.random.default_rng(23)
REDUCTIONS = ["mean", "sum", "none"]


def differences(f: Callable[..., Any], *args: Any, eps: float = 1e-6) -> list[np.ndarray]:
    """d f(*args) / d leaf by central differences, element by element, for every leaf of
    ``args`` (all float64 arrays), in ``pb.tree_leaves`` order."""
    leaves, structure = pb.tree_flatten(args)
    grads = []
    for i, leaf in enumerate(leaves):
        assert leaf.dtype == np.float64, "central differences need float64 leaves"
        grad = np.zeros_like(leaf)
        for j in np.ndindex(leaf.shape):
            values = []
            for delta in (eps, -eps):
                moved = leaf.copy()
                moved[j] += delta
                values.append(f(*pb.tree_unflatten(structure,
                                                   [*leaves[:i], moved, *leaves[i + 1:]])))
            grad[j] = (values[0] - values[1]) / (2 * eps)
        grads.append(grad)
    return grads


def assert_grads_match(f: Callable[..., Any], *args: Any) -> None:
    """``pb.grad`` of ``f`` in every argument equals its central differences (up to their
    rounding error, which grows with the size of ``f``: a zero derivative comes out of
    the differences as about ``|f| * 1e-10``)."""
    got = pb.grad(f, argnums=tuple(range(len(args))))(*args)
    want = differences(f, *args)
    atol = 1e-8 * max(1.0, abs(float(f(*args))))
    got_leaves = pb.tree_leaves(got)
    assert len(got_leaves) == len(want)
    for g, w in zip(got_leaves, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)


def reference_log_softmax(x: np.ndarray) -> np.ndarray:
    """Straight from the definition (fine for moderate logits)."""
    return np.log(np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True))


def reduced(loss: np.ndarray, reduction: str) -> np.ndarray:
    return {"mean": np.mean, "sum": np.sum, "none": np.asarray}[reduction](loss)


def logits_and_labels(shape: tuple[int, ...] = (5,), classes: int = 4
                      ) -> tuple[np.ndarray, np.ndarray]:
    return RNG.normal(size=(*shape, classes)), RNG.integers(0, classes, shape)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_integer_labels_cross_entropy(reduction: str) -> None:
    logits, labels = logits_and_labels((2, 3))
    logp = reference_log_softmax(logits)
    want = np.array([[-logp[a, b, labels[a, b]] for b in range(3)] for a in range(2)])
    got = nn.softmax_cross_entropy_with_integer_labels(logits, labels, reduction=reduction)
    np.testing.assert_allclose(got, reduced(want, reduction), rtol=1e-12)
    # nll_loss reads the same entries from given log-probabilities.
    np.testing.assert_allclose(nn.nll_loss(logp, labels, reduction=reduction),
                               reduced(want, reduction), rtol=1e-12)


@pytest.mark.parametrize("smoothing", [0.1, 0.5, 1.0])
def test_label_smoothing_is_cross_entropy_against_smoothed_targets(smoothing: float) -> None:
    logits, labels = logits_and_labels((6,), classes=5)
    targets = (1 - smoothing) * np.eye(5)[labels] + smoothing / 5
    want = -np.sum(targets * reference_log_softmax(logits), axis=-1).mean()
    got = nn.softmax_cross_entropy_with_integer_labels(logits, labels,
                                                       label_smoothing=smoothing)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_probability_targets(reduction: str) -> None:
    logits = RNG.normal(size=(4, 3))
    targets = RNG.dirichlet(np.ones(3), size=4)
    want = -np.sum(targets * reference_log_softmax(logits), axis=-1)
    np.testing.assert_allclose(nn.softmax_cross_entropy(logits, targets, reduction=reduction),
                               reduced(want, reduction), rtol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_and_binary_cross_entropy(reduction: str) -> None:
    pred, target = RNG.normal(size=(2, 3)), RNG.random((2, 3))
    np.testing.assert_allclose(nn.mse(pred, target, reduction=reduction),
                               reduced((pred - target) ** 2, reduction), rtol=1e-12)
    p = 1 / (1 + np.exp(-pred))
    want = -(target * np.log(p) + (1 - target) * np.log(1 - p))
    np.testing.assert_allclose(
        nn.binary_cross_entropy_with_logits(pred, target, reduction=reduction),
        reduced(want, reduction), rtol=1e-12)


def test_large_logits_stay_exact() -> None:
    """Logits near 1e4 overflow exp; the losses only see their differences."""
    logits, labels = logits_and_labels((3,))
    shift = 1e4
    np.testing.assert_allclose(
        nn.softmax_cross_entropy_with_integer_labels(logits + shift, labels,
                                                     label_smoothing=0.2),
        nn.softmax_cross_entropy_with_integer_labels(logits, labels, label_smoothing=0.2),
        rtol=1e-9)
    x = np.array([-800.0, 800.0])
    np.testing.assert_allclose(
        nn.binary_cross_entropy_with_logits(x, np.array([1.0, 0.0]), reduction="none"),
        [800.0, 800.0])


def test_float32_stays_float32() -> None:
    logits, labels = logits_and_labels()
    logits = logits.astype(np.float32)
    assert nn.softmax_cross_entropy_with_integer_labels(logits, labels).dtype == np.float32
    assert nn.binary_cross_entropy_with_logits(logits, logits > 0).dtype == np.float32


def test_bad_arguments_raise() -> None:
    logits, labels = logits_and_labels()
    with pytest.raises(ValueError, match="reduction"):
        nn.mse(logits, logits, reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.softmax_cross_entropy_with_integer_labels(logits, labels, label_smoothing=1.5)


LOSSES = {
    "integer_labels": lambda x, y, p: nn.softmax_cross_entropy_with_integer_labels(
        x, y, label_smoothing=0.3, reduction="sum"),
    "probabilities": lambda x, y, p: nn.softmax_cross_entropy(x, p),
    "nll": lambda x, y, p: nn.nll_loss(x, y),
    "mse": lambda x, y, p: nn.mse(x, p),
    "bce": lambda x, y, p: nn.binary_cross_entropy_with_logits(x, p),
}


@pytest.mark.parametrize("name", LOSSES)
def test_gradients_and_compiled(name: str) -> None:
    """The gradient in the logits matches differences; compiled code gives the eager
    loss and the same gradient."""
    logits, labels = logits_and_labels((3,))
    probs = RNG.dirichlet(np.ones(4), size=3)
    loss = LOSSES[name]

    def of_logits(x: np.ndarray) -> Any:
        return loss(x, labels, probs)

    assert_grads_match(of_logits, logits)
    np.testing.assert_allclose(pb.jit(loss)(logits, labels, probs), of_logits(logits),
                               rtol=1e-14)


def test_label_smoothing_as_a_run_time_value() -> None:
    """A smoothing passed as a Python float to compiled code is a run-time value."""
    logits, labels = logits_and_labels()
    fn = pb.jit(lambda x, y, s: nn.softmax_cross_entropy_with_integer_labels(
        x, y, label_smoothing=s))
    for s in (0.0, 0.25):
        np.testing.assert_allclose(
            fn(logits, labels, s),
            nn.softmax_cross_entropy_with_integer_labels(logits, labels, label_smoothing=s),
            rtol=1e-14)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_against_torch(reduction: str) -> None:
    torch = pytest.importorskip("torch")
    fn = torch.nn.functional
    logits, labels = logits_and_labels((4,), classes=5)
    probs = RNG.dirichlet(np.ones(5), size=4)
    x, y, p = torch.tensor(logits), torch.tensor(labels), torch.tensor(probs)
    pairs = [
        (nn.softmax_cross_entropy_with_integer_labels(logits, labels, label_smoothing=0.1,
                                                      reduction=reduction),
         fn.cross_entropy(x, y, label_smoothing=0.1, reduction=reduction)),
        (nn.softmax_cross_entropy(logits, probs, reduction=reduction),
         fn.cross_entropy(x, p, reduction=reduction)),
        (nn.nll_loss(logits, labels, reduction=reduction),
         fn.nll_loss(x, y, reduction=reduction)),
        (nn.mse(logits, probs, reduction=reduction), fn.mse_loss(x, p, reduction=reduction)),
        (nn.binary_cross_entropy_with_logits(logits, probs, reduction=reduction),
         fn.binary_cross_entropy_with_logits(x, p, reduction=reduction)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12)
