"""A product whose reading loop takes a group of rows an iteration runs in panels of
whole groups (``panels.py``): the hand-tracking model's blended transforms, a
``(28 * 12) x V`` product summed four rows at a time into ``(28, 3, V)``.  The same bits
as the whole product; readers that reach past their own group keep it whole."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Bin, Decl, Int, Loop, Sym
from pullback.backends.c.loops.panels import LARGE_PANEL_BYTES, PANEL_BYTES, _row_form

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(23)
V = 10000


def blend(t, w, bases):
    """Each vertex's 3 x 4 transform from 22 bones' (rows of t by w), applied to its
    homogeneous position: 12 rows of the product per tangent, read by one iteration."""
    b = t @ w
    return np.sum(b.reshape(28, 3, 4, w.shape[1]) * bases[None, None, :, :], axis=2)


def across(t, w):
    """The largest of each column of every group's rows: an iteration reads all groups."""
    return np.max((t @ w).reshape(28, 12, w.shape[1]), axis=0)


def _compiled(fn, *args):
    jitted = pb.jit(fn, backend="c")
    return jitted(*args), jitted.lower(*args).loops


def _operands():
    return RNG.random((336, 22)), RNG.random((22, V)), RNG.random((4, V))


@pytest.mark.parametrize("kernels", ["packed", "blas", ""])
def test_groups_of_rows_in_panels_bit_for_bit(kernels, monkeypatch):
    # either kind of kernels, or as measured: a panel (a product of few rows) has the
    # kernels of the whole product
    monkeypatch.setenv("PULLBACK_GEMM", kernels)
    t, w, bases = _operands()
    got, loops = _compiled(blend, t, w, bases)
    rows = int(re.search(r"gemm\.\w+ float64 (\d+)x10000x22: (v\d+) = ", loops)[1])
    name = re.search(r"gemm\.\w+ float64 \d+x10000x22: (v\d+) = ", loops)[1]
    count = int(re.search(rf"alloc {name}: f64\[(\d+)\]", loops)[1])
    assert rows % 12 == 0 and 336 % rows == 0 and rows < 336
    assert count == rows * V and PANEL_BYTES < count * 8 <= LARGE_PANEL_BYTES
    assert "_panel in range(0, 28, " in loops
    # the whole product (made apart: a buffer the panels cannot take) has the same bits
    whole = pb.jit(lambda t, w, bases: (blend(t, w, bases), t @ w), backend="c")(t, w, bases)
    np.testing.assert_array_equal(got.view(np.uint64), whole[0].view(np.uint64))
    np.testing.assert_allclose(got, blend(t, w, bases), rtol=1e-14)


def test_a_reader_across_groups_keeps_the_product_whole():
    t, w, _ = _operands()
    got, loops = _compiled(across, t, w)
    np.testing.assert_allclose(got, across(t, w), rtol=1e-14)
    assert "_panel" not in loops


def test_the_jacobian_of_the_blend_in_panels():
    # forward mode through the panels against float64 central differences
    t, w, bases = _operands()
    step = RNG.standard_normal(t.shape)
    jvp = pb.jit(lambda t: pb.jvp(lambda t: blend(t, w, bases), (t,), (step,))[1],
                 backend="c")
    eps = 1e-6
    want = (blend(t + eps * step, w, bases) - blend(t - eps * step, w, bases)) / (2 * eps)
    np.testing.assert_allclose(jvp(t), want, rtol=1e-6, atol=1e-8)


def _reads(index, stops=(("k", 3), ("q", 4), ("c", V))):
    """``_row_form`` of ``index`` in the body of a loop over ``i`` with loops ``stops``
    nested in it."""
    body: list = []
    for var, stop in reversed(stops):
        body = [Loop(var, Int(stop), body)]
    return _row_form(body, "i")(index)


def test_what_reads_its_own_group():
    i, k, q, c = Sym("i"), Sym("k"), Sym("q"), Sym("c")
    own = i * 120000 + k * 40000 + q * 10000 + c
    assert _reads(own) == 120000
    assert _reads(i * V + c) == V
    assert _reads(i * 120000 + k * 40000 + q * 10000 + c + 1) is None  # one past its rows
    assert _reads(i * 110000 + k * 40000 + q * 10000 + c) is None  # into the next
    assert _reads(i * 120000 + q * 10000 - c + 9999) is None  # (a negative term)
    assert _reads(i * 120000 + Bin("*", c, c)) is None  # (not linear)
    # through a local declared in the body, as a kernel by rows declares its index
    body = [Loop("c", Int(V), [Decl("at", "int64_t", i * V + c)])]
    assert _row_form(body, "i")(Sym("at")) == V
