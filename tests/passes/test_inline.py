"""Inlining: calls of non-recursive functions become copies of their bodies (fresh
values, source locations kept); recursive functions stay, their helpers inlined."""

from pullback.ir.parser import parse_module
from pullback.passes.inline import inline, is_recursive

from .passcheck import check_pass, golden


def test_non_recursive_calls_are_inlined_recursive_ones_stay():
    check_pass(inline, """
        func @main(%0:f64[], %1:i64[]) -> (f64[], f64[], f64[]) {
          %2:f64[] = call %0 {callee=@square}   # m.py:1:0
          %3:f64[] = call %2 {callee=@square}   # m.py:2:0
          %4:f64[] = call %1, %0 {callee=@power}
          %5:f64[], %6:f64[] = call %0 {callee=@pair}
          return %3, %4, %6
        }

        func @square(%0:f64[]) -> (f64[]) {
          %1:f64[] = mul %0, %0   # lib.py:5:4
          return %1
        }

        func @pair(%0:f64[]) -> (f64[], f64[]) {
          %1:f64[] = call %0 {callee=@square}
          return %0, %1
        }

        func @power(%0:i64[], %1:f64[]) -> (f64[]) {
          %2:bool[] = gt %0, 0:i64[]
          %3:f64[] = cond %2, %0, %1 {
            then(%4:i64[], %5:f64[]) {
              %6:i64[] = sub %4, 1:i64[]
              %7:f64[] = call %6, %5 {callee=@power}
              %8:f64[] = call %7 {callee=@scale}
              yield %8
            }
            orelse(%9:i64[], %10:f64[]) {
              yield 1.0:f64[]
            }
          }
          return %3
        }

        func @scale(%0:f64[]) -> (f64[]) {
          %1:f64[] = mul %0, 2.0:f64[]   # lib.py:9:4
          return %1
        }
    """, """
        func @main(%0:f64[], %1:i64[]) -> (f64[], f64[], f64[]) {
          %2:f64[] = mul %0, %0   # lib.py:5:4
          %3:f64[] = mul %2, %2   # lib.py:5:4
          %4:f64[] = call %1, %0 {callee=@power}
          %5:f64[] = mul %0, %0   # lib.py:5:4
          return %3, %4, %5
        }

        func @power(%0:i64[], %1:f64[]) -> (f64[]) {
          %2:bool[] = gt %0, 0:i64[]
          %3:f64[] = cond %2, %0, %1 {
            then(%4:i64[], %5:f64[]) {
              %6:i64[] = sub %4, 1:i64[]
              %7:f64[] = call %6, %5 {callee=@power}
              %8:f64[] = mul %7, 2.0:f64[]   # lib.py:9:4
              yield %8
            }
            orelse(%9:i64[], %10:f64[]) {
              yield 1.0:f64[]
            }
          }
          return %3
        }
    """)


def test_mutual_recursion_is_recursion():
    module = parse_module(golden("""
        func @even(%0:i64[]) -> (bool[]) {
          %1:bool[] = call %0 {callee=@odd}
          return %1
        }

        func @odd(%0:i64[]) -> (bool[]) {
          %1:bool[] = call %0 {callee=@even}
          return %1
        }

        func @leaf(%0:i64[]) -> (bool[]) {
          %1:bool[] = gt %0, 0:i64[]
          return %1
        }
    """))
    funcs = module.funcs
    assert is_recursive(funcs["even"]) and is_recursive(funcs["odd"])
    assert not is_recursive(funcs["leaf"])
