"""The verifier: well-formed IR passes; each broken invariant is caught and named."""

import copy
import re

import numpy as np
import pytest

from pullback.errors import Loc, VerifyError
from pullback.ir.builder import Builder, build_func, current
from pullback.ir.core import Block, Eqn, Func, Lit, Module, Var
from pullback.ir.types import StackType, TensorType, bool_, float32, float64, int64
from pullback.ir.verify import verify
from pullback.ops import control as C
from pullback.ops import elementwise as E
from pullback.ops import stack as S

F3 = TensorType((3,), float32)
D3 = TensorType((3,), float64)
I64 = TensorType((), int64)
BOOL = TensorType((), bool_)
LOC = Loc("model.py", 12, 4)


def fails(func_or_module, message: str) -> None:
    with pytest.raises(VerifyError, match=re.escape(message)):
        verify(func_or_module)


def func(params, eqns, results, out_types=None, name="f") -> Func:
    return Func(name, Block(params, eqns, results), out_types)


def test_well_formed_ir_passes():
    def body(p, x, n):
        b = current()
        y = C.cond(p, x, then=b.block([F3], E.exp), orelse=b.block([F3], lambda v: E.neg(x)))[0]
        (z,) = C.for_loop(np.int64(0), n, np.int64(1), y,
                          body=b.block([I64, F3], lambda i, c: E.add(c, y)))
        s = S.stack_push(S.stack_new(), z)
        C.debug_print(z, fmt="{}")
        return S.stack_pop(s, elem=F3)

    verify(build_func("f", [BOOL, F3, I64], body))


# 1
def test_use_of_a_value_never_defined():
    x = Var(F3)
    f = func([], [Eqn(E.neg, [x], [Var(F3)], loc=LOC)], [])
    fails(f, "@f, neg at model.py:12:4: operand 0 %?:f32[3] is never defined in this function")


# 2
def test_value_defined_twice():
    x = Var(F3)
    f = func([x], [Eqn(E.neg, [x], [x])], [x])
    fails(f, "@f, neg: output 0 %0:f32[3] is defined twice")


def test_block_parameter_reused_as_a_function_parameter():
    x = Var(F3)
    then = Block([x], [], [x])
    eqn = Eqn(C.cond, [Lit(True), x], [Var(F3)], {"then": then, "orelse": Block([Var(F3)])})
    fails(func([x], [eqn], []), "@f, cond: parameter 0 %0:f32[3] is defined twice")


# 3
def test_use_before_definition_in_the_same_block():
    x, y, z = Var(F3), Var(F3), Var(F3)
    f = func([x], [Eqn(E.neg, [y], [z]), Eqn(E.neg, [x], [y])], [z])
    fails(f, "@f, neg: operand 0 %2:f32[3] is used before its definition")


def test_block_using_the_output_of_its_own_equation():
    x, out = Var(F3), Var(F3)
    body = Block([Var(F3)], [], [out])
    eqn = Eqn(C.cond, [Lit(True), x], [out], {"then": body, "orelse": body})
    fails(func([x], [eqn], [out]), "@f, cond: result of region 'then', 0 %1:f32[3] is used "
                                   "before its definition")


# 4
def _cond_defining_inside(orelse_uses_then: bool) -> Func:
    x, inner, out = Var(F3), Var(F3), Var(F3)
    a, c = Var(F3), Var(F3)
    then = Block([a], [Eqn(E.neg, [a], [inner])], [inner])
    orelse = Block([c], [], [inner if orelse_uses_then else c])
    cond = Eqn(C.cond, [Lit(True), x], [out], {"then": then, "orelse": orelse})
    after = [] if orelse_uses_then else [Eqn(E.add, [out, inner], [Var(F3)])]
    return func([x], [cond, *after], [out])


def test_value_used_in_a_sibling_branch():
    fails(_cond_defining_inside(True),
          "@f, cond: result of region 'orelse', 0 %3:f32[3] is used outside the block that "
          "defines it")


def test_inner_block_value_used_by_the_enclosing_block():
    fails(_cond_defining_inside(False),
          "@f, add: operand 1 %3:f32[3] is used outside the block that defines it")


def test_callee_cannot_capture_a_value_of_its_caller():
    x = Var(F3)
    g = func([], [], [x], [F3], name="g")
    f = func([x], [Eqn(C.call, [], [Var(F3)], {"callee": g})], [x])
    fails(f, "@g: result 0 %?:f32[3] is never defined in this function")


