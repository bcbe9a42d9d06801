"""pb.nn.MultiheadAttention against a head-by-head NumPy reference written out here (and
torch.nn.MultiheadAttention where torch imports): self and cross attention, masks,
causality; gradients against float64 central differences; compiled == eager; and the
gradient of a causal attention block compiled for C both ways round."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback import nn

from .test_losses import assert_grads_match

RNG = np.random.default_rng(5)
DIM, HEADS, BATCH, STEPS, SOURCES = 6, 2, 2, 4, 3


def make(bias: bool = True, seed: int = 0) -> nn.MultiheadAttention:
    """A layer with nonzero biases (init makes them zero, which would hide them)."""
    mha = nn.MultiheadAttention.init(pb.random.key(seed), DIM, HEADS, bias=bias,
                                     dtype=np.float64)
    if not bias:
        return mha
    return dataclasses.replace(mha, bq=RNG.normal(size=DIM), bk=RNG.normal(size=DIM),
                               bv=RNG.normal(size=DIM), bo=RNG.normal(size=DIM))


def reference(mha: nn.MultiheadAttention, query: np.ndarray, key: np.ndarray,
              value: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Each batch element and head on its own; ``allowed`` is ``[B, T, S]``."""
    def project(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        return x @ w + (0 if b is None else b)

    q, k, v = (project(x, w, b) for x, w, b in [(query, mha.wq, mha.bq),
                                                (key, mha.wk, mha.bk),
                                                (value, mha.wv, mha.bv)])
    width = DIM // HEADS
    out = np.zeros(query.shape)
    for n in range(query.shape[0]):
        for h in range(HEADS):
            cols = slice(h * width, (h + 1) * width)
            for t in range(query.shape[1]):
                seen = np.flatnonzero(allowed[n, t])
                scores = k[n, seen, cols] @ q[n, t, cols] / np.sqrt(width)
                weights = np.exp(scores) / np.exp(scores).sum()
                out[n, t, cols] = weights @ v[n, seen, cols]
    return project(out, mha.wo, mha.bo)


def inputs(sources: int = SOURCES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (RNG.normal(size=(BATCH, STEPS, DIM)), RNG.normal(size=(BATCH, sources, DIM)),
            RNG.normal(size=(BATCH, sources, DIM)))


def everywhere(steps: int, sources: int) -> np.ndarray:
    return np.ones((BATCH, steps, sources), bool)


def some_mask(shape: tuple[int, ...]) -> np.ndarray:
    """Random, with the first key always allowed so that no query attends nowhere."""
    mask = RNG.random(shape) < 0.6
    mask[..., 0] = True
    return mask


@pytest.mark.parametrize("bias", [True, False])
def test_cross_and_self_attention(bias: bool) -> None:
    mha = make(bias)
    query, key, value = inputs()
    np.testing.assert_allclose(mha(query, key, value),
                               reference(mha, query, key, value, everywhere(STEPS, SOURCES)),
                               rtol=1e-12, atol=1e-13)
    # key defaults to the query, value to the key.
    np.testing.assert_allclose(mha(query), mha(query, query, query), rtol=1e-15)
    np.testing.assert_allclose(mha(query, key), mha(query, key, key), rtol=1e-15)


@pytest.mark.parametrize("batched", [False, True])
def test_masks(batched: bool) -> None:
    mha, (query, key, value) = make(), inputs()
    mask = some_mask((BATCH, STEPS, SOURCES) if batched else (STEPS, SOURCES))
    np.testing.assert_allclose(mha(query, key, value, mask=mask),
                               reference(mha, query, key, value,
                                         np.broadcast_to(mask, (BATCH, STEPS, SOURCES))),
                               rtol=1e-12, atol=1e-13)


def test_causal() -> None:
    mha, (query, _, _) = make(), inputs()
    lower = np.tril(np.ones((STEPS, STEPS), bool))
    np.testing.assert_allclose(mha(query, causal=True),
                               reference(mha, query, query, query,
                                         np.broadcast_to(lower, (BATCH, STEPS, STEPS))),
                               rtol=1e-12, atol=1e-13)
    # A causal mask and a given one combine; later inputs never reach earlier outputs.
    mask = some_mask((BATCH, STEPS, STEPS))
    np.testing.assert_allclose(mha(query, mask=mask, causal=True),
                               reference(mha, query, query, query, mask & lower),
                               rtol=1e-12, atol=1e-13)
    changed = query.copy()
    changed[:, -1] += 1.0
    before, after = mha(query, causal=True), mha(changed, causal=True)
    np.testing.assert_array_equal(before[:, :-1], after[:, :-1])
    assert not np.allclose(before[:, -1], after[:, -1])


def test_query_that_sees_nothing() -> None:
    """Its context is zero (the output is the output bias), and nothing turns NaN: not
    the other queries, not the gradient."""
    mha, (query, key, _) = make(), inputs()
    mask = some_mask((STEPS, SOURCES))
    mask[1] = False
    out = mha(query, key, mask=mask)
    np.testing.assert_allclose(out[:, 1], np.broadcast_to(mha.bo, (BATCH, DIM)), rtol=1e-15)
    np.testing.assert_allclose(out, reference(mha, query, key, key,
                                              np.broadcast_to(mask, (BATCH, STEPS, SOURCES))),
                               rtol=1e-12, atol=1e-13)
    assert_grads_match(lambda m, q, k: attention_loss(m, q, k, mask), mha, query, key)


def test_init() -> None:
    mha = nn.MultiheadAttention.init(pb.random.key(2), 8, 4)
    assert mha.num_heads == 4
    for w in (mha.wq, mha.wk, mha.wv, mha.wo):
        assert w.shape == (8, 8) and w.dtype == np.float32
    assert np.all(np.abs(mha.wq) <= np.sqrt(6 / 32)) and np.all(np.abs(mha.wo) <= 1 / 8 ** 0.5)
    assert not np.array_equal(mha.wq, mha.wk)
    for b in (mha.bq, mha.bk, mha.bv, mha.bo):
        np.testing.assert_array_equal(b, np.zeros(8, np.float32))
    assert nn.MultiheadAttention.init(pb.random.key(2), 8, 4, bias=False).bq is None
    with pytest.raises(ValueError, match="multiple of num_heads"):
        nn.MultiheadAttention.init(pb.random.key(2), 6, 4)


def attention_loss(mha: nn.MultiheadAttention, query: np.ndarray, key: np.ndarray,
                   mask: np.ndarray) -> Any:
    return np.sum(np.sin(mha(query, key, mask=mask))) + np.sum(mha(query, causal=True) ** 2)


def test_gradients() -> None:
    """In every projection and bias, the query and the key/value input."""
    query, key, _ = inputs()
    mask = some_mask((STEPS, SOURCES))
    assert_grads_match(lambda m, q, k: attention_loss(m, q, k, mask), make(), query, key)


def test_compiled_matches_eager() -> None:
    mha, (query, key, _) = make(), inputs()
    mask = some_mask((BATCH, STEPS, SOURCES))
    np.testing.assert_allclose(pb.jit(attention_loss)(mha, query, key, mask),
                               attention_loss(mha, query, key, mask), rtol=1e-13)


def test_against_torch() -> None:
    torch = pytest.importorskip("torch")
    mha, (query, key, value) = make(), inputs()
    ref = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.from_numpy(np.concatenate([mha.wq.T, mha.wk.T,
                                                                  mha.wv.T])))
        ref.in_proj_bias.copy_(torch.from_numpy(np.concatenate([mha.bq, mha.bk, mha.bv])))
        ref.out_proj.weight.copy_(torch.from_numpy(np.ascontiguousarray(mha.wo.T)))
        ref.out_proj.bias.copy_(torch.from_numpy(mha.bo))
        mask = some_mask((STEPS, SOURCES))
        want, _ = ref(*map(torch.from_numpy, (query, key, value)),
                      attn_mask=torch.from_numpy(~mask))
        later = torch.from_numpy(np.triu(np.ones((STEPS, STEPS), bool), 1))
        causal, _ = ref(*map(torch.from_numpy, (query, query, query)), attn_mask=later)
    np.testing.assert_allclose(mha(query, key, value, mask=mask), want.numpy(), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(mha(query, causal=True), causal.numpy(), rtol=1e-12,
                               atol=1e-13)


@dataclasses.dataclass
class Block:
    """Causal self-attention with a residual connection, then a readout to class logits."""

    attention: nn.MultiheadAttention
    readout: Any

    def loss(self, x: np.ndarray, labels: np.ndarray) -> Any:
        h = x + self.attention(x, causal=True)
        return nn.softmax_cross_entropy_with_integer_labels(h @ self.readout, labels)


def block_loss(block: Block, x: np.ndarray, labels: np.ndarray) -> Any:
    return block.loss(x, labels)


def test_causal_block_gradient_on_c() -> None:
    """jit of grad and grad of jit, both compiled for C, give the interpreter's gradient
    (in the parameters and the input)."""
    block = Block(make(), RNG.normal(size=(DIM, 5)))
    x, labels = RNG.normal(size=(BATCH, STEPS, DIM)), RNG.integers(0, 5, (BATCH, STEPS))
    want = pb.tree_leaves(pb.grad(block_loss, argnums=(0, 1))(block, x, labels))
    for grad in (pb.jit(pb.grad(block_loss, argnums=(0, 1)), backend="c"),
                 pb.grad(pb.jit(block_loss, backend="c"), argnums=(0, 1))):
        for g, w in zip(pb.tree_leaves(grad(block, x, labels)), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)
