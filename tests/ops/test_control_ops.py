"""Control flow, effects and stacks: shape rules, evaluation, and their error cases."""

from __future__ import annotations

import numpy as np
import pytest

from harness import roundtrip
from pullback.backends import interp
from pullback.errors import ShapeError
from pullback.ir.builder import build_func, current, declare_func, define_func
from pullback.ir.core import Func
from pullback.ir.types import StackType, TensorType, bool_, float32, float64, int32, int64
from pullback.ops import control as C
from pullback.ops import elementwise as E
from pullback.ops import stack as St

F32 = TensorType((3,), float32)
I64 = TensorType((), int64)
F64 = TensorType((), float64)


def _func(in_types, body) -> Func:
    f = build_func("f", in_types, body)
    roundtrip(f)
    return f


def test_cond_takes_the_branch_of_the_predicate():
    def body(x, p):
        b = current()
        then = b.block([F32], lambda a: E.exp(a))
        orelse = b.block([F32], lambda a: E.neg(a))
        return C.cond(p, x, then=then, orelse=orelse)

    f = _func([F32, TensorType((), bool_)], body)
    x = np.array([0.0, 1.0, -2.0], np.float32)
    np.testing.assert_allclose(interp.run(f, x, True)[0], np.exp(x))
    np.testing.assert_array_equal(interp.run(f, x, False)[0], -x)


def test_blocks_read_values_of_enclosing_blocks():
    def body(x, y):
        b = current()
        p = E.gt(y, np.float32(0))
        then = b.block([], lambda: E.mul(x, y))  # captures x and y
        orelse = b.block([], lambda: x)
        return C.cond(p, then=then, orelse=orelse)

    f = _func([F32, TensorType((), float32)], body)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(interp.run(f, x, np.float32(2))[0], 2 * x)
    np.testing.assert_array_equal(interp.run(f, x, np.float32(-1))[0], x)


def test_while_loop_collatz_steps():
    def body(n):
        b = current()
        cond = b.block([I64, I64], lambda k, steps: E.ne(k, np.int64(1)))

        def step(k, steps):
            even = E.eq(E.mod(k, np.int64(2)), np.int64(0))
            nxt = E.select(even, E.floordiv(k, np.int64(2)), E.add(E.mul(k, np.int64(3)),
                                                                    np.int64(1)))
            return [nxt, E.add(steps, np.int64(1))]

        loop = b.block([I64, I64], step)
        return C.while_loop(n, np.int64(0), cond=cond, body=loop)[1]

    f = _func([I64], body)

    def collatz(n):
        steps = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        return steps

    for n in (1, 6, 27):
        assert interp.run(f, np.int64(n))[0] == collatz(n)


@pytest.mark.parametrize("lo,hi,step", [(0, 5, 1), (5, 0, -1), (2, 11, 3), (3, 3, 1), (4, 1, 1)])
def test_for_loop_matches_range(lo, hi, step):
    def body(a, b_, s):
        b = current()
        loop = b.block([I64, I64], lambda i, acc: E.add(E.mul(acc, np.int64(10)), i))
        return C.for_loop(a, b_, s, np.int64(0), body=loop)

    f = _func([I64, I64, I64], body)
    want = 0
    for i in range(lo, hi, step):
        want = want * 10 + i
    assert interp.run(f, np.int64(lo), np.int64(hi), np.int64(step))[0] == want


def test_for_loop_with_zero_step_raises_like_range():
    def body(s):
        loop = current().block([I64], lambda i: [])
        return C.for_loop(np.int64(0), np.int64(3), s, body=loop)

    f = _func([I64], body)
    with pytest.raises(ValueError, match="must not be zero"):
        interp.run(f, np.int64(0))


def test_recursive_call_computes_factorial():
    fact = declare_func("fact", [I64], [I64])

    def body(n):
        b = current()
        base = b.block([], lambda: np.int64(1))
        rec = b.block([], lambda: E.mul(n, C.call(E.sub(n, np.int64(1)), callee=fact)[0]))
        return C.cond(E.le(n, np.int64(1)), then=base, orelse=rec)

    define_func(fact, body)
    main = _func([I64], lambda k: C.call(k, callee=fact))
    assert interp.run(main, np.int64(10))[0] == 3628800


def test_debug_print_runs_in_program_order(capsys):
    def body(x):
        C.debug_print(x, fmt="x = {}\n")
        y = E.add(x, np.int64(1))
        C.debug_print(y, x, fmt="y = {} (from {})\n")
        return y

    f = _func([I64], body)
    interp.run(f, np.int64(41))
    assert capsys.readouterr().out == "x = 41\ny = 42 (from 41)\n"


