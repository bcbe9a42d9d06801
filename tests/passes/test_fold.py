"""Constant folding: small all-literal equations become literals, in nested blocks too;
broadcasts, ops without operands, control flow, large results and raising ops stay."""

import numpy as np
import pytest

from pullback.backends import interp
from pullback.ir.builder import Builder
from pullback.ir.core import Lit
from pullback.ir.types import TensorType, float64
from pullback.ops import elementwise as E
from pullback.passes.fold import MAX_ELEMENTS, fold

from .passcheck import check_pass


def test_literal_arithmetic_becomes_literals():
    """Chains fold at once, weak types survive, inf is a value, multi-result ops fold."""
    check_pass(fold, """
        func @f(%0:f64[3]) -> (f64[3], ~i64[], i64[], f64[2,2], i32[2], f64[3], f64[3]) {
          %1:~i64[] = sub 3:~i64[], 0:~i64[]   # m.py:1:0
          %2:~i64[] = add %1, 1:~i64[]
          %3:~i64[] = sign 1:~i64[]
          %4:~i64[] = mul %3, %2
          %5:i64[] = convert %4 {dtype=i64, weak=False}
          %6:f64[] = div 1.0:f64[], 0.0:f64[]
          %7:f64[3] = mul %0, %6
          %8:f64[3] = broadcast_in_dim 2.0:f64[] {shape=(3,), dims=()}
          %9:f64[3] = add %8, [1.0, 2.0, 3.0]:f64[3]
          %10:f64[2,2], %11:i32[2], %12:i32[2] = lu [[1.0, 2.0], [4.0, 2.0]]:f64[2,2]
          %13:f64[3] = cond True:bool[], %0 {
            then(%14:f64[3]) {
              %15:f64[] = exp 0.0:f64[]
              %16:f64[3] = mul %14, %15
              yield %16
            }
            orelse(%17:f64[3]) {
              yield %17
            }
          }
          %18:i64[2] = iota {shape=(2,), dim=0, dtype=i64}
          return %7, %4, %5, %10, %12, %9, %13
        }
    """, """
        func @f(%0:f64[3]) -> (f64[3], ~i64[], i64[], f64[2,2], i32[2], f64[3], f64[3]) {
          %1:f64[3] = mul %0, inf:f64[]
          %2:f64[3] = broadcast_in_dim 2.0:f64[] {shape=(3,), dims=()}
          %3:f64[3] = add %2, [1.0, 2.0, 3.0]:f64[3]
          %4:f64[3] = cond True:bool[], %0 {
            then(%5:f64[3]) {
              %6:f64[3] = mul %5, 1.0:f64[]
              yield %6
            }
            orelse(%7:f64[3]) {
              yield %7
            }
          }
          %8:i64[2] = iota {shape=(2,), dim=0, dtype=i64}
          return %1, 4:~i64[], 4:i64[], [[4.0, 2.0], [0.25, 1.5]]:f64[2,2], [1, 0]:i32[2], %3, %4
        }
    """)


def test_a_raising_op_stays_where_it_raises():
    source = """
        func @f(%0:bool[]) -> (i64[]) {
          %1:i64[] = cond %0 {
            then() {
              %2:i64[] = pow 2:i64[], -1:i64[]
              yield %2
            }
            orelse() {
              yield 0:i64[]
            }
          }
          return %1
        }
    """
    out = check_pass(fold, source, source, args=[False])
    with pytest.raises(ValueError, match="negative integer powers"):
        interp.run(out, True)


@pytest.mark.parametrize("size", [MAX_ELEMENTS, MAX_ELEMENTS + 1])
def test_only_small_results_fold(size):
    t = TensorType((size,), float64)
    with Builder() as b:
        y = E.add(Lit(np.arange(size, dtype=np.float64), t), 1.0)
        out = fold(b.finish("f", [y]))
    assert (not out.block.eqns) == (size <= MAX_ELEMENTS)
    (result,) = interp.run(out)
    np.testing.assert_array_equal(result, np.arange(size) + 1.0)
