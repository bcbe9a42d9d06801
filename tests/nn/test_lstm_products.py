"""The LSTM layer's compiled gradient: its backward loop's product ``dz @ w_hh.T`` reads
``w_hh`` where it lies, as a transposed operand, rather than a transposed copy the loop
would have made first; the gradient still agrees with float64 central differences."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback import nn
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Gemm, walk

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

B, T, F, H = 3, 5, 4, 6


def _loss(layer, xs):
    ys, (h, c_last) = layer(xs)
    return np.sum(ys * ys) + np.sum(h * c_last)


def test_the_backward_product_reads_w_hh_in_place():
    layer = nn.LSTM.init(pb.random.key(1), F, H, dtype=np.float64)
    xs = np.random.default_rng(2).standard_normal((B, T, F))
    grad = pb.jit(pb.grad(_loss), backend="c")
    module = c.source_of(grad.lower(layer, xs).ir).module
    gemms = [s for f in module.funcs for s in walk(f.body) if isinstance(s, Gemm)]
    step = [g for g in gemms if (g.m, g.n, g.k) == (B, H, 4 * H)]
    assert step and all(g.trans_b for g in step)
    got = grad(layer, xs).cell.w_hh
    w, eps = layer.cell.w_hh, 1e-6
    want = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        for sign in (1, -1):
            w[idx] += sign * eps
            want[idx] += sign * _loss(layer, xs) / (2 * eps)
            w[idx] -= sign * eps
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
