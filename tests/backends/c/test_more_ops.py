"""The C code of ``sort``, ``cholesky`` (and its adjoint), ``triangular_solve``, ``lu`` and
``conv`` against the interpreter.

Each test puts many cases (one op application each, with its own parameters) into one
function, so that one build covers them.  Sorts, pivots and integer results must be
identical; float results agree to 1e-12 (float64) or 1e-5 (float32), relative to the
largest magnitude of the result; NaNs must land where the interpreter puts them.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from ops.test_sort_ops import keys_sample

from pullback.backends import interp
from pullback.backends.c import compile_func
from pullback.backends.c.build import compiler
from pullback.ir.builder import Builder
from pullback.ir.core import Func, Lit
from pullback.ir.op import Op
from pullback.ir.types import type_of_value
from pullback.ops.conv import conv
from pullback.ops.linalg import cholesky, cholesky_adjoint, lu, triangular_solve
from pullback.ops.sort import sort

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}

Case = tuple[Op, list, dict[str, Any]]


def cases_func(cases: list[Case]) -> tuple[Func, list[np.ndarray], list[str]]:
    """A function applying each case's op to its own operands (``Lit`` operands stay
    literals, the others become parameters), returning every result; its arguments; a
    label per result."""
    args, labels = [], []
    with Builder() as b:
        outs = []
        for k, (op, operands, params) in enumerate(cases):
            ins = []
            for x in operands:
                if not isinstance(x, Lit):
                    args.append(x)
                ins.append(x if isinstance(x, Lit) else b.param(type_of_value(x)))
            results = b.emit(op, ins, params)
            labels += [f"case {k}: {op.name} {params} result {j}" for j in range(len(results))]
            outs += results
        func = b.finish("cases", outs)
    return func, args, labels


def assert_matches(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, where
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    rtol = RTOL[got.dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=where)


def check(cases: list[Case], exact: bool = False) -> None:
    """The compiled cases give the interpreter's results (bit for bit if ``exact``)."""
    func, args, labels = cases_func(cases)
    got = compile_func(func)(*args)
    want = interp.run(func, *args)
    for g, w, where in zip(got, want, labels, strict=True):
        if exact:
            np.testing.assert_array_equal(g, w, err_msg=where)
            assert g.dtype == w.dtype and (g.dtype.kind != "f" or np.array_equal(
                np.signbit(g), np.signbit(w))), where
        else:
            assert_matches(g, w, where)


def normal(shape, dt=np.float64, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dt)


# -- sort -----------------------------------------------------------------------------

SORT_DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]


def _sort_case(keys: list[np.ndarray], payloads: int, axis: int, descending: bool) -> Case:
    """A sort of ``keys`` carrying positions (to expose the permutation) and float
    payloads along."""
    shape = keys[0].shape
    positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    extra = [normal(shape, seed=k) for k in range(payloads)]
    return (sort, [*keys, positions, *extra],
            {"axis": axis, "num_keys": len(keys), "descending": descending})


def test_sort_one_key_every_dtype_axis_and_direction():
    cases = []
    for (k, dt), shape, desc in itertools.product(
            enumerate(SORT_DTYPES), [(37,), (5, 9), (3, 4, 6), (1, 1), (4, 1, 3)],
            [False, True]):
        for axis in range(len(shape)):
            cases.append(_sort_case([keys_sample(shape, dt, seed=k + axis)], 1, axis, desc))
    check(cases, exact=True)


def test_sort_several_keys_with_payloads():
    cases = []
    for (seed, dts), desc in itertools.product(enumerate(itertools.permutations(
            [np.bool_, np.int32, np.float64, np.float32], 3)), [False, True]):
        keys = [keys_sample((4, 25), dt, seed=seed + j) for j, dt in enumerate(dts)]
        cases.append(_sort_case(keys[:2], 2, 1, desc))
        cases.append(_sort_case(keys, 1, 0, desc))
    check(cases, exact=True)


