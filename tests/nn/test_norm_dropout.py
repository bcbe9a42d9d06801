"""pb.nn LayerNorm, BatchNorm and Dropout: outputs and running statistics against NumPy
references written out here (and torch's BatchNorm2d where torch imports), gradients
against float64 central differences, compiled == eager, dropout's masks by key."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback import nn

from .test_losses import assert_grads_match

RNG = np.random.default_rng(17)


# -- LayerNorm ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5,), (3, 5)])
def test_layer_norm(shape: tuple[int, ...]) -> None:
    norm = nn.LayerNorm.init(shape, eps=1e-3, dtype=np.float64)
    assert (norm.weight == 1).all() and (norm.bias == 0).all() and norm.weight.shape == shape
    norm = nn.LayerNorm(RNG.normal(size=shape), RNG.normal(size=shape), eps=1e-3)
    x = RNG.normal(size=(2, 3, 5))
    want = np.empty_like(x)
    for i in np.ndindex(x.shape[:x.ndim - len(shape)]):  # each normalised group
        v = x[i]
        want[i] = (v - v.mean()) / np.sqrt(v.var() + 1e-3) * norm.weight + norm.bias
    np.testing.assert_allclose(norm(x), want, rtol=1e-12)
    np.testing.assert_allclose(pb.jit(lambda m, v: m(v))(norm, x), want, rtol=1e-12)
    weights = RNG.normal(size=x.shape)
    assert_grads_match(lambda m, v: np.sum(m(v) * weights), norm, x)
    assert nn.LayerNorm.init(5)(x.astype(np.float32)).dtype == np.float32


# -- BatchNorm ------------------------------------------------------------------------------

def batch_norm_reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                         mean: np.ndarray, var: np.ndarray, train: bool, momentum: float,
                         eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Channel by channel: normalise by the batch's statistics (training) or the running
    ones; the running variance moves towards the unbiased batch variance."""
    y = np.empty_like(x)
    mean, var = mean.copy(), var.copy()
    for c in range(x.shape[1]):
        values = x[:, c]
        if train:
            mu, sigma2 = values.mean(), values.var()
            mean[c] = (1 - momentum) * mean[c] + momentum * mu
            var[c] = (1 - momentum) * var[c] + momentum * values.var(ddof=1)
        else:
            mu, sigma2 = mean[c], var[c]
        y[:, c] = (values - mu) / np.sqrt(sigma2 + eps) * weight[c] + bias[c]
    return y, mean, var


