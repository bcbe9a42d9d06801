"""pb.nn dense, embedding, convolution and pooling layers: outputs against NumPy loops
written from the definitions (and torch where it imports), gradients in the parameters
and the input against float64 central differences, compiled == eager, and a small CNN's
gradient on the C backend, compiled inside and outside the derivative."""

from __future__ import annotations

import dataclasses
import re
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback import nn
from pullback.nn import functional as F

from .test_losses import assert_grads_match

PAGE = Path(__file__).resolve().parents[2] / "docs" / "nn.md"
RNG = np.random.default_rng(5)
KEYS = pb.random.split(pb.random.key(7), 8)


def call(module: Any, x: Any) -> Any:
    return module(x)


def assert_compiled_matches(module: Any, x: np.ndarray) -> None:
    np.testing.assert_allclose(pb.jit(call)(module, x), module(x), rtol=1e-13, atol=1e-14)


def assert_module_grads_match(module: Any, x: np.ndarray) -> None:
    """The gradient of a weighted sum of the output in every parameter and the input."""
    weights = RNG.normal(size=np.shape(module(x)))
    assert_grads_match(lambda m, v: np.sum(m(v) * weights), module, x)


# -- Linear, Embedding, Lambda, Sequential --------------------------------------------------

def test_linear_init_is_torchs() -> None:
    layer = nn.Linear.init(KEYS[0], 16, 300)
    assert layer.weight.shape == (16, 300) and layer.bias.shape == (300,)
    assert layer.weight.dtype == layer.bias.dtype == np.float32
    assert 0.24 < np.abs(layer.weight).max() <= 0.25 and np.abs(layer.bias).max() <= 0.25
    assert nn.Linear.init(KEYS[0], 16, 3, bias=False).bias is None
    assert nn.Linear.init(KEYS[0], 2, 3, dtype=np.float64).weight.dtype == np.float64


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias: bool) -> None:
    layer = nn.Linear.init(KEYS[1], 4, 3, bias=bias, dtype=np.float64)
    x = RNG.normal(size=(5, 4))
    want = np.array([[sum(x[n, i] * layer.weight[i, o] for i in range(4))
                      + (layer.bias[o] if bias else 0.0) for o in range(3)] for n in range(5)])
    np.testing.assert_allclose(layer(x), want, rtol=1e-13)
    assert_compiled_matches(layer, x)
    assert_module_grads_match(layer, x)


@dataclasses.dataclass
class FrozenLinear(nn.Linear):
    """A Linear whose weight is a frozen leaf: passed along, never differentiated."""

    weight: Any = pb.field(frozen=True, default=None)


def test_frozen_weight_gets_no_gradient() -> None:
    layer = nn.Linear.init(KEYS[2], 3, 2, dtype=np.float64)
    frozen = FrozenLinear(layer.weight, layer.bias)
    x = RNG.normal(size=(4, 3))
    g = pb.grad(lambda m: np.sum(m(x) ** 2))(frozen)
    assert isinstance(g, FrozenLinear) and g.weight is None
    np.testing.assert_allclose(g.bias, pb.grad(lambda m: np.sum(m(x) ** 2))(layer).bias)


def test_embedding() -> None:
    table = nn.Embedding.init(KEYS[3], 6, 2, dtype=np.float64)
    assert table.weight.shape == (6, 2) and abs(nn.Embedding.init(KEYS[3], 400, 50).weight
                                                .std() - 1) < 0.02
    ids = np.array([[1, 4, 1], [0, 5, 1]])
    np.testing.assert_array_equal(table(ids), table.weight[[1, 4, 1, 0, 5, 1]].reshape(2, 3, 2))
    np.testing.assert_array_equal(pb.jit(call)(table, ids), table(ids))
    weights = RNG.normal(size=(2, 3, 2))
    g = pb.grad(lambda t: np.sum(t(ids) * weights))(table).weight
    want = np.zeros((6, 2))
    for (a, b), i in np.ndenumerate(ids):
        want[i] += weights[a, b]  # a repeated id gathers every use's gradient
    np.testing.assert_allclose(g, want, rtol=1e-14)


