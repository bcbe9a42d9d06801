"""The textual IR: golden texts from the printer, parse → print round trips (bit-exact
literals included), and the parser's errors."""

import textwrap

import numpy as np
import pytest

from pullback.errors import Loc, ParseError
from pullback.ir.builder import Builder, build_func, current
from pullback.ir.core import Block, Eqn, Func, Lit, Module, Var
from pullback.ir.op import OPS, Op
from pullback.ir.parser import parse_func, parse_module
from pullback.ir.printer import format_func, format_module
from pullback.ir.types import StackType, TensorType, bool_, float32, float64, int32, int64
from pullback.ir.verify import verify
from pullback.ops import control as C
from pullback.ops import elementwise as E
from pullback.ops import stack as S

F3 = TensorType((3,), float32)
I64 = TensorType((), int64)
WEAK_F64 = TensorType((), float64, weak=True)


def golden(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def assert_prints(func_or_module, want: str) -> None:
    """Prints as ``want``, verifies, and ``want`` parses back to itself."""
    fmt, parse = (format_module, parse_module) if isinstance(func_or_module, Module) else (
        format_func, parse_func)
    want = golden(want)
    verify(func_or_module)
    assert fmt(func_or_module) == want
    again = parse(want)
    verify(again)
    assert fmt(again) == want


def test_elementwise_with_locations_and_weak_params():
    def body(x, s):
        with current().at(Loc("/path/model.py", 12, 4, func="f")):
            y = E.mul(x, np.float32(2.5))
        z = E.add(E.convert(s, dtype=float32, weak=False), y)
        return y, E.gt(z, y)

    f = build_func("f", [F3, WEAK_F64], body)
    assert_prints(f, """
        func @f(%0:f32[3], %1:~f64[]) -> (f32[3], bool[3]) {
          %2:f32[3] = mul %0, 2.5:f32[]   # /path/model.py:12:4
          %3:f32[] = convert %1 {dtype=f32, weak=False}
          %4:f32[3] = add %3, %2
          %5:bool[3] = gt %4, %2
          return %2, %5
        }
    """)


def test_cond():
    def body(p, x):
        b = current()
        return C.cond(p, x, then=b.block([F3], E.exp), orelse=b.block([F3], lambda v: v))

    f = build_func("f", [TensorType((), bool_), F3], body)
    assert_prints(f, """
        func @f(%0:bool[], %1:f32[3]) -> (f32[3]) {
          %2:f32[3] = cond %0, %1 {
            then(%3:f32[3]) {
              %4:f32[3] = exp %3
              yield %4
            }
            orelse(%5:f32[3]) {
              yield %5
            }
          }
          return %2
        }
    """)


def test_while_loop_reading_an_enclosing_value():
    def body(x, limit):
        b = current()
        cond = b.block([I64], lambda i: E.lt(i, limit))
        step = b.block([I64], lambda i: E.add(i, np.int64(1)))
        with b.at(Loc("loop.py", 3, 0)):
            return C.while_loop(x, cond=cond, body=step)

    f = build_func("count", [I64, I64], body)
    assert_prints(f, """
        func @count(%0:i64[], %1:i64[]) -> (i64[]) {
          %2:i64[] = while_loop %0 {   # loop.py:3:0
            cond(%3:i64[]) {
              %4:bool[] = lt %3, %1
              yield %4
            }
            body(%5:i64[]) {
              %6:i64[] = add %5, 1:i64[]
              yield %6
            }
          }
          return %2
        }
    """)


def test_for_loop_with_two_carries():
    def body(n, x):
        def step(i, acc, y):
            return E.add(acc, E.convert(i, dtype=float32, weak=False)), E.mul(y, y)

        blk = current().block([TensorType((), int32), F3, F3], step)
        return C.for_loop(np.int32(0), n, np.int32(2), x, x, body=blk)

    f = build_func("f", [TensorType((), int32), F3], body)
    assert_prints(f, """
        func @f(%0:i32[], %1:f32[3]) -> (f32[3], f32[3]) {
          %2:f32[3], %3:f32[3] = for_loop 0:i32[], %0, 2:i32[], %1, %1 {
            body(%4:i32[], %5:f32[3], %6:f32[3]) {
              %7:f32[] = convert %4 {dtype=f32, weak=False}
              %8:f32[3] = add %5, %7
              %9:f32[3] = mul %6, %6
              yield %8, %9
            }
          }
          return %2, %3
        }
    """)


def recursive_module() -> Func:
    """``fact(n) = n <= 1 ? 1 : n * fact(n - 1)``, called from ``main`` through ``twice``."""
    fact = Func("fact", out_types=[I64])
    with Builder() as b:
        n = b.param(I64)
        fact.block = b.frame

        def recurse(m):
            (r,) = C.call(E.sub(m, np.int64(1)), callee=fact)
            return E.mul(m, r)

        base = b.block([I64], lambda m: np.int64(1))
        b.finish("fact", C.cond(E.le(n, np.int64(1)), n, then=base, orelse=b.block([I64], recurse)))
    twice = build_func("twice", [I64], lambda x: C.call(C.call(x, callee=fact)[0], callee=fact))
    return build_func("main", [I64], lambda x: C.call(x, callee=twice))


RECURSIVE_TEXT = """
    func @main(%0:i64[]) -> (i64[]) {
      %1:i64[] = call %0 {callee=@twice}
      return %1
    }

    func @twice(%0:i64[]) -> (i64[]) {
      %1:i64[] = call %0 {callee=@fact}
      %2:i64[] = call %1 {callee=@fact}
      return %2
    }

    func @fact(%0:i64[]) -> (i64[]) {
      %1:bool[] = le %0, 1:i64[]
      %2:i64[] = cond %1, %0 {
        then(%3:i64[]) {
          yield 1:i64[]
        }
        orelse(%4:i64[]) {
          %5:i64[] = sub %4, 1:i64[]
          %6:i64[] = call %5 {callee=@fact}
          %7:i64[] = mul %4, %6
          yield %7
        }
      }
      return %2
    }
"""


def test_calls_print_every_callee_once_and_parse_recursion():
    main = recursive_module()
    assert_prints(main, RECURSIVE_TEXT)
    again = parse_func(golden(RECURSIVE_TEXT))
    fact = again.block.eqns[0].params["callee"].block.eqns[0].params["callee"]
    inner = fact.block.eqns[1].params["orelse"].eqns[1]
    assert inner.params["callee"] is fact


def test_module_prints_entry_first():
    main = recursive_module()
    funcs = [main, *main.callees()]
    module = Module(funcs[::-1], entry="main")
    text = format_module(module)
    assert text.startswith("func @main(")
    assert text.count("func @") == 3
    again = parse_module(text)
    assert again.entry == "main" and list(again.funcs) == ["main", "fact", "twice"]
    assert format_module(again) == text


def test_effects_and_stacks():
    def body(x, ok):
        C.debug_print(x, ok, fmt='x = {} "{}"\n\t\\ ü')
        C.check(ok, x, exc="ValueError", fmt="bad {}")
        s = S.stack_new()
        s = S.stack_push(s, x)
        s, y = S.stack_pop(s, elem=F3)
        return s, y

    f = build_func("f", [F3, TensorType((), bool_)], body)
    assert_prints(f, r"""
        func @f(%0:f32[3], %1:bool[]) -> (stack, f32[3]) {
          debug_print %0, %1 {fmt="x = {} \"{}\"\n\t\\ \u00fc"}
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          %2:stack = stack_new
          %3:stack = stack_push %2, %0
          %4:stack, %5:f32[3] = stack_pop %3 {elem=f32[3]}
          return %4, %5
        }
    """)


SCALARS = [
    (True, bool_, "True"), (False, bool_, "False"),
    (-3, int32, "-3"), (2**31 - 1, int32, "2147483647"), (-(2**63), int64, "-9223372036854775808"),
    (0.1, float32, "0.1"), (0.1, float64, "0.1"), (1e300, float64, "1e+300"),
    (-0.0, float32, "-0.0"), (-0.0, float64, "-0.0"), (np.inf, float64, "inf"),
    (-np.inf, float32, "-inf"), (np.nan, float64, "nan"), (np.nan, float32, "nan"),
    (3.4028235e38, float32, "3.4028235e+38"), (5e-324, float64, "5e-324"),
    (1e-45, float32, "1e-45"), (16777216.0, float32, "1.6777216e+07"),
]


def _lit_func(lit: Lit) -> Func:
    """A function returning ``lit`` (through an op, so the literal is an operand too)."""
    op = E.max_ if lit.type.dtype == bool_ else E.add
    return build_func("f", [], lambda: [lit, op(lit, lit)])


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("value, dt, text", SCALARS, ids=lambda x: str(x))
@pytest.mark.parametrize("weak", [False, True])
def test_scalar_literals(value, dt, text, weak):
    t = TensorType((), dt, weak)
    f = _lit_func(Lit(np.array(value, dt.np), t))
    printed = format_func(f)
    assert f"return {text}:{t}, %0" in printed
    again = parse_func(printed)
    assert format_func(again) == printed
    assert _same_bits(again.block.results[0].value, f.block.results[0].value)
    assert again.block.results[0].type == t


@pytest.mark.parametrize("dt", [float32, float64], ids=str)
def test_float_literals_round_trip_bit_exactly(dt):
    bits = np.random.default_rng(0).integers(0, 256, 2000 * dt.itemsize, dtype=np.uint8)
    values = bits.view(dt.np)
    values = values[~np.isnan(values)]
    lit = Lit(values, TensorType(values.shape, dt))
    again = parse_func(format_func(_lit_func(lit)))
    assert _same_bits(again.block.results[0].value, values)


@pytest.mark.parametrize("value, text", [
    (np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), "[[1.0, 2.0], [3.0, 4.0]]:f32[2,2]"),
    (np.array([True, False]), "[True, False]:bool[2]"),
    (np.array([[-1], [7]], np.int32), "[[-1], [7]]:i32[2,1]"),
    (np.array([-0.0, np.nan, -np.inf]), "[-0.0, nan, -inf]:f64[3]"),
    (np.zeros(0, np.float32), "[]:f32[0]"),
    (np.zeros((2, 0), np.float32), "[[], []]:f32[2,0]"),
    (np.zeros((0, 3), np.int64), "[]:i64[0,3]"),
    (np.zeros((2, 0, 3), np.bool_), "[[], []]:bool[2,0,3]"),
    (np.arange(8, dtype=np.int64).reshape(2, 2, 2),
     "[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]:i64[2,2,2]"),
])
def test_array_literals(value, text):
    f = _lit_func(Lit(value))
    printed = format_func(f)
    assert f"return {text}, %0" in printed
    again = parse_func(printed)
    verify(again)
    assert format_func(again) == printed
    assert _same_bits(again.block.results[0].value, value)


