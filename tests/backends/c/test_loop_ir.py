"""The loop IR between graph IR and C: what lowering decides is visible in it (kernels
and what they fuse, buffers and their arena offsets, library calls, control flow), it
prints as text (``Lowered.loops``, ``PULLBACK_DUMP=loops``), and the C printed from it
computes NumPy's answers."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.build.threads import parallel_min
from pullback.backends.c.loops.ir import (
    Alloc,
    Break,
    Forever,
    Free,
    Gemm,
    If,
    Int,
    Loop,
    Raise,
    Range,
    Sym,
    linear,
    walk,
)
from pullback.backends.c.loops.printer import ExprPrinter
from pullback.backends.c.lower.elementwise import SUM_BLOCK

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(3)


def _loops(fn, *args):
    """The loop module of ``fn`` specialised to ``args``, its text, and ``fn`` compiled."""
    jitted = pb.jit(fn, backend="c")
    src = c.source_of(jitted.lower(*args).ir)
    return src.module, src.loops, jitted


def _stmts(module):
    return [s for f in module.funcs for s in walk(f.body)]


def loss(x):
    return np.sum(np.tanh(x) * (1.0 / (1.0 + np.exp(-x))) + 0.5 * x * x)


def test_a_gradient_is_one_kernel_storing_only_its_result():
    x = RNG.standard_normal(1000)
    module, text, jitted = _loops(pb.grad(loss), x)
    kernels = [s for s in _stmts(module) if isinstance(s, Loop) and s.pragma]
    assert len(kernels) == 1
    assert {"tanh", "exp", "div", "mul"} <= set(kernels[0].fused)
    assert not [s for s in _stmts(module) if isinstance(s, Alloc)]  # into the result
    assert "kernel simd for i in range(1000):" in text and "tanh(p0[i])" in text
    t, s = np.tanh(x), 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(jitted(x),
                               (1 - t * t) * s + t * s * (1 - s) + x, rtol=1e-12)


def test_a_reduction_and_its_producers_are_one_kernel_with_an_accumulator():
    x = RNG.standard_normal(max(70_000, parallel_min()))  # on threads
    module, text, jitted = _loops(lambda x: np.sum(0.5 * x * x + 3 * x), x)
    (kernel,) = [s for s in _stmts(module) if isinstance(s, Loop) and s.pragma]
    assert kernel.fused[-1] == "reduce_sum" and kernel.pragma == "parallel simd"
    assert any("reduction(+:" in r for r in kernel.reductions)
    np.testing.assert_allclose(jitted(x), np.sum(0.5 * x * x + 3 * x), rtol=1e-12)


def test_a_float32_sum_adds_blocks_in_float32_and_blocks_in_double():
    """No conversion per element, and as accurate as NumPy's pairwise float32 sum."""
    n = max(70_001, parallel_min() + 1)  # the blocks on threads
    x = (RNG.standard_normal(n) + 0.25).astype(np.float32)
    module, text, jitted = _loops(lambda x: np.sum(0.5 * x * x + 3 * x), x)
    outer, inner = [s for s in _stmts(module) if isinstance(s, Loop) and s.pragma]
    assert outer.pragma == "parallel" and outer.step == SUM_BLOCK and inner in outer.body
    assert inner.pragma == "simd" and inner.fused[-1] == "reduce_sum"
    assert "f32 = 0.0" in text and f"range(pb_block_start(p0, {SUM_BLOCK}), {n}" in text
    x64 = x.astype(np.float64)
    want = np.sum(0.5 * x64 * x64 + 3 * x64)
    numpy_error = abs(np.sum(0.5 * x * x + 3 * x, dtype=np.float32) - want)
    # the blocks start where x is 64-byte aligned: every element counted at every offset
    room = np.empty(x.size + 16, np.float32)
    for at in range(16):
        x_at = room[at:at + x.size]
        x_at[:] = x
        assert abs(jitted(x_at) - want) <= max(numpy_error, 1e-6 * abs(want))
    x_at[:] = 0
    x_at[[0, 1, 2047, 2048, 2049, -1]] = 1
    assert jitted(x_at) == 3.5 * 6