def test_sequential_and_lambda() -> None:
    first = nn.Linear.init(KEYS[4], 3, 5, dtype=np.float64)
    second = nn.Linear.init(KEYS[5], 5, 2, dtype=np.float64)
    model = nn.Sequential((first, nn.Lambda(nn.tanh), second))
    x = RNG.normal(size=(4, 3))
    np.testing.assert_allclose(model(x), second(np.tanh(first(x))), rtol=1e-14)
    assert len(pb.tree_leaves(model)) == 4  # the Lambda's function is structure
    assert_compiled_matches(model, x)
    assert_module_grads_match(model, x)


# -- convolution ------------------------------------------------------------------------------

def conv_reference(x: np.ndarray, w: np.ndarray, stride: tuple, pads: tuple,
                   dilation: tuple, groups: int) -> np.ndarray:
    """The definition: out[n, o, p] = sum over the group's channels c and window offsets k
    of padded x[n, c, p * stride + k * dilation] * w[o, c, k]."""
    n_sp = w.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    window = w.shape[2:]
    out_shape = [(xp.shape[2 + i] - dilation[i] * (window[i] - 1) - 1) // stride[i] + 1
                 for i in range(n_sp)]
    out = np.zeros((x.shape[0], w.shape[0], *out_shape))
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    for o in range(w.shape[0]):
        channels = slice(o // cout * cin, (o // cout + 1) * cin)
        for p in np.ndindex(*out_shape):
            for k in np.ndindex(*window):
                at = tuple(p[i] * stride[i] + k[i] * dilation[i] for i in range(n_sp))
                out[(slice(None), o, *p)] += xp[(slice(None), channels, *at)] @ w[(o, slice(None),
                                                                                    *k)]
    return out


#: (x shape, w shape, keywords, the reference's stride, (lo, hi) pads, dilation)
CONVS = {
    "2d": ((2, 3, 5, 6), (4, 3, 3, 2), {}, (1, 1), ((0, 0), (0, 0)), (1, 1)),
    "2d_strided_padded": ((1, 2, 6, 7), (3, 2, 3, 3), {"stride": 2, "padding": 1},
                          (2, 2), ((1, 1), (1, 1)), (1, 1)),
    "2d_groups_dilation": ((2, 4, 7, 6), (6, 2, 2, 3),
                           {"groups": 2, "dilation": (2, 1), "stride": (1, 2),
                            "padding": ((1, 0), (0, 2))},
                           (1, 2), ((1, 0), (0, 2)), (2, 1)),
    "2d_same": ((1, 2, 5, 4), (2, 2, 2, 3), {"padding": "same", "dilation": (1, 2)},
                (1, 1), ((0, 1), (2, 2)), (1, 2)),
    "1d_depthwise": ((2, 3, 9), (3, 1, 3), {"groups": 3, "padding": "valid", "stride": 2},
                     (2,), ((0, 0),), (1,)),
}


@pytest.mark.parametrize("name", CONVS)
def test_conv(name: str) -> None:
    xs, ws, kw, stride, pads, dilation = CONVS[name]
    x, w = RNG.normal(size=xs), RNG.normal(size=ws)
    want = conv_reference(x, w, stride, pads, dilation, kw.get("groups", 1))
    np.testing.assert_allclose(F.conv(x, w, **kw), want, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(pb.jit(lambda a, b: F.conv(a, b, **kw))(x, w), want,
                               rtol=1e-12, atol=1e-13)
    weights = RNG.normal(size=want.shape)
    assert_grads_match(lambda a, b: np.sum(F.conv(a, b, **kw) * weights), x, w)


def test_conv_keeps_float32_and_checks_shapes() -> None:
    x, w = RNG.normal(size=(1, 4, 5, 5)).astype(np.float32), RNG.normal(size=(2, 2, 3, 3))
    w32 = w.astype(np.float32)
    assert F.conv(x, w32, groups=2).dtype == np.float32
    assert pb.jit(lambda a, b: F.conv(a, b, groups=2))(x, w32).dtype == np.float32
    with pytest.raises(ValueError, match="groups"):
        F.conv(x, w)
    with pytest.raises(ValueError, match="same"):
        F.conv(x, w, stride=2, padding="same", groups=2)
    with pytest.raises(ValueError, match="one rank"):
        F.conv(x[0], w)


@pytest.mark.parametrize("layer", [nn.Conv1d, nn.Conv2d])
def test_conv_layers(layer: type) -> None:
    conv = layer.init(KEYS[6], 4, 6, 3, stride=2, padding=1, groups=2, dtype=np.float64)
    window = (3,) * layer.spatial
    assert conv.weight.shape == (6, 2, *window) and conv.bias.shape == (6,)
    bound = 1 / np.sqrt(2 * 3 ** layer.spatial)  # torch's: 1/sqrt(in/groups * window)
    assert np.abs(conv.weight).max() <= bound and np.abs(conv.bias).max() <= bound
    x = RNG.normal(size=(2, 4, *(5,) * layer.spatial))
    want = F.conv(x, conv.weight, 2, 1, groups=2) + conv.bias.reshape((6,) + (1,) * layer.spatial)
    np.testing.assert_allclose(conv(x), want, rtol=1e-14)
    assert len(pb.tree_leaves(conv)) == 2  # stride, padding, dilation, groups are structure
    assert_compiled_matches(conv, x)
    assert_module_grads_match(conv, x)
    no_bias = layer.init(KEYS[6], 4, 6, 3, bias=False, padding="same")
    assert no_bias.bias is None and no_bias(x.astype(np.float32)).shape == (2, 6, *x.shape[2:])


# -- pooling ----------------------------------------------------------------------------------

def pool_reference(x: np.ndarray, window: tuple, stride: tuple, pad: tuple, mode: str
                   ) -> np.ndarray:
    """Each output is the max (or the mean, padding included) of its window of x padded
    by -inf (zeros)."""
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x, [(0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])], constant_values=fill)
    rows = (xp.shape[2] - window[0]) // stride[0] + 1
    cols = (xp.shape[3] - window[1]) // stride[1] + 1
    out = np.zeros(x.shape[:2] + (rows, cols))
    for i in range(rows):
        for j in range(cols):
            block = xp[:, :, i * stride[0]:i * stride[0] + window[0],
                       j * stride[1]:j * stride[1] + window[1]]
            out[:, :, i, j] = block.max(axis=(2, 3)) if mode == "max" else block.mean(axis=(2, 3))
    return out