@pytest.fixture
def params_op():
    """A throwaway op with one param of every printable kind."""
    kinds = {"i": "int", "f": "float", "b": "bool", "s": "str", "d": "dtype", "t": "type",
             "ints": "ints", "maybe": "ints?", "pairs": "pairs"}
    op = Op("test_params", infer=lambda ts, **_: ts[0], impl=lambda x, **_: x, params=kinds)
    yield op
    del OPS[op.name]


@pytest.mark.parametrize("params, text", [
    (dict(i=-3, f=0.1, b=True, s="", d=int32, t=TensorType((2, 0), bool_), ints=(),
          maybe=None, pairs=((1,), (0, 2))),
     '{i=-3, f=0.1, b=True, s="", d=i32, t=bool[2,0], ints=(), maybe=None, '
     'pairs=((1,), (0, 2))}'),
    (dict(i=0, f=-np.inf, b=False, s="a\"b\n", d=bool_, t=WEAK_F64, ints=(5,),
          maybe=(1, -1), pairs=()),
     r'{i=0, f=-inf, b=False, s="a\"b\n", d=bool, t=~f64[], ints=(5,), maybe=(1, -1), '
     'pairs=()}'),
    (dict(i=2**40, f=1e300, b=True, s="{}", d=float64, t=F3, ints=(1, 2, 3), maybe=(),
          pairs=((),)),
     '{i=1099511627776, f=1e+300, b=True, s="{}", d=f64, t=f32[3], ints=(1, 2, 3), '
     'maybe=(), pairs=((),)}'),
])
def test_param_values(params_op, params, text):
    f = build_func("f", [F3], lambda x: params_op(x, **params))
    printed = format_func(f)
    assert f"%1:f32[3] = test_params %0 {text}\n" in printed
    again = parse_func(printed)
    verify(again)
    assert format_func(again) == printed
    assert again.block.eqns[0].params == params