@pytest.mark.parametrize("exc", [AssertionError, IndexError, ZeroDivisionError])
def test_check_raises_the_named_exception_with_its_message(exc):
    def body(i):
        ok = E.lt(i, np.int64(3))
        C.check(ok, i, exc=exc.__name__, fmt="index {} is out of bounds")
        return i

    f = _func([I64], body)
    assert interp.run(f, np.int64(2))[0] == 2
    with pytest.raises(exc, match="index 7 is out of bounds"):
        interp.run(f, np.int64(7))


def test_stack_is_last_in_first_out():
    def body(x):
        s = St.stack_new()
        s = St.stack_push(s, x)
        s = St.stack_push(s, E.mul(x, 2.0))
        s, top = St.stack_pop(s, elem=F64)
        s, bottom = St.stack_pop(s, elem=F64)
        return [top, bottom]

    f = _func([F64], body)
    assert [float(v) for v in interp.run(f, 1.5)] == [3.0, 1.5]


def test_stack_of_pushes_inside_a_loop():
    def body(n):
        b = current()
        s0 = St.stack_new()
        push = b.block([I64, StackType()],
                       lambda i, s: St.stack_push(s, E.convert(i, dtype=float64, weak=False)))
        s = C.for_loop(np.int64(0), n, np.int64(1), s0, body=push)[0]
        pop = b.block([I64, StackType(), F64], lambda i, s, acc: _pop_into(s, acc))
        return C.for_loop(np.int64(0), n, np.int64(1), s, np.float64(0), body=pop)[1]

    def _pop_into(s, acc):
        s, x = St.stack_pop(s, elem=F64)
        return [s, E.add(E.mul(acc, 10.0), x)]

    f = _func([I64], body)
    assert interp.run(f, np.int64(4))[0] == 3210.0  # popped 3, 2, 1, 0


def test_pop_of_an_empty_stack_raises():
    f = _func([], lambda: St.stack_pop(St.stack_new(), elem=F64)[1])
    with pytest.raises(IndexError):
        interp.run(f)


# -- shape rules --------------------------------------------------------------------


def _raises_shape(body, in_types, match):
    with pytest.raises(ShapeError, match=match):
        build_func("bad", in_types, body)


def test_cond_rejects_a_non_boolean_predicate():
    def body(x):
        blk = current().block([], lambda: x)
        return C.cond(x, then=blk, orelse=blk)

    _raises_shape(body, [TensorType((), int32)], "predicate must be a 0-d bool")


def test_cond_rejects_branches_of_different_types():
    def body(p, x):
        b = current()
        return C.cond(p, then=b.block([], lambda: x),
                      orelse=b.block([], lambda: E.convert(x, dtype=float64, weak=False)))

    _raises_shape(body, [TensorType((), bool_), F32], r"returns \(f64\[3\]\).*\(f32\[3\]\)")


def test_while_rejects_a_body_that_changes_the_carry_type():
    def body(x):
        b = current()
        cond = b.block([F32], lambda a: np.bool_(True))
        loop = b.block([F32], lambda a: E.convert(a, dtype=float64, weak=False))
        return C.while_loop(x, cond=cond, body=loop)

    _raises_shape(body, [F32], "block 'body' returns")


def test_for_rejects_float_bounds_and_a_bad_index_type():
    def float_bounds(x):
        loop = current().block([F64], lambda i: [])
        return C.for_loop(x, x, x, body=loop)

    _raises_shape(float_bounds, [F64], "bounds must be 0-d integers")

    def bad_index(n):
        loop = current().block([TensorType((), int32)], lambda i: [])
        return C.for_loop(np.int64(0), n, np.int64(1), body=loop)

    _raises_shape(bad_index, [I64], "index parameter is i32")


def test_call_rejects_arguments_of_the_wrong_type():
    g = build_func("g", [F32], lambda a: a)
    _raises_shape(lambda x: C.call(x, callee=g), [F64], r"call @g: takes \(f32\[3\]\)")


def test_check_rejects_unknown_exceptions_and_push_onto_a_non_stack():
    _raises_shape(lambda p: C.check(p, exc="SystemExit", fmt=""), [TensorType((), bool_)],
                  "cannot raise 'SystemExit'")
    _raises_shape(lambda x: St.stack_push(x, x), [F32], "expected a stack operand")