#: (kernel_size, stride, padding) as the layers take them, and per axis for the reference
POOLS = {
    "2x2": ((2, None, 0), ((2, 2), (2, 2), (0, 0))),
    "3x3_stride2_pad1": ((3, 2, 1), ((3, 3), (2, 2), (1, 1))),
    "2x3_overlapping": (((2, 3), (1, 2), (1, 0)), ((2, 3), (1, 2), (1, 0))),
}


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("name", POOLS)
def test_pools(name: str, mode: str) -> None:
    (kernel, stride, padding), reference = POOLS[name]
    layer = (nn.MaxPool2d if mode == "max" else nn.AvgPool2d)(kernel, stride, padding)
    assert pb.tree_leaves(layer) == []
    x = RNG.normal(size=(2, 3, 6, 7))
    np.testing.assert_allclose(layer(x), pool_reference(x, *reference, mode), rtol=1e-14,
                               atol=1e-14)
    assert_compiled_matches(layer, x)
    weights = RNG.normal(size=layer(x).shape)
    assert_grads_match(lambda v: np.sum(layer(v) * weights), x)


def test_functional_pools_of_1d_and_3d() -> None:
    x = RNG.normal(size=(2, 3, 7))
    want = np.stack([x[..., i:i + 3].max(axis=-1) for i in range(0, 5, 2)], axis=-1)
    np.testing.assert_array_equal(F.max_pool(x, 3, 2), want)
    y = RNG.normal(size=(1, 2, 4, 4, 4))
    want = y.reshape(1, 2, 2, 2, 2, 2, 2, 2).mean(axis=(3, 5, 7))
    np.testing.assert_allclose(F.avg_pool(y, 2), want, rtol=1e-14)
    with pytest.raises(ValueError, match="larger than"):
        F.max_pool(x, 8)