def test_nan_float_param_round_trips(params_op):
    params = dict(i=0, f=np.nan, b=True, s="", d=int32, t=F3, ints=(), maybe=None, pairs=())
    f = build_func("f", [F3], lambda x: params_op(x, **params))
    again = parse_func(format_func(f))
    assert np.isnan(again.block.eqns[0].params["f"])


def test_odd_function_names_and_locations_are_quoted_and_split_from_the_right():
    eqn_loc = Loc("C:\\dir\\a:b.py", 7, 11)
    inner = build_func("<lambda>", [F3], lambda x: x)
    with Builder(loc=eqn_loc) as b:
        x = b.param(F3)
        f = b.finish("outer.method", C.call(x, callee=inner))
    printed = format_func(f)
    assert printed.splitlines()[0] == "func @outer.method(%0:f32[3]) -> (f32[3]) {"
    assert '%1:f32[3] = call %0 {callee=@"<lambda>"}   # C:\\dir\\a:b.py:7:11' in printed
    assert 'func @"<lambda>"(%0:f32[3]) -> (f32[3]) {' in printed
    again = parse_func(printed)
    assert again.block.eqns[0].loc == eqn_loc
    assert format_func(again) == printed


def test_parser_accepts_any_names_blank_lines_and_comments_then_prints_canonically():
    text = """
        # a comment line
        func @g(%x:f32[3], %y.1:f32[3]) -> (f32[3]) {

          %a_b:f32[3] = add %x, %y.1
            # indented comment
          %7:f32[3] = cond True:bool[], %a_b {
            then(%t:f32[3]) {
              yield %t
            }
            orelse(%t:f32[3]) {
              %u:f32[3] = neg %x
              yield %u
            }
          }
          return %7
        }
    """
    f = parse_func(golden(text))
    verify(f)
    assert format_func(f) == golden("""
        func @g(%0:f32[3], %1:f32[3]) -> (f32[3]) {
          %2:f32[3] = add %0, %1
          %3:f32[3] = cond True:bool[], %2 {
            then(%4:f32[3]) {
              yield %4
            }
            orelse(%5:f32[3]) {
              %6:f32[3] = neg %0
              yield %6
            }
          }
          return %3
        }
    """)