# 5
def test_output_type_differs_from_inferred():
    x = Var(F3)
    f = func([x], [Eqn(E.neg, [x], [Var(D3)], loc=LOC)], [])
    fails(f, "@f, neg at model.py:12:4: output 0 %1:f64[3] should have type f32[3]")


def test_weakness_is_part_of_the_type():
    x = Var(TensorType((), float64, weak=True))
    f = func([x], [Eqn(E.neg, [x], [Var(TensorType((), float64))])], [])
    fails(f, "@f, neg: output 0 %1:f64[] should have type ~f64[]")


# 6
def test_wrong_number_of_outputs():
    x = Var(F3)
    f = func([x], [Eqn(E.neg, [x], [Var(F3), Var(F3)])], [])
    fails(f, "@f, neg: declares 2 outputs, the op gives 1")


# 7
@pytest.mark.parametrize("params, message", [
    ({"dtype": float64}, "missing param 'weak'"),
    ({"dtype": float64, "weak": False, "axis": 0}, "unknown param 'axis'"),
    ({"dtype": "f64", "weak": False}, 'param dtype="f64" is not of kind \'dtype\''),
    ({"dtype": float64, "weak": 0}, "param weak=0 is not of kind 'bool'"),
])
def test_bad_params(params, message):
    x = Var(F3)
    f = func([x], [Eqn(E.convert, [x], [Var(D3)], params)], [])
    fails(f, f"@f, convert: {message}")


def test_params_on_an_op_without_params():
    x = Var(F3)
    fails(func([x], [Eqn(E.neg, [x], [Var(F3)], {"k": 1})], []), "@f, neg: unknown param 'k'")


# 8
def test_cond_branches_of_different_types():
    def body(p, x):
        b = current()
        return C.cond(p, x, then=b.block([F3], E.exp), orelse=b.block([F3], E.exp))

    f = build_func("f", [BOOL, F3], body)
    orelse = f.block.eqns[0].params["orelse"]
    orelse.results = [Lit(np.zeros(3))]
    fails(f, "@f, cond: type inference failed: cond: block 'orelse' returns (f64[3]), "
             "expected (f32[3])")


def test_while_body_changing_the_carry_type():
    def body(x):
        b = current()
        cond = b.block([F3], lambda c: Lit(True))
        step = b.block([F3], lambda c: E.neg(c))
        return C.while_loop(x, cond=cond, body=step)

    f = build_func("f", [F3], body)
    step = f.block.eqns[0].params["body"]
    step.eqns[0].outputs[0].type = D3
    step.eqns[0].inputs = [Lit(np.ones(3))]
    fails(f, "@f, while_loop: type inference failed: while_loop: block 'body' returns "
             "(f64[3]), expected (f32[3])")


# 9
def test_literal_whose_value_does_not_match_its_type():
    lit = Lit(np.float32(1.0))
    lit.value = np.ones(2)
    x = Var(F3)
    fails(func([x], [Eqn(E.add, [x, lit], [Var(F3)])], []),
          "@f, add: operand 1 is a literal of type f32[] holding a float64 value of shape (2,)")


def test_literal_with_a_stack_type():
    lit = Lit(np.float32(1.0))
    lit.type = StackType()
    fails(func([], [], [lit], [lit.type]),
          "@f: result 0 is a literal of type stack, not a tensor type")


# 10
def test_callee_missing_from_the_module():
    g = build_func("g", [F3], E.neg)
    f = build_func("f", [F3], lambda x: C.call(x, callee=g))
    verify(f)
    fails(Module([f]), "@f, call: callee @g is not a function of the module")


def test_callee_replaced_by_another_function_of_that_name():
    g = build_func("g", [F3], E.neg)
    f = build_func("f", [F3], lambda x: C.call(x, callee=g))
    fails(Module([f, build_func("g", [F3], E.neg)]),
          "@f, call: callee @g is not a function of the module")


def test_two_callees_of_one_name():
    g1, g2 = build_func("g", [F3], E.neg), build_func("g", [F3], E.exp)
    f = build_func("f", [F3], lambda x: [C.call(x, callee=g1)[0], C.call(x, callee=g2)[0]])
    fails(f, "@f reaches two different functions of one name")


