"""Record arrays (a short last axis: points, cameras) computed by columns: slices,
concatenations, reductions and broadcasts along the record axis, and gathers of table
rows, become one kernel over the records; gathered elements are loaded in that kernel
(their indices tested once); columns go straight into the result's records; values
stay NumPy's, derivatives included."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Alloc, Loop, Raise, walk
from pullback.backends.c.prepare.columns import split_columns
from pullback.ir.core import Module

from .test_loop_ir import _loops, _stmts

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(7)
P = 500  # records


def _kernels(module, n=P):
    return [s for s in _stmts(module) if isinstance(s, Loop) and s.pragma and
            getattr(s.stop, "value", None) == n]


def rotate(rot, pt):
    """Rodrigues' rotation of each row of ``pt`` by the same row of ``rot``."""
    theta = np.sqrt(np.sum(rot * rot, axis=1, keepdims=True))
    w = rot / theta
    tmp = np.sum(w * pt, axis=1, keepdims=True) * (1.0 - np.cos(theta))
    return pt * np.cos(theta) + np.cross(w, pt) * np.sin(theta) + w * tmp


def project(cams, pts, idx):
    """Each point, moved and rotated by the camera of its record, projected."""
    cam = cams[idx]
    x = rotate(cam[:, 0:3], pts - cam[:, 3:6])
    return x[:, 0:2] / x[:, 2:3] * cam[:, 6:7]


CAMS = RNG.standard_normal((9, 7))
PTS = RNG.standard_normal((P, 3)) + np.array([0.0, 0.0, 5.0])
IDX = RNG.integers(0, 9, P)


def test_record_math_is_one_kernel_with_the_gathers_inside():
    module, text, jitted = _loops(project, CAMS, PTS, IDX)
    kernels = _kernels(module)
    big = [k for k in kernels if {"sin", "cos", "div"} <= set(k.fused)]
    assert len(big) == 1  # rotation, cross product, norms and projection together
    # the camera's columns are read from the table by index inside the kernel: no
    # gathered (P, 7) array and no column buffers, only the result's (P, 2)
    assert "p0[i64(" in text
    floats = {s.count for s in _stmts(module) if isinstance(s, Alloc) and s.ctype == "double"}
    assert not floats
    # the indices are tested once, in a loop of their own, not inside the kernel
    assert not [s for s in walk(big[0].body) if isinstance(s, Raise)]
    assert [s for s in _stmts(module) if isinstance(s, Raise)]
    np.testing.assert_allclose(jitted(CAMS, PTS, IDX), project(CAMS, PTS, IDX), rtol=1e-12)


def test_the_columns_are_stored_straight_into_the_result():
    module, text, _ = _loops(project, CAMS, PTS, IDX)
    assert "[i * 2] = " in text and "[i * 2 + 1] = " in text
    assert not [s for s in _stmts(module) if isinstance(s, Alloc) and s.ctype == "double"]
    assert "for i" not in text.split("[i * 2 + 1] = ")[1]  # nothing copied after


def test_an_index_out_of_range_still_raises():
    bad = IDX.copy()
    bad[17] = 9
    with pytest.raises(IndexError):
        pb.jit(project, backend="c")(CAMS, PTS, bad)