def test_printer_shows_malformed_ir_without_failing():
    stray = Var(F3)
    f = Func("f", Block([], [Eqn(E.neg, [stray], [Var(F3)])], []))
    printed = format_func(f)
    assert "%0:f32[3] = neg %undef.1" in printed
    with pytest.raises(ParseError, match="%undef.1 is not defined"):
        parse_func(printed)


GOOD = golden("""
func @f(%0:f32[3]) -> (f32[3]) {
  %1:f32[3] = neg %0
  return %1
}
""")


@pytest.mark.parametrize("old, new, where, message", [
    ("neg %0", "negate %0", "2:15", "unknown op 'negate'"),
    ("neg %0", "neg %9", "2:19", "%9 is not defined here"),
    ("%1:f32[3] = neg", "%0:f32[3] = neg", "2:3", "%0 is defined twice"),
    ("%1:f32[3] = neg", "%1:f64[3] = neg", "2:3", "output type is f32[3], written f64[3]"),
    ("%1:f32[3] = neg", "%1:f32[3], %2:f32[3] = neg", "2:3", "1 outputs, 2 written"),
    ("neg %0", "neg %0 {axis=1}", "2:22", "neg: unknown param 'axis'"),
    ("neg %0", "convert %0", "2:25", "convert: missing param 'dtype'"),
    ("neg %0", "convert %0 {dtype=3, weak=False}", "2:26",
     "param dtype=3 is not of kind 'dtype'"),
    ("neg %0", "neg %0 {\n    r() {\n      yield\n    }\n  }", "2:3", "neg has no regions"),
    ("neg %0", "add %0, 1.0:f64[]", "2:3", "add needs operands of one dtype"),
    ("neg %0", "add %0, [1.0, 2.0]:f32[3]", "2:23", "expected a list of 3 elements"),
    ("neg %0", "add %0, [[1.0]]:f32[1]", "2:23", "expected a scalar of f32[1]"),
    ("neg %0", "add %0, 2:f16[]", "2:25", "unknown dtype 'f16'"),
    ("neg %0", "add %0, True:f32[]", "2:23", "True is not a float32 value"),
    ("neg %0", "add %0, 1.5:i64[]", "2:23", "1.5 is not a int64 value"),
    ("neg %0", "eq %0, 3000000000:i32[]", "2:22", "3000000000 does not fit in int32"),
    ("neg %0", "add %0, 1:stack", "2:25", "a literal cannot have type stack"),
    ("neg %0", "neg %0   # nowhere", "2:24", "expected a location 'file:line:col'"),
    ("neg %0", "neg %0 $", "2:22", "unexpected character '$'"),
    ("neg %0", 'check True:bool[] {exc="\\q", fmt=""}', "2:38", "bad string: Invalid \\escape"),
    ("neg %0", "convert %0 {dtype=f32, weak=False, dtype=f32}", "2:26",
     "convert: a param is given twice"),
    ("neg %0", "call %0 {callee=@g}", "2:31", "no function @g"),
    ("  return %1\n", "", "3:1", "expected 'return', found '}'"),
    ("-> (f32[3])", "-> f32[3]", "1:23", "expected '(', found 'f32'"),
    ("(%0:f32[3])", "(%0:~f32[3])", "1:12", "only 0-d types can be weak"),
    ("}\n", "", "4:1", "expected '}' closing the function, found end of text"),
    ("}\n", "}\nfunc @f() -> () {\n  return\n}\n", "5:6", "function @f defined twice"),
])
def test_parse_errors(old, new, where, message):
    assert old in GOOD
    with pytest.raises(ParseError) as e:
        parse_func(GOOD.replace(old, new, 1))
    first = str(e.value).splitlines()[0]
    assert first.startswith(f"{where}: ") and message in first, str(e.value)