def test_sort_long_lanes_and_empty_shapes():
    """Lengths around powers of two exercise the merge sort's runs; empty operands and
    empty lanes give empty results."""
    cases = [_sort_case([keys_sample((n,), np.float64, seed=n)], 0, 0, desc)
             for n in (2, 3, 7, 8, 9, 63, 64, 65, 1000) for desc in (False, True)]
    cases += [_sort_case([keys_sample((n,), np.int64, seed=n)], 0, 0, False)
              for n in (127, 128, 129)]
    cases += [_sort_case([keys_sample(shape, np.float32, seed=0)], 1, axis, False)
              for shape, axis in [((0,), 0), ((3, 0), 0), ((3, 0), 1), ((0, 4), 1)]]
    check(cases, exact=True)


def test_sort_of_a_literal():
    keys = Lit(np.array([3.0, np.nan, -1.0, 3.0, 0.0]))
    check([(sort, [keys, np.arange(5)], {"axis": 0, "num_keys": 1, "descending": True})],
          exact=True)


# -- cholesky ---------------------------------------------------------------------------


def spd(batch: tuple[int, ...], n: int, dt, seed: int = 0) -> np.ndarray:
    """Symmetric positive definite matrices, with junk above the diagonal (never read)."""
    g = normal((*batch, n, n), seed=seed)
    a = g @ np.swapaxes(g, -1, -2) + n * np.eye(n)
    junk = np.triu(normal((*batch, n, n), seed=seed + 1), 1)
    return (np.tril(a) + junk).astype(dt)


def test_cholesky():
    cases = [(cholesky, [spd(batch, n, dt, seed=n)], {})
             for dt in (np.float32, np.float64) for n in (0, 1, 2, 5, 8)
             for batch in ((), (3,), (2, 2), (0,))]
    check(cases)


def test_cholesky_adjoint():
    """The blocked reverse (blocks of 128 columns) against the interpreter's formula, on
    factors with junk above the diagonal: one block, a full one, one and a part."""
    cases = []
    for dt, n, batch in [(np.float64, 0, ()), (np.float64, 1, (2,)), (np.float32, 5, ()),
                         (np.float64, 128, ()), (np.float64, 150, (2,)),
                         (np.float32, 140, ()), (np.float64, 3, (0,))]:
        low = np.linalg.cholesky(spd(batch, n, np.float64, seed=n))
        junk = np.triu(normal(low.shape, seed=n + 2), 1)
        cases.append((cholesky_adjoint, [(low + junk).astype(dt),
                                         normal(low.shape, dt, seed=n + 3)], {}))
    check(cases)


def test_cholesky_nan_propagates():
    a = spd((2,), 4, np.float64)
    a[1, 2, 1] = np.nan
    check([(cholesky, [a], {}), (cholesky, [Lit(spd((), 3, np.float32))], {})])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("bad", ["negative", "singular", "one_of_a_batch"])
def test_cholesky_not_positive_definite(dt, bad):
    a = spd((3,), 4, dt)
    if bad == "negative":
        a[...] = -np.eye(4)
    elif bad == "singular":
        a[...] = np.tril(np.ones((4, 4)))
    else:
        a[2, 3, 3] = -100.0
    func, args, _ = cases_func([(cholesky, [a], {})])
    with pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite"):
        interp.run(func, *args)
    with pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite"):
        compile_func(func)(*args)


# -- triangular_solve ---------------------------------------------------------------------


def test_triangular_solve_every_flag_combination():
    """Junk in the triangle and diagonal a solve does not read must not matter."""
    cases = []
    flags = itertools.product([False, True], repeat=4)
    for k, (dt, (left, lower, trans, unit)) in enumerate(
            itertools.product((np.float32, np.float64), flags)):
        batch = [(), (2,), (2, 3)][k % 3]
        m, r = 5, [3, 1, 4][k % 3]
        a = normal((*batch, m, m), seed=k) + 4 * np.eye(m)
        a = a.astype(dt)
        b = normal((*batch, m, r) if left else (*batch, r, m), dt, seed=k + 100)
        params = {"left_side": left, "lower": lower, "transpose_a": trans,
                  "unit_diagonal": unit}
        cases.append((triangular_solve, [a, b], params))
    check(cases)


