"""Dead code elimination: unread pure equations go, in nested blocks too; effects stay,
also when they are reached through blocks or calls; signatures stay, but for a loop's
carried arrays that nothing reads."""

import numpy as np

from pullback.passes.dce import dce

from .passcheck import check_pass, golden


def test_unread_equations_go_and_effects_stay():
    check_pass(dce, """
        func @f(%0:f64[3], %1:bool[]) -> (f64[3]) {
          %2:f64[3] = exp %0   # m.py:1:0
          %3:f64[3] = sin %0   # m.py:2:0
          %4:f64[3] = mul %3, %3
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          %5:f64[3], %6:f64[3] = cond %1, %0 {
            then(%7:f64[3]) {
              %8:f64[3] = cos %7
              %9:f64[3] = tanh %7
              yield %7, %9
            }
            orelse(%10:f64[3]) {
              %11:f64[3] = neg %10
              yield %11, %2
            }
          }
          %12:f64[3] = cond %1, %0 {
            then(%13:f64[3]) {
              debug_print %13 {fmt="{}"}
              yield %13
            }
            orelse(%14:f64[3]) {
              yield %14
            }
          }
          return %5
        }
    """, """
        func @f(%0:f64[3], %1:bool[]) -> (f64[3]) {
          %2:f64[3] = exp %0   # m.py:1:0
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          %3:f64[3], %4:f64[3] = cond %1, %0 {
            then(%5:f64[3]) {
              %6:f64[3] = tanh %5
              yield %5, %6
            }
            orelse(%7:f64[3]) {
              %8:f64[3] = neg %7
              yield %8, %2
            }
          }
          %9:f64[3] = cond %1, %0 {
            then(%10:f64[3]) {
              debug_print %10 {fmt="{}"}
              yield %10
            }
            orelse(%11:f64[3]) {
              yield %11
            }
          }
          return %3
        }
    """)


def test_stacks_loops_and_calls():
    """A pop stays while its stack is read (its value is not); a loop keeps its carried
    values; a call of a function with no effects goes when unread, one whose callees
    print stays (through recursion)."""
    check_pass(dce, """
        func @f(%0:f64[], %1:i64[]) -> (f64[], f64[]) {
          %2:stack = stack_new
          %3:stack = stack_push %2, %0
          %4:stack = stack_new
          %5:stack = stack_push %4, %0
          %6:stack, %7:f64[] = stack_pop %5 {elem=f64[]}
          %8:f64[], %9:stack, %10:f64[] = for_loop 0:i64[], %1, 1:i64[], %0, %3, 0.0:f64[] {
            body(%11:i64[], %12:f64[], %13:stack, %14:f64[]) {
              %15:f64[] = sin %12
              %16:f64[] = cos %12
              %17:stack = stack_push %13, %16
              %18:stack, %19:f64[] = stack_pop %17 {elem=f64[]}
              %20:f64[] = exp %19
              yield %15, %18, %14
            }
          }
          %21:f64[] = call %1 {callee=@pure}
          %22:f64[] = call %1 {callee=@printing}
          return %8, %10
        }

        func @pure(%0:i64[]) -> (f64[]) {
          %1:bool[] = gt %0, 0:i64[]
          %2:f64[] = cond %1, %0 {
            then(%3:i64[]) {
              %4:i64[] = sub %3, 1:i64[]
              %5:f64[] = call %4 {callee=@pure}
              yield %5
            }
            orelse(%6:i64[]) {
              yield 1.0:f64[]
            }
          }
          return %2
        }

        func @printing(%0:i64[]) -> (f64[]) {
          %1:bool[] = gt %0, 0:i64[]
          %2:f64[] = cond %1, %0 {
            then(%3:i64[]) {
              %4:i64[] = sub %3, 1:i64[]
              %5:f64[] = call %4 {callee=@helper}
              yield %5
            }
            orelse(%6:i64[]) {
              debug_print %6 {fmt="{} "}
              yield 1.0:f64[]
            }
          }
          return %2
        }

        func @helper(%0:i64[]) -> (f64[]) {
          %1:i64[] = mul %0, %0
          %2:f64[] = call %0 {callee=@printing}
          return %2
        }
    """, """
        func @f(%0:f64[], %1:i64[]) -> (f64[], f64[]) {
          %2:stack = stack_new
          %3:stack = stack_push %2, %0
          %4:f64[], %5:stack, %6:f64[] = for_loop 0:i64[], %1, 1:i64[], %0, %3, 0.0:f64[] {
            body(%7:i64[], %8:f64[], %9:stack, %10:f64[]) {
              %11:f64[] = sin %8
              %12:f64[] = cos %8
              %13:stack = stack_push %9, %12
              %14:stack, %15:f64[] = stack_pop %13 {elem=f64[]}
              yield %11, %14, %10
            }
          }
          %16:f64[] = call %1 {callee=@printing}
          return %4, %6
        }

        func @printing(%0:i64[]) -> (f64[]) {
          %1:bool[] = gt %0, 0:i64[]
          %2:f64[] = cond %1, %0 {
            then(%3:i64[]) {
              %4:i64[] = sub %3, 1:i64[]
              %5:f64[] = call %4 {callee=@helper}
              yield %5
            }
            orelse(%6:i64[]) {
              debug_print %6 {fmt="{} "}
              yield 1.0:f64[]
            }
          }
          return %2
        }

        func @helper(%0:i64[]) -> (f64[]) {
          %1:f64[] = call %0 {callee=@printing}
          return %1
        }
    """)