# -- a small CNN on the C backend ------------------------------------------------------------

def small_cnn(key: Any) -> nn.Sequential:
    k = pb.random.split(key, 2)
    return nn.Sequential((nn.Conv2d.init(k[0], 2, 4, 3, padding=1, dtype=np.float64),
                          nn.Lambda(nn.relu), nn.MaxPool2d(2),
                          nn.Lambda(lambda v: v.reshape(v.shape[0], -1)),
                          nn.Linear.init(k[1], 4 * 3 * 3, 5, dtype=np.float64)))


def cnn_loss(model: nn.Sequential, x: np.ndarray) -> Any:
    return np.mean(nn.log_softmax(model(x))[:, 0])


@pytest.mark.parametrize("order", ["jit_of_grad", "grad_of_jit"])
def test_small_cnn_gradient_on_c(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter's gradient, from one compiled gradient and from the derivative of
    a compiled loss (a transform called from Python compiles with the default backend,
    so that one runs with PULLBACK_BACKEND=c)."""
    model, x = small_cnn(KEYS[7]), RNG.normal(size=(3, 2, 6, 6))
    want = pb.grad(cnn_loss, argnums=(0, 1))(model, x)
    if order == "jit_of_grad":
        got = pb.jit(pb.grad(cnn_loss, argnums=(0, 1)), backend="c")(model, x)
    else:
        monkeypatch.setenv("PULLBACK_BACKEND", "c")
        got = pb.grad(pb.jit(cnn_loss), argnums=(0, 1))(model, x)
    assert pb.tree_structure(got) == pb.tree_structure(want)
    for g, w in zip(pb.tree_leaves(got), pb.tree_leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


# -- torch ---------------------------------------------------------------------------------

def test_against_torch() -> None:
    torch = pytest.importorskip("torch")
    fn = torch.nn.functional
    x = RNG.normal(size=(2, 4, 9, 8))
    t = torch.tensor(x)
    conv = nn.Conv2d.init(KEYS[0], 4, 6, (3, 2), stride=(2, 1), padding=(2, 1),
                          dilation=(1, 2), groups=2, dtype=np.float64)
    theirs = fn.conv2d(t, torch.tensor(conv.weight), torch.tensor(conv.bias), stride=(2, 1),
                       padding=(2, 1), dilation=(1, 2), groups=2)
    np.testing.assert_allclose(conv(x), theirs.numpy(), rtol=1e-12, atol=1e-13)
    same = nn.Conv1d.init(KEYS[1], 4, 2, 4, padding="same", dilation=2, dtype=np.float64)
    theirs = fn.conv1d(t[:, :, 0], torch.tensor(same.weight), torch.tensor(same.bias),
                       padding="same", dilation=2)
    np.testing.assert_allclose(same(x[:, :, 0]), theirs.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(nn.MaxPool2d(3, 2, 1)(x), fn.max_pool2d(t, 3, 2, 1).numpy())
    # a window of six added in another order (torch 2.11 on an AVX-512 Xeon: 1.7e-14)
    np.testing.assert_allclose(nn.AvgPool2d((2, 3), 1, (1, 1))(x),
                               fn.avg_pool2d(t, (2, 3), 1, (1, 1)).numpy(), rtol=1e-13)
    # A torch Linear's weight is [out, in]: ours is its transpose.
    linear = torch.nn.Linear(8, 3).double()
    ours = nn.Linear(linear.weight.detach().numpy().T, linear.bias.detach().numpy())
    np.testing.assert_allclose(ours(x[0, 0]), linear(t[0, 0]).detach().numpy(), rtol=1e-13)


# -- docs/nn.md ------------------------------------------------------------------------------

def test_the_docs_page_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Its code blocks, in order, as one script (pullback compiles from source files)."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    script = tmp_path / "nn_doc.py"
    script.write_text("\n".join(blocks))
    namespace = runpy.run_path(str(script))
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["(16, 10)", "[(6, 3, 5, 5), (6,)]", "2 0", "None (16, 4)"]
    assert namespace["model"].layers[0].weight.dtype == np.float32
    assert namespace["y_eval"].shape == (16, 8, 4, 4)
