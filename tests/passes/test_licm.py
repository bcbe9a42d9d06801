"""Loop-invariant code motion: what reads only outer values, literals and carried values
that the body passes through moves in front of the loop, out of whole nests; what may
fail, has effects or is opaque stays."""

import numpy as np

from pullback.passes.licm import licm

from .passcheck import check_pass


def test_invariants_leave_nested_loops():
    args = [np.array([1.0, 2.0, 0.5]), np.float64(0.3), np.int64(3), np.eye(3)]
    check_pass(licm, """
        func @f(%0:f64[3], %1:f64[], %2:i64[], %3:f64[3,3]) -> (f64[3], f64[], i64[]) {
          %4:f64[3], %5:f64[], %6:i64[] = for_loop 0:i64[], %2, 1:i64[], %0, %1, 7:i64[] {
            body(%7:i64[], %8:f64[3], %9:f64[], %10:i64[]) {
              %11:f64[] = exp %9   # m.py:2:4
              %12:f64[3] = broadcast_in_dim %11 {shape=(3,), dims=()}
              %13:f64[3] = mul %8, %12
              %14:f64[] = convert %7 {dtype=f64, weak=False}
              %15:f64[3] = add %13, %14
              %16:f64[3] = dot_general %3, %0 {contract=((1,), (0,)), batch=((), ())}
              %17:f64[3] = add %15, %16
              %18:i64[] = floordiv %2, %10
              %19:i64[] = add %18, 1:i64[]
              %20:f64[] = reduce_sum %0 {axes=(0,)}
              %21:bool[] = gt %20, 0.0:f64[]
              check %21 {exc="ValueError", fmt="negative"}
              %22:f64[3], %23:f64[] = while_loop %17, %9 {
                cond(%24:f64[3], %25:f64[]) {
                  %26:f64[] = abs %25
                  %27:f64[] = reduce_max %24 {axes=(0,)}
                  %28:bool[] = lt %27, %26
                  yield %28
                }
                body(%29:f64[3], %30:f64[]) {
                  %31:f64[] = mul %30, %20
                  %32:f64[] = exp %31
                  %33:f64[] = add %32, %11
                  %34:f64[3] = add %29, %33
                  yield %34, %30
                }
              }
              yield %22, %9, %10
            }
          }
          return %4, %5, %6
        }
    """, """
        func @f(%0:f64[3], %1:f64[], %2:i64[], %3:f64[3,3]) -> (f64[3], f64[], i64[]) {
          %4:f64[] = exp %1   # m.py:2:4
          %5:f64[3] = broadcast_in_dim %4 {shape=(3,), dims=()}
          %6:f64[3] = dot_general %3, %0 {contract=((1,), (0,)), batch=((), ())}
          %7:f64[] = reduce_sum %0 {axes=(0,)}
          %8:bool[] = gt %7, 0.0:f64[]
          %9:f64[] = abs %1
          %10:f64[] = mul %1, %7
          %11:f64[] = exp %10
          %12:f64[] = add %11, %4
          %13:f64[3] = for_loop 0:i64[], %2, 1:i64[], %0 {
            body(%14:i64[], %15:f64[3]) {
              %16:f64[3] = mul %15, %5
              %17:f64[] = convert %14 {dtype=f64, weak=False}
              %18:f64[3] = add %16, %17
              %19:f64[3] = add %18, %6
              %20:i64[] = floordiv %2, 7:i64[]
              %21:i64[] = add %20, 1:i64[]
              check %8 {exc="ValueError", fmt="negative"}
              %22:f64[3] = while_loop %19 {
                cond(%23:f64[3]) {
                  %24:f64[] = reduce_max %23 {axes=(0,)}
                  %25:bool[] = lt %24, %9
                  yield %25
                }
                body(%26:f64[3]) {
                  %27:f64[3] = add %26, %12
                  yield %27
                }
              }
              yield %22
            }
          }
          return %13, %1, 7:i64[]
        }
    """, args)