def test_a_loops_carried_arrays_that_nothing_reads_go():
    """Python keeps a loop's temporaries after it, so they are carried: one that neither
    the loop (but to carry it on) nor the code after it reads goes, with what computed
    it; one read after the loop, one the body or (in a while loop) the test reads stay."""
    check_pass(dce, """
        func @f(%0:f64[3], %1:i64[], %2:f64[]) -> (f64[], f64[3]) {
          %3:f64[], %4:f64[], %5:f64[], %6:f64[] = for_loop 0:i64[], %1, 1:i64[], %2, %2, %2, %2 {
            body(%7:i64[], %8:f64[], %9:f64[], %10:f64[], %11:f64[]) {
              %12:f64[] = sin %11
              %13:f64[] = cos %12
              %14:f64[] = add %12, %10
              yield %13, %9, %14, %12
            }
          }
          %15:f64[3], %16:f64[3], %17:bool[] = while_loop %0, %0, True:bool[] {
            cond(%18:f64[3], %19:f64[3], %20:bool[]) {
              %21:f64[] = reduce_sum %19 {axes=(0,)}
              %22:bool[] = lt %21, 10.0:f64[]
              %23:bool[] = and %22, %20
              yield %23
            }
            body(%24:f64[3], %25:f64[3], %26:bool[]) {
              %27:f64[3] = exp %25
              %28:f64[3] = add %25, 1.0:f64[]
              %29:f64[] = reduce_sum %27 {axes=(0,)}
              %30:bool[] = lt %29, 100.0:f64[]
              yield %27, %28, %30
            }
          }
          return %5, %16
        }
    """, """
        func @f(%0:f64[3], %1:i64[], %2:f64[]) -> (f64[], f64[3]) {
          %3:f64[], %4:f64[] = for_loop 0:i64[], %1, 1:i64[], %2, %2 {
            body(%5:i64[], %6:f64[], %7:f64[]) {
              %8:f64[] = sin %7
              %9:f64[] = add %8, %6
              yield %9, %8
            }
          }
          %10:f64[3], %11:bool[] = while_loop %0, True:bool[] {
            cond(%12:f64[3], %13:bool[]) {
              %14:f64[] = reduce_sum %12 {axes=(0,)}
              %15:bool[] = lt %14, 10.0:f64[]
              %16:bool[] = and %15, %13
              yield %16
            }
            body(%17:f64[3], %18:bool[]) {
              %19:f64[3] = exp %17
              %20:f64[3] = add %17, 1.0:f64[]
              %21:f64[] = reduce_sum %19 {axes=(0,)}
              %22:bool[] = lt %21, 100.0:f64[]
              yield %20, %22
            }
          }
          return %3, %10
        }
    """)


def test_a_loop_result_equal_to_another_is_read_through_it():
    """``new = u.copy(); ...; u = new`` carries ``new`` and ``u``, yielded the same value:
    once the body has run (literal bounds, one iteration or more) their results are
    equal, so the code after the loop reads the carry the body reads and the other goes.
    With bounds that may give no iteration (a run-time bound, or 3 to 3), the results
    may differ (the carries' first values) and both stay."""
    loop = """
          %3:f64[3], %4:f64[3] = for_loop LO, HI, 1:i64[], %2, %0 {
            body(%5:i64[], %6:f64[3], %7:f64[3]) {
              %8:f64[3] = sin %7
              yield %8, %8
            }
          }"""
    source = """
        func @f(%0:f64[3], %1:i64[]) -> (f64[]) {
          %2:f64[3] = broadcast_in_dim 0.0:f64[] {shape=(3,), dims=()}""" + loop + """
          %9:f64[3] = mul %3, %3
          %10:f64[] = reduce_sum %9 {axes=(0,)}
          return %10
        }
    """
    check_pass(dce, source.replace("LO", "0:i64[]").replace("HI", "4:i64[]"), """
        func @f(%0:f64[3], %1:i64[]) -> (f64[]) {
          %2:f64[3] = for_loop 0:i64[], 4:i64[], 1:i64[], %0 {
            body(%3:i64[], %4:f64[3]) {
              %5:f64[3] = sin %4
              yield %5
            }
          }
          %6:f64[3] = mul %2, %2
          %7:f64[] = reduce_sum %6 {axes=(0,)}
          return %7
        }
    """)
    for lo, hi in (("0:i64[]", "%1"), ("3:i64[]", "3:i64[]")):
        kept = golden(source.replace("LO", lo).replace("HI", hi))
        check_pass(dce, kept, kept, args=[np.array([0.1, 0.2, 0.3]), np.int64(0)])
