"""Common subexpression elimination: repeats reuse the first computation (commutative
operands in either order), scoped like the IR; effects, stacks, closed blocks and calls
of functions with effects are never merged."""

from pullback.passes.cse import cse

from .passcheck import check_pass


def test_repeats_are_merged_where_they_are_visible():
    """Literals are compared by value and type (2.0 and a weak 2.0 differ); a value
    computed outside a block is reused inside it, not in a sibling or after it."""
    check_pass(cse, """
        func @f(%0:f64[3], %1:f64[3], %2:bool[], %3:i64[]) -> (f64[3], f64[3], f64[3], f64[3]) {
          %4:f64[3] = add %0, %1   # m.py:1:0
          %5:f64[3] = add %1, %0   # m.py:2:0
          %6:f64[3] = sub %0, %1
          %7:f64[3] = sub %1, %0
          %8:f64[3] = mul %0, 2.0:f64[]
          %9:f64[3] = mul 2.0:f64[], %0
          %10:f64[3] = mul %0, 2.0:~f64[]
          %11:f64[3] = broadcast_in_dim 1.0:f64[] {shape=(3,), dims=()}
          %12:f64[3] = broadcast_in_dim 1.0:f64[] {shape=(3,), dims=()}
          %13:f64[3] = add %4, %5
          %14:f64[3] = add %5, %4
          %15:f64[3] = cond %2, %0 {
            then(%16:f64[3]) {
              %17:f64[3] = add %0, %1
              %18:f64[3] = exp %17
              %19:f64[3] = exp %17
              %20:f64[3] = add %18, %19
              yield %20
            }
            orelse(%21:f64[3]) {
              %22:f64[3] = exp %4
              yield %22
            }
          }
          %23:f64[3] = exp %4
          %24:i64[] = random_bits %3 {shape=()}
          %25:i64[] = random_bits %3 {shape=()}
          %26:i64[] = add %24, %25
          %27:f64[3] = convert %0 {dtype=f64, weak=False}
          %28:f64[3] = sin %27
          %29:f64[3] = sin %0
          return %14, %7, %9, %10
        }
    """, """
        func @f(%0:f64[3], %1:f64[3], %2:bool[], %3:i64[]) -> (f64[3], f64[3], f64[3], f64[3]) {
          %4:f64[3] = add %0, %1   # m.py:1:0
          %5:f64[3] = sub %0, %1
          %6:f64[3] = sub %1, %0
          %7:f64[3] = mul %0, 2.0:f64[]
          %8:f64[3] = mul %0, 2.0:~f64[]
          %9:f64[3] = broadcast_in_dim 1.0:f64[] {shape=(3,), dims=()}
          %10:f64[3] = add %4, %4
          %11:f64[3] = cond %2, %0 {
            then(%12:f64[3]) {
              %13:f64[3] = exp %4
              %14:f64[3] = add %13, %13
              yield %14
            }
            orelse(%15:f64[3]) {
              %16:f64[3] = exp %4
              yield %16
            }
          }
          %17:f64[3] = exp %4
          %18:i64[] = random_bits %3 {shape=()}
          %19:i64[] = add %18, %18
          %20:f64[3] = convert %0 {dtype=f64, weak=False}
          %21:f64[3] = sin %20
          %22:f64[3] = sin %0
          return %10, %6, %7, %8
        }
    """)


def test_what_is_never_merged():
    """Checks, stacks, the closed blocks of ``checkpoint`` and calls of a function that
    prints stay as they are; loop blocks reuse outer values; calls of a pure function
    merge."""
    check_pass(cse, """
        func @f(%0:f64[], %1:bool[]) -> (f64[], f64[], f64[], f64[], f64[], f64[]) {
          %2:f64[] = exp %0
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          %3:stack = stack_new
          %4:stack = stack_new
          %5:stack = stack_push %3, %0
          %6:stack = stack_push %4, %0
          %7:f64[] = checkpoint %0 {
            body(%8:f64[]) {
              %9:f64[] = exp %8
              yield %9
            }
          }
          %10:f64[] = checkpoint %0 {
            body(%11:f64[]) {
              %12:f64[] = exp %11
              yield %12
            }
          }
          %13:f64[], %14:stack = while_loop %0, %5 {
            cond(%15:f64[], %16:stack) {
              %17:f64[] = exp %0
              %18:bool[] = lt %15, %17
              yield %18
            }
            body(%19:f64[], %20:stack) {
              %21:f64[] = exp %0
              %22:f64[] = add %19, %21
              %23:f64[] = mul %22, 2.0:f64[]
              yield %23, %20
            }
          }
          %24:f64[] = add %13, %2
          %25:f64[] = call %0 {callee=@pure}
          %26:f64[] = call %0 {callee=@pure}
          %27:f64[] = call %0 {callee=@noisy}
          %28:f64[] = call %0 {callee=@noisy}
          return %7, %10, %24, %25, %26, %28
        }

        func @pure(%0:f64[]) -> (f64[]) {
          %1:f64[] = exp %0
          %2:f64[] = exp %0
          %3:f64[] = add %1, %2
          return %3
        }

        func @noisy(%0:f64[]) -> (f64[]) {
          debug_print %0 {fmt="{} "}
          return %0
        }
    """, """
        func @f(%0:f64[], %1:bool[]) -> (f64[], f64[], f64[], f64[], f64[], f64[]) {
          %2:f64[] = exp %0
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          check %1, %0 {exc="ValueError", fmt="bad {}"}
          %3:stack = stack_new
          %4:stack = stack_new
          %5:stack = stack_push %3, %0
          %6:stack = stack_push %4, %0
          %7:f64[] = checkpoint %0 {
            body(%8:f64[]) {
              %9:f64[] = exp %8
              yield %9
            }
          }
          %10:f64[] = checkpoint %0 {
            body(%11:f64[]) {
              %12:f64[] = exp %11
              yield %12
            }
          }
          %13:f64[], %14:stack = while_loop %0, %5 {
            cond(%15:f64[], %16:stack) {
              %17:bool[] = lt %15, %2
              yield %17
            }
            body(%18:f64[], %19:stack) {
              %20:f64[] = add %18, %2
              %21:f64[] = mul %20, 2.0:f64[]
              yield %21, %19
            }
          }
          %22:f64[] = add %13, %2
          %23:f64[] = call %0 {callee=@pure}
          %24:f64[] = call %0 {callee=@noisy}
          %25:f64[] = call %0 {callee=@noisy}
          return %7, %10, %22, %23, %23, %25
        }

        func @pure(%0:f64[]) -> (f64[]) {
          %1:f64[] = exp %0
          %2:f64[] = add %1, %1
          return %2
        }

        func @noisy(%0:f64[]) -> (f64[]) {
          debug_print %0 {fmt="{} "}
          return %0
        }
    """, args=[1.5, True])
