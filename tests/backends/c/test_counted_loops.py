"""Short program loops with constant bounds run as counted loops, without polling for
Ctrl-C (``loops/counted.py``); long ones, and ones whose bounds are not constants, keep
polling.  Results against plain Python."""

from __future__ import annotations

import numpy as np

import pullback as pb
from pullback.backends import c
from pullback.backends.c.loops.counted import QUIET, count_short_ranges
from pullback.backends.c.loops.ir import Bin, Const, Decl, Int, Load, Loop, Range, Set, Sym, walk
from pullback.ir.types import int64


def _source(fn, *args):
    return c.source_of(pb.jit(fn, backend="c").lower(*args).ir)


def _kinds(fn, *args):
    return [type(s) for f in _source(fn, *args).module.funcs for s in walk(f.body)
            if isinstance(s, (Loop, Range))]


def smooth(u, alpha):
    out = u.copy()
    for _ in range(3):
        new = out.copy()
        for i in range(1, u.shape[0] - 1):
            new[i] = out[i] + alpha * (out[i - 1] - 2.0 * out[i] + out[i + 1])
        out = new
    return out


def test_short_constant_loops_are_counted_and_do_not_poll():
    u = np.sin(np.linspace(0.0, 3.0, 40))
    src = _source(smooth, u, 0.2)
    stmts = [s for f in src.module.funcs for s in walk(f.body)]
    assert any(isinstance(s, Loop) and s.start.value == 1 and s.stop.value == 39
               for s in stmts), "the element loop range(1, 39) is a counted loop"
    assert not any(isinstance(s, Range) for s in stmts) and "PB_TICK(" not in src.text
    np.testing.assert_allclose(pb.jit(smooth, backend="c")(u, 0.2), smooth(u, 0.2),
                               rtol=1e-13)


def long_sum(x):
    s = 0.0
    for i in range(3_000_000):
        s = s + x[i % 7]
    return s


def test_a_long_constant_loop_keeps_polling():
    x = np.arange(7.0)
    assert Range in _kinds(long_sum, x)
    assert pb.jit(long_sum, backend="c")(x) == sum(float(x[i % 7]) for i in range(7)) * \
        (3_000_000 // 7) + sum(float(x[i % 7]) for i in range(3_000_000 % 7))


def _range(hi, step=1):
    body = [Set(Sym("acc"), Bin("+", Sym("acc"), Load(Sym("p"), Sym("i"))))]
    return Range("i", "int64_t", Const(np.int64(0), int64), hi, Int(step), body)


def test_bounds_must_be_constants_never_assigned_again():
    assert isinstance(count_short_ranges([Decl("h", "int64_t", Int(10)), _range(Sym("h"))])[1],
                      Loop)
    assigned = [Decl("h", "int64_t", Int(10)), Set(Sym("h"), Int(20)), _range(Sym("h"))]
    assert isinstance(count_short_ranges(assigned)[2], Range)
    assert isinstance(count_short_ranges([_range(Sym("n"))])[0], Range)  # a parameter
    assert isinstance(count_short_ranges([_range(Int(0), -1)])[0], Range)
    assert isinstance(count_short_ranges([_range(Int(QUIET))])[0], Loop)  # work == QUIET
    assert isinstance(count_short_ranges([_range(Int(QUIET + 1))])[0], Range)
