"""pb.nn recurrent cells and layers against per-gate NumPy references written out here
(and torch.nn.RNN/LSTM/GRU where torch imports), gradients in the parameters and the
inputs against float64 central differences, compiled == eager, and the gradient of a
small LSTM language model compiled for C both ways round (jit of grad, grad of jit)."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback import nn

from .test_losses import assert_grads_match, differences

RNG = np.random.default_rng(7)
IN, HID, BATCH, STEPS = 3, 4, 2, 4
LAYERS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def gate(cell: Any, k: int, x: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gate ``k``'s input and hidden pre-activations, from its own columns of the weights."""
    cols = slice(k * HID, (k + 1) * HID)
    return (x @ cell.w_ih[:, cols] + cell.b_ih[cols], h @ cell.w_hh[:, cols] + cell.b_hh[cols])


def reference_step(cell: Any, x: np.ndarray, state: Any) -> Any:
    """One step by the textbook equations, gate by gate."""
    if isinstance(cell, nn.LSTMCell):
        h, c = state
        i, f, g, o = (sum(gate(cell, k, x, h)) for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    if isinstance(cell, nn.GRUCell):
        r, z = (sigmoid(sum(gate(cell, k, x, state))) for k in range(2))
        n_in, n_h = gate(cell, 2, x, state)
        n = np.tanh(n_in + r * n_h)
        return (1 - z) * n + z * state
    return np.tanh(sum(gate(cell, 0, x, state)))


def reference_layer(layer: Any, xs: np.ndarray, state: Any) -> tuple[np.ndarray, Any]:
    ys = np.zeros((xs.shape[0], xs.shape[1], HID))
    for t in range(xs.shape[1]):
        state = reference_step(layer.cell, xs[:, t], state)
        ys[:, t] = state[0] if isinstance(state, tuple) else state
    return ys, state


def make(name: str, seed: int = 0, **kwargs: Any) -> Any:
    return LAYERS[name].init(pb.random.key(seed), IN, HID, dtype=np.float64, **kwargs)


def random_state(name: str) -> Any:
    if name == "lstm":
        return RNG.normal(size=(BATCH, HID)), RNG.normal(size=(BATCH, HID))
    return RNG.normal(size=(BATCH, HID))


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_reference(name: str) -> None:
    layer = make(name)
    xs = RNG.normal(size=(BATCH, STEPS, IN))
    for state in (None, random_state(name)):
        start = layer.cell.initial_state(BATCH) if state is None else state
        ys, last = layer(xs, state)
        want_ys, want_last = reference_layer(layer, xs, start)
        np.testing.assert_allclose(ys, want_ys, rtol=1e-12, atol=1e-14)
        for got, want in zip(pb.tree_leaves(last), pb.tree_leaves(want_last), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", LAYERS)
def test_cell_on_one_example(name: str) -> None:
    """A cell steps an unbatched ``x [F]`` and state ``[H]`` as it steps a batch's row."""
    cell = make(name).cell
    x, state = RNG.normal(size=(BATCH, IN)), random_state(name)
    batched = pb.tree_leaves(cell(x, state))
    for b in range(BATCH):
        row = pb.tree_map(operator.itemgetter(b), state)
        alone = pb.tree_leaves(cell(x[b], row))
        for got, want in zip(alone, batched, strict=True):
            np.testing.assert_allclose(got, want[b], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", LAYERS)
def test_init(name: str) -> None:
    layer = LAYERS[name].init(pb.random.key(3), IN, HID)
    gates = {"rnn": 1, "lstm": 4, "gru": 3}[name]
    cell = layer.cell
    assert cell.w_ih.shape == (IN, gates * HID) and cell.w_hh.shape == (HID, gates * HID)
    assert cell.b_ih.shape == cell.b_hh.shape == (gates * HID,)
    for w in pb.tree_leaves(cell):
        assert w.dtype == np.float32
        assert np.all(np.abs(w) <= 1 / np.sqrt(HID)) and np.std(w) > 0.1
    # The same key gives the same layer; the four arrays are drawn independently.
    again = LAYERS[name].init(pb.random.key(3), IN, HID)
    assert all(np.array_equal(a, b) for a, b in zip(pb.tree_leaves(layer),
                                                     pb.tree_leaves(again), strict=True))
    assert not np.array_equal(cell.b_ih, cell.b_hh)


@pytest.mark.parametrize("name", LAYERS)
def test_without_bias(name: str) -> None:
    layer = make(name, bias=False)
    assert layer.cell.b_ih is None and layer.cell.b_hh is None
    zero = np.zeros(layer.cell.w_hh.shape[1])
    with_zero_bias = dataclasses.replace(
        layer, cell=dataclasses.replace(layer.cell, b_ih=zero, b_hh=zero))
    xs = RNG.normal(size=(BATCH, STEPS, IN))
    np.testing.assert_array_equal(layer(xs)[0], with_zero_bias(xs)[0])


def sequence_loss(layer: Any, xs: np.ndarray, state: Any) -> Any:
    """A scalar that weighs every output and every part of the last state."""
    ys, last = layer(xs, state)
    return np.sum(np.sin(ys)) + sum(np.sum(s * s) for s in pb.tree_leaves(last))


@pytest.mark.parametrize("name", LAYERS)
def test_gradients(name: str) -> None:
    """In every weight and bias, the inputs and the initial state."""
    assert_grads_match(sequence_loss, make(name), RNG.normal(size=(BATCH, 3, IN)),
                       random_state(name))


@pytest.mark.parametrize("name", LAYERS)
def test_compiled_matches_eager(name: str) -> None:
    layer, xs, state = make(name), RNG.normal(size=(BATCH, STEPS, IN)), random_state(name)
    np.testing.assert_allclose(pb.jit(sequence_loss)(layer, xs, state),
                               sequence_loss(layer, xs, state), rtol=1e-13)


@pytest.mark.parametrize("steps", [1, STEPS])
def test_dtypes_promote_as_in_numpy(steps: int) -> None:
    """float32 weights keep float32 inputs float32 and turn float64 inputs float64 (the
    state promotes in the first step), eager and compiled alike."""
    layer = nn.LSTM.init(pb.random.key(1), IN, HID)
    run = pb.jit(lambda layer, xs: layer(xs))
    for dtype in (np.float32, np.float64):
        xs = RNG.normal(size=(BATCH, steps, IN)).astype(dtype)
        want, got = layer(xs), run(layer, xs)
        for g, w in zip(pb.tree_leaves(got), pb.tree_leaves(want), strict=True):
            assert g.dtype == w.dtype == dtype
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_sequence_loop_stays_a_loop() -> None:
    """The staged program does not grow with the sequence length (an unrolled loop made
    the gradient of a 100-step LSTM take seconds to stage)."""
    layer = make("gru")
    staged = pb.make_ir(lambda layer, xs: layer(xs))
    lines = {len(str(staged(layer, np.zeros((1, steps, IN)))).splitlines()) for steps in (3, 30)}
    assert len(lines) == 1


@pytest.mark.parametrize("name", LAYERS)
def test_against_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    layer, xs = make(name), RNG.normal(size=(BATCH, STEPS, IN))
    ref = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[name](
        IN, HID, batch_first=True).double()
    cell = layer.cell
    with torch.no_grad():
        for theirs, ours in [(ref.weight_ih_l0, cell.w_ih.T), (ref.weight_hh_l0, cell.w_hh.T),
                             (ref.bias_ih_l0, cell.b_ih), (ref.bias_hh_l0, cell.b_hh)]:
            theirs.copy_(torch.from_numpy(np.ascontiguousarray(ours)))
        want, _ = ref(torch.from_numpy(xs))
    np.testing.assert_allclose(layer(xs)[0], want.numpy(), rtol=1e-12, atol=1e-14)


@dataclasses.dataclass
class LanguageModel:
    """Token embedding -> LSTM -> logits, with weights as plain arrays."""

    embed: Any
    lstm: Any
    head: Any

    def loss(self, tokens: np.ndarray) -> Any:
        """Next-token cross-entropy over a batch of token sequences ``[B, T + 1]``."""
        ys, _ = self.lstm(self.embed[tokens[:, :-1]])
        return nn.softmax_cross_entropy_with_integer_labels(ys @ self.head, tokens[:, 1:])


def language_model(vocab: int = 5) -> LanguageModel:
    k_lstm, k_embed, k_head = pb.random.split(pb.random.key(11), 3)
    return LanguageModel(pb.random.normal(k_embed, (vocab, IN)),
                         nn.LSTM.init(k_lstm, IN, HID, dtype=np.float64),
                         pb.random.normal(k_head, (HID, vocab)))


def lm_loss(model: LanguageModel, tokens: np.ndarray) -> Any:
    return model.loss(tokens)


def test_language_model_gradient() -> None:
    """The model's gradient (interpreter) against central differences."""
    tokens = RNG.integers(0, 5, (BATCH, STEPS + 1))
    assert_grads_match(lambda m: lm_loss(m, tokens), language_model())


def test_language_model_gradient_on_c() -> None:
    """jit of grad and grad of jit, both compiled for C, give the interpreter's gradient."""
    model, tokens = language_model(), RNG.integers(0, 5, (BATCH, STEPS + 1))
    want = pb.tree_leaves(pb.grad(lm_loss)(model, tokens))
    for grad in (pb.jit(pb.grad(lm_loss), backend="c"),
                 pb.grad(pb.jit(lm_loss, backend="c"))):
        for g, w in zip(pb.tree_leaves(grad(model, tokens)), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)


SHAPES = [(1, 1), (1, 5), (3, 1), (3, 5)]  # (batch, steps)


def lengths_and_batches_loss(layer: Any, xs: np.ndarray, state: Any) -> Any:
    """``sequence_loss`` weighing each step differently, so a step's input product landing
    on another step (the layer computes every step's ``x @ w_ih`` before the loop) shows."""
    ys, last = layer(xs, state)
    weights = np.arange(1, ys.shape[1] + 1)[:, None]
    return np.sum(np.sin(ys) * weights) + sum(np.sum(s * s) for s in pb.tree_leaves(last))


def random_state_for(name: str, batch: int) -> Any:
    if name == "lstm":
        return RNG.normal(size=(batch, HID)), RNG.normal(size=(batch, HID))
    return RNG.normal(size=(batch, HID))


@pytest.mark.parametrize("batch,steps", SHAPES)
@pytest.mark.parametrize("name", LAYERS)
def test_whole_sequence_input_product(name: str, batch: int, steps: int) -> None:
    """The input products computed for the whole sequence at once give the textbook
    step-by-step values, and gradients in every weight, bias, input and the initial
    state equal central differences, for one and several steps and sequences."""
    layer, xs = make(name), RNG.normal(size=(batch, steps, IN))
    state = random_state_for(name, batch)
    ys, last = layer(xs, state)
    want_ys, want_last = reference_layer(layer, xs, state)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-12, atol=1e-14)
    for got, want in zip(pb.tree_leaves(last), pb.tree_leaves(want_last), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert_grads_match(lengths_and_batches_loss, layer, xs, state)


@pytest.mark.parametrize("batch,steps", [(1, 1), (3, 5)])
def test_whole_sequence_input_product_on_c(batch: int, steps: int) -> None:
    """The LSTM's gradient compiled for C (the input products one GEMM before the loop,
    their gradients one after it) equals central differences."""
    layer, xs = make("lstm"), RNG.normal(size=(batch, steps, IN))
    state = random_state_for("lstm", batch)
    args = (layer, xs, state)
    got = pb.jit(pb.grad(lengths_and_batches_loss, argnums=(0, 1, 2)), backend="c")(*args)
    want = differences(lengths_and_batches_loss, *args)
    for g, w in zip(pb.tree_leaves(got), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("missing", ["b_ih", "b_hh"])
def test_one_bias_missing(name: str, missing: str) -> None:
    """A cell with only one of its biases computes as if the other were zero (the LSTM's
    and RNN's hidden bias joins the input's, the GRU's stays in the hidden part)."""
    layer = make(name)
    without = dataclasses.replace(layer, cell=dataclasses.replace(layer.cell, **{missing: None}))
    zero = dataclasses.replace(layer, cell=dataclasses.replace(
        layer.cell, **{missing: np.zeros(layer.cell.w_hh.shape[1])}))
    xs = RNG.normal(size=(BATCH, STEPS, IN))
    np.testing.assert_array_equal(without(xs)[0], zero(xs)[0])
