"""Index-set splitting of flat loops that test their index against constants."""

from pullback.backends.c.loops.ir import (
    Bin,
    Cond,
    Decl,
    Int,
    Load,
    Loop,
    LoopFunc,
    LoopModule,
    Set,
    Sym,
)
from pullback.backends.c.loops.printer import format_module
from pullback.backends.c.loops.splitting import MAX_STRETCHES, split_kernels

I = Sym("i")


def print_stmts(stmts) -> str:
    return format_module(LoopModule([LoopFunc("f", [], stmts)], []))


def _pad_loop(n: int, before: int, size: int, pragma: str = "parallel simd") -> Loop:
    """out[i] = x[i - before] inside, 0 outside: a pad read where used."""
    inside = Bin("&&", Bin(">=", I, Int(before)), Bin("<", I, Int(before + size)))
    value = Cond(inside, Load(Sym("x"), I - before), Int(0))
    return Loop("i", Int(n), [Decl("t", "double", value), Set(Load(Sym("out"), I), Sym("t"))],
                pragma=pragma)


def test_a_pad_runs_as_three_stretches_with_no_tests():
    pieces = split_kernels([_pad_loop(100, 3, 90)], lambda n: n >= 50)
    assert [(p.start.value, p.stop.value, p.pragma) for p in pieces] == [
        (0, 3, "simd"), (3, 93, "parallel simd"), (93, 100, "simd")]
    text = print_stmts(pieces)
    assert "?" not in text and "&&" not in text
    assert text.count("x[i - 3]") == 1 and text.count("t: f64 = 0\n") == 2


def test_tests_outside_the_range_and_nested_loops_stay():
    (inner,) = split_kernels([_pad_loop(80, 0, 90)], lambda n: n >= 50)  # always inside
    assert (inner.start.value, inner.stop.value) == (0, 80)
    nested = Loop("j", Int(4), [_pad_loop(100, 3, 90)])
    (outer,) = split_kernels([nested], lambda n: n >= 50)
    assert len(outer.body) == 3  # the inner loop is split, the outer one is not


def test_too_many_stretches_keep_their_tests_but_the_longest():
    value = Int(0)
    for c in range(1, MAX_STRETCHES + 1):
        value = Cond(Bin("<", I, Int(10 * c)), Load(Sym(f"x{c}"), I), value)
    loop = Loop("i", Int(100), [Set(Load(Sym("out"), I), value)])
    head, rest = split_kernels([loop], lambda n: n >= 50)
    assert [(p.start.value, p.stop.value) for p in (head, rest)] == [(0, 50), (50, 100)]
    assert head.body == loop.body  # (its tests kept)
    assert print_stmts([rest]).count("?") == 0