def test_triangular_solve_empty_and_singular():
    params = {"left_side": True, "lower": True, "transpose_a": False, "unit_diagonal": False}
    right = params | {"left_side": False, "transpose_a": True}
    singular = np.tril(normal((4, 4))) + 4 * np.eye(4)
    singular[3, 3] = 0.0
    cases = [
        (triangular_solve, [normal((0, 0)), normal((0, 3))], params),
        (triangular_solve, [normal((3, 3)), normal((3, 0))], params),
        (triangular_solve, [normal((0, 2, 2)), normal((0, 2, 2))], right),
        (triangular_solve, [normal((2, 2)), normal((0, 2))], right),
        (triangular_solve, [singular, normal((4, 2))], params),
    ]
    check(cases)


# -- lu -------------------------------------------------------------------------------------


def test_lu_pivots_as_the_reference():
    """Random, singular (a zero pivot), rank one, tied magnitudes (the first wins): the
    same pivots and permutations, the same factors."""
    cases = []
    for dt in (np.float32, np.float64):
        for k, (batch, n) in enumerate(itertools.product([(), (3,), (2, 2)], [1, 2, 4, 7])):
            cases.append((lu, [normal((*batch, n, n), dt, seed=k)], {}))
        ties = np.array([[1, -1, 1, 1], [-1, 1, 1, -1], [1, 1, -1, 1], [1, -1, -1, -1]], dt)
        singular = normal((4, 4), dt)
        singular[:, 1] = 0
        cases += [(lu, [a], {}) for a in (
            ties, singular, np.ones((3, 3), dt), np.zeros((3, 3), dt),
            np.zeros((0, 0), dt), np.zeros((2, 0, 0), dt), np.zeros((0, 3, 3), dt))]
    cases.append((lu, [Lit(np.array([[0.0, 2.0], [1.0, 3.0]]))], {}))
    check(cases)


def test_lu_of_nan_entries_has_nan_factors():
    """LAPACK's pivot search (getrf's) may pass over a NaN where the reference takes it
    first: the factors differ, but each matrix with a NaN has NaNs in its U."""
    nan = normal((2, 5, 5), np.float64)
    nan[0, 3, 0] = np.nan
    nan[1, 2, 3] = np.nan
    func, args, _ = cases_func([(lu, [nan], {})])
    for packed in (compile_func(func)(*args)[0], interp.run(func, *args)[0]):
        assert np.isnan(np.triu(packed)).any(axis=(1, 2)).all()


# -- conv ---------------------------------------------------------------------------------


def _conv_case(lhs_shape, rhs_shape, dt, seed, strides=None, padding=None,
               lhs_dilation=None, rhs_dilation=None) -> Case:
    nsp = len(lhs_shape) - 2
    lhs = keys_sample(lhs_shape, dt, seed) if dt in (np.bool_, np.int32) else \
        normal(lhs_shape, dt, seed)
    rhs = keys_sample(rhs_shape, dt, seed + 1) if dt in (np.bool_, np.int32) else \
        normal(rhs_shape, dt, seed + 1)
    return (conv, [lhs, rhs], {"strides": strides or (1,) * nsp,
                               "padding": padding or ((0, 0),) * nsp,
                               "lhs_dilation": lhs_dilation or (1,) * nsp,
                               "rhs_dilation": rhs_dilation or (1,) * nsp})


def test_conv_one_spatial_dim():
    cases = []
    params = itertools.product([1, 2, 3], [(0, 0), (2, 1), (-1, 2), (-2, -1), (7, 6)],
                               [1, 2], [1, 3])
    for k, (stride, pad, ld, rd) in enumerate(params):
        dt = [np.float64, np.float32, np.int32, np.bool_][k % 4]
        cases.append(_conv_case((2, 3, 9), (4, 3, 3), dt, k, (stride,), (pad,), (ld,), (rd,)))
    check(cases)