@pytest.mark.parametrize("args, message", [
    ([], "takes (f32[3]) but is given ()"),
    ([Lit(np.ones(3))], "takes (f32[3]) but is given (f64[3])"),
])
def test_call_arity_and_type_mismatch(args, message):
    g = build_func("g", [F3], E.neg)
    f = func([], [Eqn(C.call, args, [Var(F3)], {"callee": g})], [])
    fails(f, f"@f, call: type inference failed: call @g: {message}")


def test_errors_inside_callees_name_the_callee():
    g = build_func("g", [F3], E.neg)
    g.block.eqns[0].outputs[0].type = D3
    f = build_func("f", [F3], lambda x: C.call(x, callee=g))
    f.block.eqns[0].outputs[0].type = D3
    f.out_types = g.out_types = [D3]
    fails(f, "@g, neg: output 0 %1:f64[3] should have type f32[3]")


# 11
def test_function_results_differ_from_the_declared_count():
    f = build_func("f", [F3], lambda x: x)
    f.out_types = [F3, F3]
    fails(f, "@f: returns 1 values but declares 2")


def test_function_results_differ_from_the_declared_types():
    f = build_func("f", [F3], lambda x: x)
    f.out_types = [D3]
    fails(f, "@f: result 0 has type f32[3] but the function declares f64[3]")


# 12
def test_stack_pushed_twice():
    def body(x):
        s = S.stack_new()
        S.stack_push(s, x)
        return S.stack_push(s, x)

    fails(build_func("f", [F3], body),
          "@f, stack_push: stack value %1:stack is used twice: as operand 0 of "
          "stack_push and as operand 0 of stack_push (stacks are linear)")


def test_stack_pushed_and_returned():
    def body(x):
        s = S.stack_new()
        return S.stack_push(s, x), s

    fails(build_func("f", [F3], body), "@f: stack value %1:stack is used twice: as "
                                       "operand 0 of stack_push and as result 1")


def test_stack_used_by_two_branches_and_the_block_after():
    st = StackType()

    def body(p, s):
        b = current()
        then = b.block([st], lambda t: t)
        orelse = b.block([st], lambda t: t)
        C.cond(p, s, then=then, orelse=orelse)
        return S.stack_pop(s, elem=F3)

    fails(build_func("f", [BOOL, st], body),
          "@f, stack_pop: stack value %1:stack is used twice: as operand 1 of cond "
          "and as operand 0 of stack_pop")


def test_stack_captured_by_a_branch_and_used_after():
    st = StackType()

    def body(p, s, x):
        b = current()
        C.cond(p, x, then=b.block([F3], lambda t: S.stack_pop(s, elem=F3)[1]),
               orelse=b.block([F3], lambda t: t))
        return S.stack_push(s, x)

    fails(build_func("f", [BOOL, st, F3], body),
          "stack value %1:stack is used twice: as operand 0 of stack_pop and as "
          "operand 0 of stack_push")


# 13
def test_effect_declaring_outputs():
    x = Var(F3)
    f = func([x], [Eqn(C.debug_print, [x], [Var(F3)], {"fmt": "{}"}, LOC)], [])
    fails(f, "@f, debug_print at model.py:12:4: an effect declares 1 outputs")


# 14
def test_op_that_is_not_the_registered_one():
    x = Var(F3)
    impostor = copy.copy(E.neg)
    fails(func([x], [Eqn(impostor, [x], [Var(F3)])], []),
          "@f: <op neg> is not the registered op of its name")


def test_nested_blocks_are_verified():
    def body(x):
        b = current()
        inner = b.block([F3], E.exp)
        return C.while_loop(x, cond=b.block([F3], lambda c: Lit(True)), body=inner)

    f = build_func("f", [F3], body)
    f.block.eqns[0].params["body"].eqns[0].outputs[0].type = D3
    fails(f, "@f, exp: output 0 %4:f64[3] should have type f32[3]")


def test_recursive_function_verifies_once_per_function():
    fact = Func("fact", out_types=[I64])
    with Builder() as b:
        n = b.param(I64)
        fact.block = b.frame
        (r,) = C.call(E.sub(n, np.int64(1)), callee=fact)
        b.finish("fact", [E.mul(n, r)])
    verify(fact)
    verify(Module([fact]))
