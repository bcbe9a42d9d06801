"""Algebraic simplification: identities exact in IEEE arithmetic, and nothing else."""

import numpy as np

from pullback.passes.simplify import simplify

from .passcheck import check_pass


def test_neutral_elements_double_negation_and_same_type_converts():
    """Replaced equations go; what they read stays for DCE to judge."""
    check_pass(simplify, """
        func @f(%0:f64[3], %1:i64[3]) -> (f64[3], i64[3]) {
          %2:f64[3] = broadcast_in_dim 1.0:f64[] {shape=(3,), dims=()}
          %3:f64[3] = mul %2, %0   # m.py:1:0
          %4:f64[3] = mul %3, 1.0:~f64[]
          %5:f64[3] = div %4, [1.0, 1.0, 1.0]:f64[3]
          %6:f64[3] = broadcast_in_dim -0.0:f64[] {shape=(3,), dims=()}
          %7:f64[3] = add %6, %5
          %8:f64[3] = sub %7, 0.0:f64[]
          %9:f64[3] = neg %8
          %10:f64[3] = neg %9
          %11:i64[3] = add %1, 0:i64[]
          %12:f64[3] = convert %10 {dtype=f64, weak=False}
          %13:f64[3] = pow %12, 1.0:f64[]
          %14:i64[3] = pow %11, 1:i64[]
          return %13, %14
        }
    """, """
        func @f(%0:f64[3], %1:i64[3]) -> (f64[3], i64[3]) {
          %2:f64[3] = broadcast_in_dim 1.0:f64[] {shape=(3,), dims=()}
          %3:f64[3] = broadcast_in_dim -0.0:f64[] {shape=(3,), dims=()}
          %4:f64[3] = neg %0
          return %0, %1
        }
    """)


def test_what_is_not_an_identity_stays():
    """``-0.0 + 0.0`` is ``0.0``, ``-0.0 - -0.0`` is ``0.0``, ``inf * 0`` is NaN; a
    weak operand is not of its strong result's type, nor a scalar of a broadcast one."""
    source = """
        func @f(%0:f64[3], %1:~f64[], %2:f64[]) -> (f64[3], f64[3], f64[3], f64[], f64[], f64[3]) {
          %3:f64[3] = add %0, 0.0:f64[]
          %4:f64[3] = sub %0, -0.0:f64[]
          %5:f64[3] = mul %0, 0.0:f64[]
          %6:f64[] = mul %1, 1.0:f64[]
          %7:f64[] = convert %1 {dtype=f64, weak=False}
          %8:f64[3] = broadcast_in_dim 1.0:f64[] {shape=(3,), dims=()}
          %9:f64[3] = mul %2, %8
          return %3, %4, %5, %6, %7, %9
        }
    """
    args = [np.array([-0.0, np.inf, 1.5]), np.float64(2.0), np.float64(-0.0)]
    check_pass(simplify, source, source, args)


def test_chains_of_data_movement_collapse():
    """A broadcast of a broadcast (or of a reshape adding a unit axis), a transpose of a
    transpose and a reshape of a reshape read the innermost operand."""
    check_pass(simplify, """
        func @f(%0:f64[2,3], %1:f64[3], %2:f64[2]) -> (f64[4,2,3], f64[3,2], f64[6], f64[2,3]) {
          %3:f64[2,3] = broadcast_in_dim %1 {shape=(2, 3), dims=(1,)}
          %4:f64[4,2,3] = broadcast_in_dim %3 {shape=(4, 2, 3), dims=(1, 2)}
          %5:f64[3,2] = transpose %0 {perm=(1, 0)}
          %6:f64[2,3] = transpose %5 {perm=(1, 0)}
          %7:f64[3,2] = transpose %6 {perm=(1, 0)}
          %8:f64[6] = reshape %0 {shape=(6,)}
          %9:f64[3,2] = reshape %8 {shape=(3, 2)}
          %10:f64[2,3] = reshape %9 {shape=(2, 3)}
          %11:f64[6] = reshape %10 {shape=(6,)}
          %12:f64[2,1] = reshape %2 {shape=(2, 1)}
          %13:f64[2,3] = broadcast_in_dim %12 {shape=(2, 3), dims=(0, 1)}
          return %4, %7, %11, %13
        }
    """, """
        func @f(%0:f64[2,3], %1:f64[3], %2:f64[2]) -> (f64[4,2,3], f64[3,2], f64[6], f64[2,3]) {
          %3:f64[2,3] = broadcast_in_dim %1 {shape=(2, 3), dims=(1,)}
          %4:f64[4,2,3] = broadcast_in_dim %1 {shape=(4, 2, 3), dims=(2,)}
          %5:f64[3,2] = transpose %0 {perm=(1, 0)}
          %6:f64[3,2] = transpose %0 {perm=(1, 0)}
          %7:f64[6] = reshape %0 {shape=(6,)}
          %8:f64[3,2] = reshape %0 {shape=(3, 2)}
          %9:f64[6] = reshape %0 {shape=(6,)}
          %10:f64[2,1] = reshape %2 {shape=(2, 1)}
          %11:f64[2,3] = broadcast_in_dim %2 {shape=(2, 3), dims=(0,)}
          return %4, %6, %9, %11
        }
    """)


def test_ops_that_change_nothing_and_decided_selects():
    """A select with a literal (or broadcast literal) predicate, or one value on both
    sides, is that value, unless the value is a scalar the select broadcasts."""
    check_pass(simplify, """
        func @f(%0:f64[2,3], %1:f64[], %2:bool[2,3]) -> (f64[2,3], f64[2,3], f64[2,3], f64[2,3]) {
          %3:f64[2,3] = reshape %0 {shape=(2, 3)}
          %4:f64[2,3] = transpose %3 {perm=(0, 1)}
          %5:f64[2,3] = broadcast_in_dim %4 {shape=(2, 3), dims=(0, 1)}
          %6:f64[2,3] = reduce_sum %5 {axes=()}
          %7:f64[2,3] = broadcast_in_dim %1 {shape=(2, 3), dims=()}
          %8:f64[2,3] = select True:bool[], %6, %7
          %9:bool[2,3] = broadcast_in_dim False:bool[] {shape=(2, 3), dims=()}
          %10:f64[2,3] = select %9, %0, %7
          %11:f64[2,3] = select True:bool[], %1, %0
          %12:f64[2,3] = select %2, %11, %11
          return %8, %10, %11, %12
        }
    """, """
        func @f(%0:f64[2,3], %1:f64[], %2:bool[2,3]) -> (f64[2,3], f64[2,3], f64[2,3], f64[2,3]) {
          %3:f64[2,3] = broadcast_in_dim %1 {shape=(2, 3), dims=()}
          %4:bool[2,3] = broadcast_in_dim False:bool[] {shape=(2, 3), dims=()}
          %5:f64[2,3] = select True:bool[], %1, %0
          return %0, %3, %5, %5
        }
    """)