def test_conv_two_and_three_spatial_dims():
    cases = [
        _conv_case((2, 3, 8, 7), (4, 3, 3, 2), np.float64, 0),
        _conv_case((1, 2, 9, 6), (3, 2, 2, 3), np.float32, 1, (2, 1), ((1, 2), (-1, 0)),
                   (1, 2), (2, 1)),
        _conv_case((2, 1, 5, 5), (2, 1, 5, 5), np.float64, 2, (1, 1), ((4, 4), (4, 4))),
        _conv_case((1, 2, 5, 4, 6), (2, 2, 2, 3, 2), np.float64, 3, (1, 2, 1),
                   ((0, 1), (2, -1), (1, 1)), (2, 1, 1), (1, 1, 2)),
        _conv_case((2, 2, 4, 4, 4), (3, 2, 1, 2, 3), np.float32, 4, (2, 2, 2)),
        _conv_case((1, 1, 3, 3, 3), (1, 1, 3, 3, 3), np.int32, 5, (1, 1, 1),
                   ((1, 1), (0, 2), (2, 0)), (1, 2, 1), (1, 1, 1)),
    ]
    check(cases)


def test_large_convs_are_window_matrices_times_kernels():
    """Convs with enough work are one product of a window matrix (zeros on padding and
    between dilated elements) and the kernel: strides, negative and positive padding,
    both dilations, 1-3 spatial dims, a window larger than the output (the conv of a
    kernel's gradient)."""
    cases = [
        _conv_case((4, 8, 20), (16, 8, 5), np.float64, 0, (2,), ((2, -1),), (2,), (1,)),
        _conv_case((6, 8, 9, 9), (16, 8, 3, 3), np.float32, 1, (1, 1), ((1, 1), (1, 1))),
        _conv_case((3, 6, 10, 7), (12, 6, 3, 2), np.float64, 2, (2, 1), ((0, 1), (2, -1)),
                   (1, 2), (2, 1)),
        _conv_case((16, 4, 9, 9), (12, 4, 8, 8), np.float64, 3, (1, 1), ((1, 0), (0, 1))),
        _conv_case((2, 4, 6, 5, 6), (8, 4, 3, 2, 3), np.float32, 4, (1, 2, 1),
                   ((1, 1), (0, 1), (-1, 2)), (1, 1, 2), (2, 1, 1)),
    ]
    func, _, _ = cases_func(cases)
    assert compile_func(func).source.count("gemm") >= len(cases)
    check(cases)


def test_conv_empty_sizes():
    """Empty batches, channels, output channels, inputs and results."""
    cases = [
        _conv_case((0, 3, 5), (2, 3, 2), np.float64, 0),
        _conv_case((2, 3, 5), (0, 3, 2), np.float64, 1),
        _conv_case((2, 0, 5), (3, 0, 2), np.float64, 2),
        _conv_case((2, 3, 0), (2, 3, 2), np.float64, 3),
        _conv_case((2, 3, 0), (2, 3, 2), np.float64, 4, padding=((2, 1),)),
        _conv_case((2, 3, 4), (2, 3, 6), np.float32, 5),
        _conv_case((1, 2, 6, 0), (2, 2, 2, 1), np.float64, 6),
        _conv_case((2, 3, 5), (2, 3, 2), np.float64, 7, padding=((-2, -2),)),
    ]
    check(cases)


def test_a_select_reading_memory_in_an_unrolled_nest():
    """gcc 12's vectoriser read ``c ? x[i] : 0`` in a fully unrolled 8x8 nest as masked
    loads with the first eight lanes' mask for all 64 (the weight gradient of a conv of a
    ReLU was 60% off): selects are branch-free blends of both operands."""
    import pullback as pb

    def loss(w, h, r):
        return np.sum(pb.nn.functional.conv(np.where(h > 0, h, 0), w, padding=1) * r)

    rng = np.random.default_rng(0)
    h, r = (rng.random((1, 1, 8, 8)).astype(np.float32) - 0.5 for _ in range(2))
    w = rng.random((1, 1, 3, 3)).astype(np.float32) - 0.5
    got = pb.jit(pb.grad(loss), backend="c")(w, h, r)
    want = pb.jit(pb.grad(loss), backend="interp")(w, h, r)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
