"""A ``for_loop`` over a literal range of one index is replaced by a copy of its body
(``passes/inline.py``): its index a literal of the index's type, its carries values like
any other; a loop of another count, or of bounds not literal, stays.  One Runge-Kutta
step then compiles to one kernel writing the result, with NumPy's bits."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.passes.inline import inline

from ..ode_program import rk4
from .passcheck import check_pass


def test_a_loop_of_one_index_is_its_body():
    check_pass(inline, """
        func @main(%0:f64[3], %1:i64[]) -> (f64[3], f64[3], f64[3]) {
          %2:f64[3] = for_loop 2:i64[], 3:i64[], 1:i64[], %0 {
            body(%3:i64[], %4:f64[3]) {
              %5:f64[] = convert %3 {dtype=f64, weak=False}
              %6:f64[3] = mul %4, %5   # m.py:3:8
              yield %6
            }
          }
          %7:f64[3] = for_loop 5:i64[], 1:i64[], -2:i64[], %2 {
            body(%8:i64[], %9:f64[3]) {
              %10:f64[3] = add %9, %9
              yield %10
            }
          }
          %11:f64[3] = for_loop 0:i64[], %1, 1:i64[], %0 {
            body(%12:i64[], %13:f64[3]) {
              %14:f64[3] = add %13, %13
              yield %14
            }
          }
          return %2, %7, %11
        }
    """, """
        func @main(%0:f64[3], %1:i64[]) -> (f64[3], f64[3], f64[3]) {
          %2:f64[] = convert 2:i64[] {dtype=f64, weak=False}
          %3:f64[3] = mul %0, %2   # m.py:3:8
          %4:f64[3] = for_loop 5:i64[], 1:i64[], -2:i64[], %3 {
            body(%5:i64[], %6:f64[3]) {
              %7:f64[3] = add %6, %6
              yield %7
            }
          }
          %8:f64[3] = for_loop 0:i64[], %1, 1:i64[], %0 {
            body(%9:i64[], %10:f64[3]) {
              %11:f64[3] = add %10, %10
              yield %11
            }
          }
          return %3, %4, %8
        }
    """)


@pytest.mark.parametrize("n", [1, 2, 7, 300])
@pytest.mark.parametrize("backend", ["c", "interp"])
def test_one_runge_kutta_step_is_numpys(n, backend):
    x = np.random.default_rng(n).random(n)
    f = pb.jit(rk4, backend=backend)
    np.testing.assert_array_equal(f(x, 1), rk4(x, 1))
    np.testing.assert_array_equal(f(x, 3), rk4(x, 3))
    assert "for_loop" not in [e.op.name for e in f.lower(x, 1).ir.block.walk()]
