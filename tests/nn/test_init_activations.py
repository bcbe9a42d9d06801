"""pb.nn initialisers and activations: the numbers against their definitions written out
here (and torch's where it imports), finite at extreme inputs, gradients against float64
central differences, and compiled code returning what the eager call returns."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback import nn

from .test_losses import assert_grads_match

RNG = np.random.default_rng(11)
KEY = pb.random.key(3)


# -- initialisers -------------------------------------------------------------------------

def test_fans_of_dense_and_conv_weights() -> None:
    assert nn.init.fans((5, 7)) == (5, 7)
    assert nn.init.fans((8, 3, 2, 4)) == (3 * 2 * 4, 8 * 2 * 4)
    assert nn.init.fans((8, 3, 5)) == (15, 40)
    with pytest.raises(ValueError, match="at least 2 dims"):
        nn.init.fans((4,))


def test_constant_initialisers() -> None:
    z, o = nn.init.zeros((2, 3)), nn.init.ones(4, np.float64)
    assert z.dtype == np.float32 and z.shape == (2, 3) and not z.any()
    assert o.dtype == np.float64 and (o == 1).all()


#: name -> (draw of a [200, 300] weight, the spread it must have: a bound or a std)
SCHEMES: dict[str, tuple[Callable[..., Any], str, float]] = {
    "uniform": (lambda k, s: nn.init.uniform(k, s, 0.3), "bound", 0.3),
    "normal": (lambda k, s: nn.init.normal(k, s, 0.2), "std", 0.2),
    "he_normal": (nn.init.he_normal, "std", math.sqrt(2 / 200)),
    "he_uniform": (nn.init.he_uniform, "bound", math.sqrt(6 / 200)),
    "glorot_normal": (nn.init.glorot_normal, "std", math.sqrt(2 / 500)),
    "glorot_uniform": (nn.init.glorot_uniform, "bound", math.sqrt(6 / 500)),
}


@pytest.mark.parametrize("name", SCHEMES)
def test_random_initialisers(name: str) -> None:
    """Their spread (60 000 draws: the std within 2%), float32 by default, the same
    numbers from the same key, compiled too, and new numbers from another key."""
    draw, kind, spread = SCHEMES[name]
    w = draw(KEY, (200, 300))
    assert w.dtype == np.float32 and w.shape == (200, 300)
    assert abs(w.mean()) < 0.02 * spread
    if kind == "bound":
        assert -spread <= w.min() < -0.99 * spread and 0.99 * spread < w.max() <= spread
        spread = spread / math.sqrt(3)  # the std of U(-b, b)
    assert abs(w.std() / spread - 1) < 0.02
    np.testing.assert_array_equal(draw(KEY, (200, 300)), w)
    np.testing.assert_array_equal(pb.jit(lambda k: draw(k, (200, 300)))(KEY), w)
    assert not np.array_equal(draw(pb.random.key(4), (200, 300)), w)


def test_explicit_fans_and_dtype() -> None:
    w = nn.init.he_uniform(KEY, (50, 40), fan_in=6, dtype=np.float64)
    assert w.dtype == np.float64 and 0.99 < w.max() <= 1.0  # sqrt(6 / 6)
    w = nn.init.glorot_uniform(KEY, (50, 40), 2, 4)
    assert 0.99 < w.max() <= 1.0  # sqrt(6 / (2 + 4))


# -- activations --------------------------------------------------------------------------

def phi(x: float) -> float:
    """The standard normal CDF."""
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


#: name -> (ours, the definition of one element in Python floats)
ACTIVATIONS: dict[str, tuple[Callable[[Any], Any], Callable[[float], float]]] = {
    "relu": (nn.relu, lambda v: max(v, 0.0)),
    "leaky_relu": (lambda x: nn.leaky_relu(x, 0.2), lambda v: v if v >= 0 else 0.2 * v),
    "elu": (nn.elu, lambda v: v if v > 0 else math.exp(v) - 1),
    "gelu_tanh": (nn.gelu, lambda v: 0.5 * v * (1 + math.tanh(
        math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
    "gelu": (lambda x: nn.gelu(x, approximate=False), lambda v: v * phi(v)),
    "silu": (nn.silu, lambda v: v * sig(v)),
    "sigmoid": (nn.sigmoid, sig),
    "tanh": (nn.tanh, math.tanh),
    "softplus": (nn.softplus, lambda v: math.log(1 + math.exp(v))),
}

#: Away from the kinks of relu and its relatives, so that differences see one side.
POINTS = np.array([-4.0, -1.3, -0.4, 0.3, 0.9, 2.5, 6.0])


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_values_and_gradient(name: str) -> None:
    ours, definition = ACTIVATIONS[name]
    x = POINTS.reshape(7, 1) + np.array([0.0, 0.05])  # 2-d, to check shapes are kept
    want = np.vectorize(definition)(x)
    np.testing.assert_allclose(ours(x), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(pb.jit(ours)(x), want, rtol=1e-13, atol=1e-15)
    assert_grads_match(lambda v: np.sum(ours(v) * np.cos(v)), x)
    x32 = x.astype(np.float32)
    assert ours(x32).dtype == np.float32 and pb.jit(ours)(x32).dtype == np.float32
    np.testing.assert_allclose(ours(x32), want, rtol=1e-6, atol=1e-7)


def test_relu_gradient_at_zero_is_zero() -> None:
    g = pb.grad(lambda x: np.sum(nn.relu(x)))(np.array([-1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])


def test_extreme_inputs_stay_finite() -> None:
    """No overflow in a value or in a gradient at |x| = 1000."""
    x = np.array([-1000.0, 1000.0])
    np.testing.assert_array_equal(nn.sigmoid(x), [0.0, 1.0])
    np.testing.assert_array_equal(nn.softplus(x), [0.0, 1000.0])
    np.testing.assert_array_equal(nn.elu(x), [-1.0, 1000.0])
    np.testing.assert_allclose(nn.silu(x), [0.0, 1000.0], atol=0)
    for f in (nn.sigmoid, nn.softplus, nn.elu, nn.silu, nn.gelu):
        g = pb.grad(lambda v, f=f: np.sum(f(v)))(x)
        assert np.isfinite(g).all(), f.__name__
    np.testing.assert_allclose(nn.sigmoid(np.array(-700.0)), math.exp(-700), rtol=1e-13)


def softmax_reference(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_family(axis: int) -> None:
    x = RNG.normal(size=(3, 4))
    p = softmax_reference(x, axis)
    np.testing.assert_allclose(nn.softmax(x, axis=axis), p, rtol=1e-14)
    np.testing.assert_allclose(nn.log_softmax(x, axis=axis), np.log(p), rtol=1e-13)
    np.testing.assert_allclose(nn.logsumexp(x, axis=axis), np.log(np.exp(x).sum(axis=axis)),
                               rtol=1e-14)
    both = pb.jit(lambda v: (nn.softmax(v, axis), nn.log_softmax(v, axis),
                             nn.logsumexp(v, axis)))(x)
    for got, want in zip(both, (nn.softmax(x, axis), nn.log_softmax(x, axis),
                                nn.logsumexp(x, axis)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    w = RNG.normal(size=(3, 4))
    assert_grads_match(lambda v: np.sum(nn.softmax(v, axis) * w), x)
    assert_grads_match(lambda v: np.sum(nn.log_softmax(v, axis) * w), x)


def test_softmax_family_at_large_and_infinite_logits() -> None:
    x = np.array([[1e4, 1e4 + 1.0, 1e4 - 2.0], [-np.inf, 0.0, -np.inf]])
    small = np.array([0.0, 1.0, -2.0])
    np.testing.assert_allclose(nn.softmax(x)[0], softmax_reference(small, 0), rtol=1e-14)
    np.testing.assert_array_equal(nn.softmax(x)[1], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(nn.logsumexp(x), [1e4 + np.log(np.exp(small).sum()), 0.0],
                               rtol=1e-15)
    with np.errstate(divide="ignore"):
        assert nn.logsumexp(np.full((2, 3), -np.inf))[0] == -np.inf
    assert pb.jit(nn.logsumexp)(np.full((2, 3), -np.inf))[0] == -np.inf
    assert nn.logsumexp(x, keepdims=True).shape == (2, 1)


TORCH_NAMES = {"relu": "relu", "elu": "elu", "silu": "silu", "sigmoid": "sigmoid",
               "tanh": "tanh", "softplus": "softplus"}


def test_against_torch() -> None:
    torch = pytest.importorskip("torch")
    fn = torch.nn.functional
    x = RNG.normal(scale=3, size=(4, 5))
    t = torch.tensor(x)
    for ours, theirs in TORCH_NAMES.items():
        np.testing.assert_allclose(ACTIVATIONS[ours][0](x), getattr(fn, theirs)(t).numpy(),
                                   rtol=1e-12, atol=1e-15, err_msg=ours)
    pairs = [
        (nn.gelu(x), fn.gelu(t, approximate="tanh")),
        (nn.gelu(x, approximate=False), fn.gelu(t)),
        (nn.leaky_relu(x, 0.1), fn.leaky_relu(t, 0.1)),
        (nn.softmax(x, axis=0), fn.softmax(t, dim=0)),
        (nn.log_softmax(x), fn.log_softmax(t, dim=-1)),
        (nn.logsumexp(x), torch.logsumexp(t, dim=-1)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12, atol=1e-15)