def mlp_layer(x, w, v):
    return np.tanh(x @ w) @ v


def test_products_are_library_calls_chosen_by_size():
    x, w, v = RNG.standard_normal((256, 300)), RNG.standard_normal((300, 16)), \
        RNG.standard_normal((16, 16))
    module, text, jitted = _loops(mlp_layer, x, w, v)
    gemms = [s for s in _stmts(module) if isinstance(s, Gemm)]
    assert [(g.m, g.n, g.k, g.blas) for g in gemms] == [(256, 16, 300, True),
                                                        (256, 16, 16, False)]
    assert "gemm.blas float64 256x16x300" in text and "gemm.inline" in text
    np.testing.assert_allclose(jitted(x, w, v), mlp_layer(x, w, v), rtol=1e-10)


def products(x):
    a = x @ x
    b = a @ x
    c = b @ x  # a is dead by now: c may take its bytes
    return np.sin(c @ x)


def test_buffers_with_disjoint_lives_share_arena_bytes():
    x = RNG.standard_normal((8, 8)) / 3
    module, text, jitted = _loops(products, x)
    entry = module.funcs[0]
    allocs = [s for s in entry.body if isinstance(s, Alloc)]
    assert allocs and all(a.arena for a in allocs)
    assert entry.arena < sum(a.nbytes for a in allocs)  # some bytes serve twice
    assert len({a.offset for a in allocs}) < len(allocs)
    frees = [s for s in entry.body if isinstance(s, Free)]
    assert frees and all(f.arena_bytes for f in frees)
    assert f"arena {entry.arena} B" in text and "arena+0" in text
    np.testing.assert_allclose(jitted(x), products(x), rtol=1e-12)


def control(x, n):
    for i in range(n):
        x = x * 0.5 + i
    while np.sum(x) > 1.0:
        x = x - 0.25
    if x[0] > 0:
        x = x * 2.0
    return x


def test_control_flow_stays_structured():
    x, n = RNG.standard_normal(5) + 3, np.int64(3)  # a run-time trip count: a Range
    module, text, jitted = _loops(control, x, n)
    kinds = {type(s) for s in _stmts(module)}
    assert {Range, Forever, Break, If} <= kinds
    assert "loop:" in text and "break unless" in text and "else:" in text
    np.testing.assert_allclose(jitted(x, n), control(x, n))


def test_an_index_out_of_range_raises_in_loop_ir():
    def pick(x, i):
        return x[i]

    module, text, jitted = _loops(pick, np.ones(4), np.array([0, 3]))
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        jitted(np.ones(4), np.array([0, 4]))
    raises = [s for s in _stmts(module) if isinstance(s, Raise)]
    assert raises and raises[0].exception == "IndexError"
    assert "raise IndexError(" in text


def test_index_arithmetic_folds_constants():
    i, j, k = Sym("i"), Sym("j"), Sym("k")
    show = ExprPrinter().expr
    assert show(linear((3, 1, 4), [i, j, k])) == "i * 4 + k"
    assert show(linear((2, 5), [Int(1), Int(3)])) == "8"
    assert show((i + 2) * 3 - (j - k)) == "(i + 2) * 3 - (j - k)"


def test_dump_loops_prints_the_loop_ir(monkeypatch, capsys):
    monkeypatch.setenv("PULLBACK_DUMP", "loops")
    pb.jit(lambda x: np.sum(x * 3.0), backend="c")(np.ones(5))
    out = capsys.readouterr().out
    assert "func pbf_0(p0: float64[5], out r0: float64)" in out
    assert "reduction(+:" in out and "for i in range(5)" in out


