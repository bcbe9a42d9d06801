"""float32 in, float32 out: every layer, activation and loss keeps its parameters' and
inputs' precision, eagerly and compiled, and so do the gradients (a float64 constant
such as ``np.sqrt(d)`` of an int would promote everything after it to float64, as NumPy
does, and a model would train at half speed)."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback import nn

K = pb.random.split(pb.random.key(3), 8)
X = np.linspace(-1, 1, 2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)
SEQ = np.linspace(-1, 1, 2 * 5 * 4, dtype=np.float32).reshape(2, 5, 4)
IDS = np.array([[1, 2, 0], [3, 3, 1]])
LABELS = np.array([1, 0])

LAYERS = {
    "linear": (nn.Linear.init(K[0], 4, 3), SEQ),
    "embedding": (nn.Embedding.init(K[1], 5, 4), IDS),
    "conv1d": (nn.Conv1d.init(K[2], 5, 2, 3, padding=1), SEQ),
    "conv2d": (nn.Conv2d.init(K[3], 3, 4, 3, stride=2, padding=1), X),
    "max_pool": (nn.MaxPool2d(2), X),
    "avg_pool": (nn.AvgPool2d(3, 2, 1), X),
    "layer_norm": (nn.LayerNorm.init(4), SEQ),
    "rnn": (nn.RNN.init(K[4], 4, 3), SEQ),
    "lstm": (nn.LSTM.init(K[5], 4, 3), SEQ),
    "gru": (nn.GRU.init(K[6], 4, 3), SEQ),
    "attention": (nn.MultiheadAttention.init(K[7], 4, 2), SEQ),
}


def _apply(name, layer, x):
    if name == "attention":
        return layer(x, causal=True)
    out = layer(x)
    return out[0] if name in ("rnn", "lstm", "gru") else out


@pytest.mark.parametrize("name", LAYERS)
def test_layers_keep_float32(name):
    layer, x = LAYERS[name]

    def loss(layer, x):
        return np.sum(_apply(name, layer, x) ** 2)

    assert _apply(name, layer, x).dtype == np.float32
    assert pb.jit(lambda m, v: _apply(name, m, v))(layer, x).dtype == np.float32
    for g in pb.tree_leaves(pb.grad(loss)(layer, x)):
        assert g.dtype == np.float32


def test_batch_norm_dropout_activations_and_losses_keep_float32():
    bn = nn.BatchNorm.init(3)
    y, state = bn(X, bn.initial_state(), train=True)
    assert y.dtype == state.mean.dtype == state.var.dtype == np.float32
    assert nn.Dropout(0.5)(X, pb.random.key(0)).dtype == np.float32
    logits = SEQ[:, 0, :]
    for f in (nn.relu, nn.gelu, nn.silu, nn.sigmoid, nn.tanh, nn.softplus, nn.elu,
              nn.leaky_relu, nn.softmax, nn.log_softmax):
        assert f(logits).dtype == np.float32, f.__name__
    losses = [nn.softmax_cross_entropy_with_integer_labels(logits, LABELS, label_smoothing=0.1),
              nn.softmax_cross_entropy(logits, nn.softmax(logits)),
              nn.nll_loss(nn.log_softmax(logits), LABELS), nn.mse(logits, logits * 0.5),
              nn.binary_cross_entropy_with_logits(logits, (logits > 0).astype(np.float32))]
    assert all(np.asarray(v).dtype == np.float32 for v in losses)