@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 4, 5)])
def test_batch_norm_train_then_eval(shape: tuple[int, ...]) -> None:
    """Three training steps and an evaluation, eager and compiled, against the
    reference."""
    fresh = nn.BatchNorm.init(shape[1], momentum=0.3, eps=1e-4, dtype=np.float64)
    assert (fresh.weight == 1).all() and (fresh.bias == 0).all()
    bn = nn.BatchNorm(RNG.normal(size=shape[1]), RNG.normal(size=shape[1]), 0.3, 1e-4)
    state = bn.initial_state()
    np.testing.assert_array_equal(state.mean, 0.0)
    np.testing.assert_array_equal(state.var, 1.0)
    mean, var = state.mean, state.var
    step = pb.jit(lambda m, v, s, train: m(v, s, train=train))
    for i in range(4):
        train = i < 3
        x = RNG.normal(loc=i, scale=1 + i, size=shape)
        y_want, mean, var = batch_norm_reference(x, bn.weight, bn.bias, mean, var, train,
                                                 0.3, 1e-4)
        y, new = bn(x, state, train=train)
        y_jit, new_jit = step(bn, x, state, train)
        for got in ((y, new), (y_jit, new_jit)):
            np.testing.assert_allclose(got[0], y_want, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(got[1].mean, mean, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(got[1].var, var, rtol=1e-12)
        state = new


@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_gradients(train: bool) -> None:
    bn = nn.BatchNorm(RNG.normal(size=3), RNG.normal(size=3))
    state = nn.BatchNormState(RNG.normal(size=3), RNG.random(3) + 0.5)
    x = RNG.normal(size=(4, 3, 2))
    weights = RNG.normal(size=x.shape)
    assert_grads_match(lambda m, v: np.sum(m(v, state, train=train)[0] * weights), bn, x)


def test_batch_norm_needs_two_values_per_channel() -> None:
    bn = nn.BatchNorm.init(3)
    with pytest.raises(ValueError, match="more than one value"):
        bn(np.ones((1, 3), np.float32), bn.initial_state())
    y, state = bn(np.ones((1, 3), np.float32), bn.initial_state(), train=False)
    assert y.dtype == state.mean.dtype == np.float32


def test_batch_norm_against_torch() -> None:
    torch = pytest.importorskip("torch")
    theirs = torch.nn.BatchNorm2d(3, momentum=0.2, eps=1e-3).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(RNG.normal(size=3)))
        theirs.bias.copy_(torch.tensor(RNG.normal(size=3)))
    bn = nn.BatchNorm(theirs.weight.detach().numpy().copy(), theirs.bias.detach().numpy().copy(),
                      momentum=0.2, eps=1e-3)
    state = bn.initial_state()
    theirs.train()
    for _ in range(3):
        x = RNG.normal(loc=2, scale=3, size=(4, 3, 2, 5))
        y, state = bn(x, state)
        np.testing.assert_allclose(y, theirs(torch.tensor(x)).detach().numpy(), rtol=1e-11)
    np.testing.assert_allclose(state.mean, theirs.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(state.var, theirs.running_var.numpy(), rtol=1e-12)
    theirs.eval()
    x = RNG.normal(size=(2, 3, 2, 5))
    np.testing.assert_allclose(bn(x, state, train=False)[0],
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-11)


# -- Dropout ---------------------------------------------------------------------------------

def test_dropout_masks() -> None:
    """About ``rate`` of the elements zeroed, the rest scaled by 1 / (1 - rate); the same
    key gives the same mask, eagerly and compiled, another key another mask."""
    drop, key = nn.Dropout(0.25), pb.random.key(1)
    x = RNG.random((100, 100)) + 1.0
    y = drop(x, key)
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-15)
    np.testing.assert_array_equal(pb.jit(lambda d, v, k: d(v, k))(drop, x, key), y)
    np.testing.assert_array_equal(drop(x, key), y)
    assert not np.array_equal(drop(x, pb.random.key(2)) != 0, kept)
    assert drop(x.astype(np.float32), key).dtype == np.float32


def test_dropout_gradient_is_the_mask() -> None:
    drop, key = nn.Dropout(0.5), pb.random.key(4)
    x = RNG.normal(size=(3, 4))
    g = pb.grad(lambda v: np.sum(drop(v, key)))(x)
    np.testing.assert_array_equal(g, (drop(x, key) != 0) * 2.0)
    assert_grads_match(lambda v: np.sum(drop(v, key) * np.sin(v)), x)


def test_dropout_identity_and_edge_rates() -> None:
    x = RNG.normal(size=(2, 3))
    assert nn.Dropout(0.5)(x, train=False) is x
    assert nn.Dropout(0.0)(x, pb.random.key(0)) is x
    np.testing.assert_array_equal(nn.Dropout(1.0)(x, pb.random.key(0)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="needs a key"):
        nn.Dropout(0.5)(x)
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout(1.5)(x, train=False)
    assert pb.tree_leaves(nn.Dropout(0.5)) == []


def test_dropout_in_eval_compiles_to_the_identity() -> None:
    x = RNG.normal(size=(2, 3))
    fn = pb.jit(lambda d, v, train: d(v, train=train))
    np.testing.assert_array_equal(fn(nn.Dropout(0.3), x, False), x)