def test_what_may_fail_stays():
    """An integer power may raise (negative exponents); a float one moves."""
    check_pass(licm, """
        func @f(%0:f64[], %1:i64[]) -> (f64[], i64[]) {
          %2:f64[], %3:i64[] = while_loop %0, 0:i64[] {
            cond(%4:f64[], %5:i64[]) {
              %6:bool[] = lt %5, %1
              yield %6
            }
            body(%7:f64[], %8:i64[]) {
              %9:f64[] = sin %7
              %10:i64[] = add %8, 1:i64[]
              %11:f64[] = pow %0, 2.0:f64[]
              %12:i64[] = pow %1, 2:i64[]
              %13:f64[] = convert %12 {dtype=f64, weak=False}
              %14:f64[] = add %9, %11
              %15:f64[] = add %14, %13
              yield %15, %10
            }
          }
          return %2, %3
        }
    """, """
        func @f(%0:f64[], %1:i64[]) -> (f64[], i64[]) {
          %2:f64[] = pow %0, 2.0:f64[]
          %3:f64[], %4:i64[] = while_loop %0, 0:i64[] {
            cond(%5:f64[], %6:i64[]) {
              %7:bool[] = lt %6, %1
              yield %7
            }
            body(%8:f64[], %9:i64[]) {
              %10:f64[] = sin %8
              %11:i64[] = add %9, 1:i64[]
              %12:i64[] = pow %1, 2:i64[]
              %13:f64[] = convert %12 {dtype=f64, weak=False}
              %14:f64[] = add %10, %2
              %15:f64[] = add %14, %13
              yield %15, %11
            }
          }
          return %3, %4
        }
    """, args=[np.float64(0.5), np.int64(3)])


def test_a_loop_that_runs_lets_what_may_fail_move_until_something_may():
    """Over a literal, non-empty range the body runs: an invariant gather and check move
    out (they would have failed first anyway); after a kept gather that may fail, an
    invariant one stays (it must not fail before it)."""
    args = [np.array([1.0, 2.0, 0.5]), np.array([2, 0, 1]), np.array([0, 1])]
    check_pass(licm, """
        func @f(%0:f64[3], %1:i64[3], %2:i64[2]) -> (f64[3]) {
          %3:f64[3] = for_loop 0:i64[], 4:i64[], 1:i64[], %0 {
            body(%4:i64[], %5:f64[3]) {
              %6:f64[3] = gather %0, %1 {axis=0}
              %7:f64[] = reduce_sum %6 {axes=(0,)}
              %8:bool[] = gt %7, 0.0:f64[]
              check %8 {exc="ValueError", fmt="negative"}
              %9:f64[3] = gather %5, %1 {axis=0}
              %10:f64[2] = gather %0, %2 {axis=0}
              %11:f64[] = reduce_sum %10 {axes=(0,)}
              %12:f64[3] = mul %9, %11
              %13:f64[3] = add %12, %6
              yield %13
            }
          }
          return %3
        }
    """, """
        func @f(%0:f64[3], %1:i64[3], %2:i64[2]) -> (f64[3]) {
          %3:f64[3] = gather %0, %1 {axis=0}
          %4:f64[] = reduce_sum %3 {axes=(0,)}
          %5:bool[] = gt %4, 0.0:f64[]
          check %5 {exc="ValueError", fmt="negative"}
          %6:f64[3] = for_loop 0:i64[], 4:i64[], 1:i64[], %0 {
            body(%7:i64[], %8:f64[3]) {
              %9:f64[3] = gather %8, %1 {axis=0}
              %10:f64[2] = gather %0, %2 {axis=0}
              %11:f64[] = reduce_sum %10 {axes=(0,)}
              %12:f64[3] = mul %9, %11
              %13:f64[3] = add %12, %3
              yield %13
            }
          }
          return %6
        }
    """, args)


def test_values_carried_unchanged_through_two_loops_are_read_where_they_came_from():
    """The second loop carries what the first passed through: both carries go, and the
    result reads the first loop's operand."""
    check_pass(licm, """
        func @f(%0:f64[], %1:i64[]) -> (f64[], f64[]) {
          %2:f64[], %3:f64[] = for_loop 0:i64[], %1, 1:i64[], %0, %0 {
            body(%4:i64[], %5:f64[], %6:f64[]) {
              %7:f64[] = mul %5, %6
              yield %7, %6
            }
          }
          %8:f64[], %9:f64[] = for_loop 0:i64[], %1, 1:i64[], %2, %3 {
            body(%10:i64[], %11:f64[], %12:f64[]) {
              %13:f64[] = add %11, %12
              yield %13, %12
            }
          }
          return %8, %9
        }
    """, """
        func @f(%0:f64[], %1:i64[]) -> (f64[], f64[]) {
          %2:f64[] = for_loop 0:i64[], %1, 1:i64[], %0 {
            body(%3:i64[], %4:f64[]) {
              %5:f64[] = mul %4, %0
              yield %5
            }
          }
          %6:f64[] = for_loop 0:i64[], %1, 1:i64[], %2 {
            body(%7:i64[], %8:f64[]) {
              %9:f64[] = add %8, %0
              yield %9
            }
          }
          return %6, %0
        }
    """, [np.float64(1.5), np.int64(3)])
