"""The LSTM layer's written-out gradient (issue 24: each step's pre-activation gradient
into one array, the hidden weight's gradient one product after the loop) against
float64 central differences: compiled for C in float64 and float32, at batch 1 and sizes
that are not multiples of the product kernels' blocking, with a loss that reads only the
outputs, only the last state, or both, with and without an initial state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback import nn

from .test_losses import differences

RNG = np.random.default_rng(24)


def outputs_only(layer: Any, xs: np.ndarray, state: Any) -> Any:
    ys, _ = layer(xs, state)
    return np.sum(np.sin(ys) * np.arange(1, ys.shape[1] + 1)[:, None])


def last_state_only(layer: Any, xs: np.ndarray, state: Any) -> Any:
    _, (h, c) = layer(xs, state)
    return np.sum(h * h) + np.sum(np.cos(c))


def both(layer: Any, xs: np.ndarray, state: Any) -> Any:
    return outputs_only(layer, xs, state) + last_state_only(layer, xs, state)


def _case(batch: int, steps: int, features: int, hidden: int) -> tuple[Any, ...]:
    layer = nn.LSTM.init(pb.random.key(batch * 100 + steps), features, hidden,
                         dtype=np.float64)
    xs = RNG.normal(size=(batch, steps, features))
    state = (RNG.normal(size=(batch, hidden)), RNG.normal(size=(batch, hidden)))
    return layer, xs, state


def _as(dtype: Any, tree: Any) -> Any:
    return pb.tree_map(lambda a: np.asarray(a, dtype), tree)


SIZES = [(1, 1, 3, 5), (1, 7, 5, 13), (3, 6, 17, 9)]


def _tiered(loss: Any, size: tuple[int, ...], dtype: Any) -> Any:
    """Every loss and dtype at the smallest size, and the largest size with both parts of
    the loss in float64, in the default tier; the rest (7-14 s each: central
    differences of every weight) in the slow one."""
    default = size == SIZES[0] or (size == SIZES[-1] and loss is both and dtype is np.float64)
    return pytest.param(loss, *size, dtype, marks=() if default else pytest.mark.slow,
                        id=f"{np.dtype(dtype).name}-{'-'.join(map(str, size))}-{loss.__name__}")


@pytest.mark.parametrize("loss,batch,steps,features,hidden,dtype",
                         [_tiered(loss, size, dtype) for dtype in (np.float64, np.float32)
                          for size in SIZES for loss in (outputs_only, last_state_only, both)])
def test_compiled_gradient_equals_central_differences(loss, batch, steps, features, hidden,
                                                      dtype) -> None:
    args = _case(batch, steps, features, hidden)
    want = differences(loss, *args)
    grad = pb.jit(pb.grad(loss, argnums=(0, 1, 2)), backend="c")
    got = pb.tree_leaves(grad(*_as(dtype, args)))
    tol = 1e-6 if dtype == np.float64 else 2e-3
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())


def test_gradient_without_an_initial_state() -> None:
    """The zero state (``state=None``) the layer makes itself: the gradient in the weights
    and inputs equals central differences, eager and compiled."""
    layer, xs, _ = _case(2, 4, 3, 6)

    def loss(layer, xs):
        ys, (h, c) = layer(xs)
        return np.sum(np.tanh(ys)) + np.sum(c * h)

    want = differences(loss, layer, xs)
    for grad in (pb.grad(loss, argnums=(0, 1)),
                 pb.jit(pb.grad(loss, argnums=(0, 1)), backend="c")):
        for g, w in zip(pb.tree_leaves(grad(layer, xs)), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


def test_gradient_of_a_promoted_and_broadcast_state() -> None:
    """float32 weights and inputs with a float64 state the layer promotes to (the inputs'
    gradients float32, the state's float64), and a state without the batch axis that
    every sequence starts from (its gradient summed over the batch)."""
    layer, xs, _ = _case(3, 4, 5, 7)
    state = (RNG.normal(size=7), RNG.normal(size=7))
    want = differences(both, layer, xs, state)
    low = (_as(np.float32, layer), xs.astype(np.float32), state)
    for grad in (pb.grad(both, argnums=(0, 1, 2)),
                 pb.jit(pb.grad(both, argnums=(0, 1, 2)), backend="c")):
        got = pb.tree_leaves(grad(*low))
        assert [g.dtype for g in got] == [np.float32] * 5 + [np.float64] * 2
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3 * np.abs(w).max())