def test_reverse_mode_through_records_matches_the_interpreter():
    def loss(cams, pts):
        return np.sum(project(cams, pts, IDX) ** 2)

    g = pb.jit(pb.grad(loss, argnums=(0, 1)), backend="c")(CAMS, PTS)
    r = pb.jit(pb.grad(loss, argnums=(0, 1)), backend="interp")(CAMS, PTS)
    for a, b in zip(g, r, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_per_record_vjp_rows_fill_the_records():
    def blocks(cams, pts):
        cam = cams[IDX]
        _, back = pb.vjp(lambda c_, p_: project_rows(c_, p_), cam, pts)
        rows = []
        for unit in (np.array([1.0, 0.0]), np.array([0.0, 1.0])):
            dc, dp = back(np.broadcast_to(unit, (P, 2)))
            rows += [dc, dp]
        return np.concatenate(rows, axis=1)

    module, text, jitted = _loops(blocks, CAMS, PTS)
    got = jitted(CAMS, PTS)
    want = pb.jit(blocks, backend="interp")(CAMS, PTS)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert got.shape == (P, 20)
    assert len([k for k in _kernels(module) if "sin" in k.fused]) == 1  # one pass


def project_rows(cam, pts):
    x = rotate(cam[:, 0:3], pts - cam[:, 3:6])
    return x[:, 0:2] / x[:, 2:3] * cam[:, 6:7]


def test_short_axis_algebra_matches_numpy():
    a, b = RNG.standard_normal((P, 3)), RNG.standard_normal((P, 3))

    def f(a, b):
        n = np.linalg.norm(a, axis=1, keepdims=True)
        c_ = np.cross(a / n, b)
        m = np.max(np.abs(c_), axis=1)
        pad = np.concatenate((c_, m[:, None], np.zeros((P, 1))), axis=1)
        return pad[:, ::2] * 2.0, np.prod(b[:, 1:], axis=1)

    got = pb.jit(f, backend="c")(a, b)
    want = f(a, b)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13)


def test_the_rewrite_leaves_the_callers_ir_alone():
    jitted = pb.jit(project, backend="c")
    staged, _ = jitted.specialise(CAMS, PTS, IDX)
    before = str(staged.func)
    split = split_columns(Module.of(staged.func))
    assert str(staged.func) == before
    assert str(split) != before
    assert "concatenate" not in str(split.main) or "axis=1" in str(split.main)


def test_long_or_few_records_are_left_whole():
    few = RNG.standard_normal((4, 6))
    wide = RNG.standard_normal((P, 80))

    def f(x):
        half = x.shape[1] // 2
        return np.sum(x[:, :half] * x[:, half:], axis=1)

    for x in (few, wide):
        staged, _ = pb.jit(f, backend="c").specialise(x)
        assert str(split_columns(Module.of(staged.func)).main) == str(staged.func)
        # (a sum of 40 products may cancel: its rounding is relative to the terms)
        np.testing.assert_allclose(pb.jit(f, backend="c")(x), f(x), rtol=1e-13, atol=1e-13)


def test_a_column_stored_in_its_records_and_read_again_later_keeps_its_value():
    # each column of the (P, 10) mask is both assembled into the records a product reads
    # and, through values computed again in a later loop, read once more (k-means' Newton
    # direction): it must keep a buffer of its own for that second read
    pts, cen = RNG.random((P, 8)), RNG.random((10, 8))

    def cost(points, centroids):
        pp = np.sum(points * points, axis=1)
        cc = np.sum(centroids * centroids, axis=1)
        d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
        return np.sum(np.min(d2, axis=1))

    def direction(points, centroids):
        jac = pb.grad(cost, argnums=1)
        g, h = pb.jvp(lambda c_: jac(points, c_), (centroids,), (np.ones_like(centroids),))
        return g / h

    got = pb.jit(direction, backend="c")(pts, cen)
    want = pb.jit(direction, backend="interp")(pts, cen)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def _slice_read_in_a_branch(x, p):
    t = x[1:]
    y = 0.0
    if p > 0:
        y = t[p - 1] * 2.0
    return y + t[0]


def test_a_slice_read_where_it_is_used_gets_a_buffer_when_a_branch_takes_it():
    x = np.arange(1.0, 6.0)
    for p in (np.int64(2), np.int64(0)):
        want = pb.jit(pb.grad(_slice_read_in_a_branch), backend="interp")(x, p)
        got = pb.jit(pb.grad(_slice_read_in_a_branch), backend="c")(x, p)
        np.testing.assert_array_equal(got, want)
        assert pb.jit(_slice_read_in_a_branch, backend="c")(x, p) == \
            _slice_read_in_a_branch(x, p)
