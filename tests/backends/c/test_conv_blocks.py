"""Convolutions computed as products a block at a time (``lower/convolutions.py``): with
the block shrunk so that a batch, or the channels of a weight gradient, split into whole
blocks and a shorter rest, values equal the definition written out in NumPy and the
gradients in both operands equal float64 central differences along random directions;
the forward loop IR has one product per block shape, so the blocks were taken."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Gemm, walk
from pullback.backends.c.lower import convolutions
from pullback.nn import functional as F

from ...nn.test_linear_conv import conv_reference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(31)
#: Small enough that every case's convolutions (forward and both gradients) run in
#: several blocks.
BLOCK = 1 << 15

#: x shape, w shape, keywords, the reference's stride, (lo, hi) pads, dilation, and the
#: forward product's columns (output positions) per block (whole blocks, then the rest;
#: 8-byte elements):
#: 2d: 72 positions x 27 columns a image, 2 images a block, 5 = 2 + 2 + 1;
#: 1 image, 1 channel, strided: one block of 506 rows;
#: dilated, strided, padded unevenly: 40 x 24 a image, 4 a block, 10 = 4 + 4 + 2;
#: 1d: 60 x 20 a image, 3 a block, 7 = 3 + 3 + 1.
CASES = {
    "2d": ((5, 3, 8, 9), (6, 3, 3, 3), {"padding": 1}, (1, 1), ((1, 1), (1, 1)), (1, 1),
           [144, 72]),
    "one_image_one_channel": ((1, 1, 44, 45), (8, 1, 3, 3), {"stride": 2, "padding": 1},
                              (2, 2), ((1, 1), (1, 1)), (1, 1), [506]),
    "dilated": ((10, 4, 9, 10), (5, 4, 2, 3),
                {"dilation": (2, 1), "stride": (1, 2), "padding": ((1, 0), (0, 2))},
                (1, 2), ((1, 0), (0, 2)), (2, 1), [160, 80]),
    "1d": ((7, 4, 60), (6, 4, 5), {"padding": 2}, (1,), ((2, 2),), (1,), [180, 60]),
}


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convolutions, "BLOCK_BYTES", BLOCK)


def _case(name: str, dtype: type = np.float64) -> tuple:
    xs, ws, kw, stride, pads, dilation, _ = CASES[name]
    x, w = RNG.normal(size=xs).astype(dtype), RNG.normal(size=ws).astype(dtype)
    return x, w, kw, conv_reference(x, w, stride, pads, dilation, 1)


@pytest.mark.parametrize("name", CASES)
def test_blocked_conv_is_the_definition(name: str) -> None:
    x, w, kw, want = _case(name)
    jitted = pb.jit(lambda a, b: F.conv(a, b, **kw), backend="c")
    np.testing.assert_allclose(jitted(x, w), want, rtol=1e-12, atol=1e-12)
    module = c.source_of(jitted.lower(x, w).ir).module
    columns = [s.n for f in module.funcs for s in walk(f.body) if isinstance(s, Gemm)]
    assert columns == CASES[name][-1]


def test_blocked_conv_in_float32() -> None:
    x, w, kw, want = _case("2d", np.float32)
    got = pb.jit(lambda a, b: F.conv(a, b, **kw), backend="c")(x, w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", CASES)
def test_blocked_conv_gradients(name: str) -> None:
    """The gradient's convolutions (the input's: a convolution of the output's
    cotangent, dilated where the forward strides; the weight's: few rows and a column
    per image and position, in blocks of channels) against central differences of the
    NumPy definition along three random directions per operand."""
    x, w, kw, out = _case(name)
    xs, ws, _, stride, pads, dilation, _ = CASES[name]
    weights = RNG.normal(size=out.shape)

    def loss(a, b):
        return np.sum(F.conv(a, b, **kw) * weights)

    def reference(a, b):
        return np.sum(conv_reference(a, b, stride, pads, dilation, 1) * weights)

    grads = pb.jit(pb.grad(loss, argnums=(0, 1)), backend="c")(x, w)
    check_directions(grads, (x, w), reference, RNG)


def check_directions(grads, args, reference, rng, eps=1e-4) -> None:
    """Each gradient against central differences of ``reference`` along three random
    directions in its operand."""
    for k, grad in enumerate(grads):
        for _ in range(3):
            v = rng.normal(size=grad.shape)
            moved = [list(args), list(args)]
            moved[0][k], moved[1][k] = moved[0][k] + eps * v, moved[1][k] - eps * v
            want = (reference(*moved[0]) - reference(*moved[1])) / (2 * eps)
            assert np.sum(grad * v) == pytest.approx(want, rel=1e-8, abs=1e-8)