def test_every_statement_kind_prints():
    """A program using sort, a factorisation, a check, a print and an AD tape lowers and
    prints without a gap in either printer."""
    def prog(a, x):
        s = np.sort(x)
        lo = np.linalg.cholesky(a @ a.T + 4.0 * np.eye(3))
        assert s[0] <= s[-1], "sorted"
        print(s[1])
        y = x
        while np.sum(y * y) > 0.5:
            y = np.sin(y) * 0.9
        return np.sum(lo * s) + np.sum(y * s)

    a, x = RNG.standard_normal((3, 3)), RNG.standard_normal(3) + 2.0
    module, text, jitted = _loops(pb.grad(prog, argnums=(0, 1)), a, x)
    assert "pb_sort_float64(" in text and "pb_lapack_cholesky_float64(" in text
    assert "pb_tape_push(" in text and "pb_tape_pop(" in text
    assert "print 0" in text and "fail check " in text  # checks and faults share numbers
    assert "raise LinAlgError at site 0" in text
    got = jitted(a, x)
    want = pb.jit(pb.grad(prog, argnums=(0, 1)), backend="interp")(a, x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_a_sum_over_leading_axes_runs_row_by_row(dtype):
    x = (RNG.standard_normal((3, 40, 17)) * 10).astype(dtype)
    module, text, jitted = _loops(lambda x: np.sum(x, axis=(0, 1)), x)
    (row,) = [s for s in _stmts(module) if isinstance(s, Loop) and s.var.startswith("r")]
    assert row.stop.value == 120 and row.body[0].stop.value == 17
    want = np.sum(x.astype(np.float64), axis=(0, 1))
    np.testing.assert_allclose(jitted(x), want.astype(dtype), rtol=1e-6)


BROADCASTS = {
    "bias": (lambda x, b: np.tanh(x + b), (64, 48), (48,)),
    "column": (lambda x, b: x * b[:, None] - 1.0, (64, 48), (64,)),
    "keepdims": (lambda x, b: np.exp(x - np.max(x, axis=1, keepdims=True)) * b, (40, 33),
                 (33,)),
    "middle": (lambda x, b: x * b[None, :, None] + x, (5, 7, 32), (7,)),
    "short rows": (lambda x, b: x + b, (300, 3), (3,)),
    "3-d bias": (lambda x, b: (x - b) * (x + b), (4, 6, 20), (6, 20)),
}


@pytest.mark.parametrize("name", list(BROADCASTS))
def test_broadcasts_fuse_into_the_kernels_that_read_them(name):
    fn, xs, bs = BROADCASTS[name]
    x, b = RNG.standard_normal(xs), RNG.standard_normal(bs)
    module, text, jitted = _loops(fn, x, b)
    sizes = {s.count for s in _stmts(module) if isinstance(s, Alloc)}
    assert x.size not in sizes  # no broadcast buffer
    if xs[-1] >= 16:
        assert "kernel parallel" in text or "for c in range" in text
    np.testing.assert_allclose(jitted(x, b), fn(x, b), rtol=1e-13, atol=1e-13)
    g = pb.jit(pb.grad(lambda x, b: np.sum(fn(x, b) ** 2), argnums=(0, 1)), backend="c")
    want = pb.jit(pb.grad(lambda x, b: np.sum(fn(x, b) ** 2), argnums=(0, 1)),
                  backend="interp")(x, b)
    for got, w in zip(g(x, b), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-11, atol=1e-11)


def test_products_read_transposed_operands_in_place():
    """``a @ b.T`` contracts ``b``'s rows where they lie; a transpose other code reads
    too is made once and read by both."""
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((6, 5))
    module, text, jitted = _loops(lambda a, b: a @ b.T, a, b)
    assert not [s for s in _stmts(module) if isinstance(s, Alloc)]
    assert "gemm.inline float64 4x6x5: v1 = p0 @ p1ᵀ" in text
    np.testing.assert_allclose(jitted(a, b), a @ b.T, rtol=1e-13)
    module, text, jitted = _loops(lambda a, b: (a @ b.T, b.T + 1.0), a, b)
    assert len([s for s in _stmts(module) if isinstance(s, Alloc)]) == 1
    got = jitted(a, b)
    np.testing.assert_allclose(got[0], a @ b.T, rtol=1e-13)
    np.testing.assert_allclose(got[1], b.T + 1.0, rtol=1e-13)
    c3 = RNG.standard_normal((3, 6, 5))
    module, text, jitted = _loops(lambda c, b: np.swapaxes(c, 1, 2) @ b, c3, b)
    np.testing.assert_allclose(jitted(c3, b), np.swapaxes(c3, 1, 2) @ b, rtol=1e-13)