def test_parse_error_shows_the_line_with_a_caret():
    with pytest.raises(ParseError) as e:
        parse_func(GOOD.replace("neg %0", "neg %7"))
    assert str(e.value).splitlines()[1:] == ["      %1:f32[3] = neg %7", "                      ^"]


def test_parse_error_for_cond_branches_of_different_types():
    text = golden("""
        func @f(%0:bool[], %1:f32[3]) -> (f32[3]) {
          %2:f32[3] = cond %0, %1 {
            then(%3:f32[3]) {
              yield %3
            }
            orelse(%4:f32[3]) {
              yield 1.0:f32[]
            }
          }
          return %2
        }
    """)
    with pytest.raises(ParseError, match=r"^2:3: cond: block 'orelse' returns \(f32\[\]\)"):
        parse_func(text)


def test_parse_error_for_regions_out_of_order():
    text = GOOD.replace("  %1:f32[3] = neg %0\n", golden("""
          %1:f32[3] = cond True:bool[], %0 {
            orelse(%2:f32[3]) {
              yield %2
            }
          }
    """))
    with pytest.raises(ParseError, match=r"^3:3: expected 'then', found 'orelse'"):
        parse_func(text)


def test_stack_literal_types_parse():
    text = GOOD.replace("%1:f32[3] = neg %0", "%1:stack = stack_new")
    text = text.replace("-> (f32[3])", "-> (stack)")
    f = parse_func(text)
    assert f.out_types == [StackType()]
    assert format_func(f) == text
