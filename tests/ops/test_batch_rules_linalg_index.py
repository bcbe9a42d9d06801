"""Batching rules of the index, linear-algebra, conv and sort ops, beyond the cases that
``test_batch_rules`` generates: indices that differ per lane, repeat within a lane and
coincide across lanes; windows clamped differently per lane on several axes; and the
shape of what the rules emit (one product, one solve, one conv: never a loop over the
lanes), down to the C backend's GEMM for a batched ``x @ W``.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends import interp
from pullback.backends.c.plan.fusion import as_gemm, eqn_axes
from pullback.ir.builder import Builder
from pullback.ir.core import Func
from pullback.ir.op import OPS
from pullback.ir.types import type_of_value
from pullback.ir.verify import verify
from tests.ops.test_batch_rules import SIZE, check_lanes

_RNG = np.random.default_rng(5)


def batched(name: str, lanes: list[list], dims: list, **params) -> Func:
    """The rule of ``name`` applied to operands whose lanes are ``lanes[k]``, stacked at
    ``dims`` (None: lane 0's value for all), checked lane by lane against the op's
    NumPy rule; returns the rule's IR."""
    arrays = [lanes[0][i] if d is None else np.stack([ln[i] for ln in lanes], axis=d)
              for i, d in enumerate(dims)]
    with Builder() as b:
        outs, out_dims = OPS[name].batch([b.param(type_of_value(x)) for x in arrays], dims,
                                         SIZE, **params)
        func = b.finish(f"{name}_batched", outs)
    verify(func)
    op = OPS[name]
    want = [op.impl(*[ln[i] if d is not None else lanes[0][i] for i, d in enumerate(dims)],
                    **params) for ln in lanes]
    want = [w if op.multiple_results else [w] for w in want]
    check_lanes(interp.run(func, *arrays), out_dims, want, f"{name} batched at {dims}")
    return func


def op_names(func: Func) -> list[str]:
    return [e.op.name for e in func.block.eqns]


def dims_for(nds: list[int]) -> list[list]:
    """Every way to batch operands of these ranks, each at any axis or not at all (at
    least one batched)."""
    choices = [[None, *range(nd + 1)] for nd in nds]
    return [list(c) for c in itertools.product(*choices) if any(d is not None for d in c)]


# -- gather, scatter, scatter_add: indices per lane -------------------------------------


def index_lanes(shape, count, axis):
    """Per lane: data, indices (repeating within the lane, lane 0's also lane 1's) and
    updates for ``count`` indices [2, count // 2] into axis ``axis`` of ``shape``."""
    idx = [_RNG.integers(0, shape[axis], (2, count // 2)) for _ in range(SIZE)]
    idx[0][0, 0] = idx[0][1, 0]
    idx[1] = idx[0].copy()
    upd_shape = shape[:axis] + (2, count // 2) + shape[axis + 1:]
    return [[_RNG.standard_normal(shape), i, _RNG.standard_normal(upd_shape)] for i in idx]


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dims", dims_for([2, 2]))
def test_gather_per_lane_indices(axis, dims):
    batched("gather", [ln[:2] for ln in index_lanes((4, 5), 6, axis)], dims, axis=axis)


@pytest.mark.parametrize("name", ["scatter", "scatter_add"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dims", dims_for([2, 2, 3]))
def test_scatter_per_lane_indices(name, axis, dims):
    """A repeated index: the last update wins (scatter) or all add up (scatter_add)
    within its own lane, however the lanes' indices coincide."""
    batched(name, index_lanes((4, 5), 6, axis), dims, axis=axis)


@pytest.mark.parametrize("dims", [[0, None], [None, 0], [2, 1]])
def test_gather_of_unbatched_data_is_one_gather(dims):
    """Only data with batched indices needs its lanes laid end to end."""
    func = batched("gather", [ln[:2] for ln in index_lanes((4, 5), 6, 1)], dims, axis=1)
    assert op_names(func).count("gather") == 1
    assert ("reshape" in op_names(func)) == (None not in dims)


# -- dynamic_slice, dynamic_update_slice: windows per lane ------------------------------

#: Per lane, starts into [5, 6, 4]: inside, clamped from below, clamped from above.
STARTS = [(1, -3, 2), (4, 2, 0), (9, 5, -1)]


@pytest.mark.parametrize("dims", dims_for([3, 0, 0, 0]))
def test_dynamic_slice_per_lane_starts(dims):
    lanes = [[_RNG.standard_normal((5, 6, 4)), *map(np.int32, s)] for s in STARTS]
    func = batched("dynamic_slice", lanes, dims, sizes=(2, 3, 4))
    assert "for_loop" not in op_names(func)


@pytest.mark.parametrize("dims", dims_for([3, 3, 0, 0, 0]))
def test_dynamic_update_slice_per_lane_starts(dims):
    """With a batched start and a window on an unbatched one's axis, the window is cut
    out, written per lane and put back."""
    lanes = [[_RNG.standard_normal((5, 6, 4)), _RNG.standard_normal((2, 3, 2)),
              *map(np.int64, s)] for s in STARTS]
    func = batched("dynamic_update_slice", lanes, dims)
    assert "for_loop" not in op_names(func)


# -- dot_general: one product, laid out for one GEMM ------------------------------------

#: (lhs, rhs, contract, batch) lane shapes: x @ W, a batched matmul, a vector dotted,
#: a contraction over the lhs's leading axis.
PRODUCTS = [
    ((3, 4), (4, 5), ((1,), (0,)), ((), ())),
    ((2, 3, 4), (2, 4, 5), ((2,), (1,)), ((0,), (0,))),
    ((4,), (4, 5), ((0,), (0,)), ((), ())),
    ((3, 4), (4,), ((1,), (0,)), ((), ())),
    ((4, 3), (4, 5), ((0,), (0,)), ((), ())),
]


def gemm_of(func: Func):
    """The one ``dot_general`` of ``func`` as the C backend's GEMM reads it, or None."""
    (dot,) = [e for e in func.block.eqns if e.op.name == "dot_general"]
    return as_gemm(*(x.type for x in dot.inputs), eqn_axes(dot))


@pytest.mark.parametrize("lhs,rhs,contract,batch", PRODUCTS)
def test_dot_general_is_one_gemm(lhs, rhs, contract, batch):
    """Wherever the lanes are, the rule emits one product that a GEMM computes (the
    lane axes transposed into place where they break its layout)."""
    lanes = [[_RNG.standard_normal(lhs), _RNG.standard_normal(rhs)] for _ in range(SIZE)]
    for dims in dims_for([len(lhs), len(rhs)]):
        func = batched("dot_general", lanes, dims, contract=contract, batch=batch)
        assert set(op_names(func)) <= {"dot_general", "transpose"}, op_names(func)
        assert gemm_of(func) is not None, dims


def test_dot_general_lanes_of_x_are_rows():
    """``x @ W`` with x batched at 0 or 1: the lanes are more rows of one product, the
    operands read where they lie."""
    w = _RNG.standard_normal((4, 5))
    lanes = [[_RNG.standard_normal((3, 4)), w] for _ in range(SIZE)]
    for d in (0, 1):
        func = batched("dot_general", lanes, [d, None], contract=((1,), (0,)),
                       batch=((), ()))
        assert op_names(func) == ["dot_general"]
        assert gemm_of(func)[:4] == (1, 3 * SIZE, 5, 4)


def gemm_lines(fn, *args) -> list[str]:
    return re.findall(r"gemm\S* float64\S* (\S+):", pb.jit(fn, backend="c").lower(*args).loops)


def test_vmapped_matmul_is_one_gemm_in_c():
    W = _RNG.standard_normal((16, 8))
    x = _RNG.standard_normal((5, 7, 16))
    assert gemm_lines(pb.vmap(lambda x: x @ W), x) == ["35x8x16"]
    w = _RNG.standard_normal((5, 16, 8))
    assert gemm_lines(pb.vmap(lambda x, w: x @ w), x, w) == ["7x8x16"]


def test_vmapped_matmul_of_batched_weights_is_one_gemm_in_c():
    x = _RNG.standard_normal((7, 16))
    w = _RNG.standard_normal((5, 16, 8))
    assert gemm_lines(pb.vmap(lambda w: x @ w), w) == ["7x40x16"]


# -- factorizations, triangular_solve, conv, sort ---------------------------------------


def test_factorization_keeps_a_stack_axis_lane():
    """A lane among the stack axes stays there; one among the matrices' axes moves."""
    a = [_RNG.standard_normal((2, 3, 3)) for _ in range(SIZE)]
    lanes = [[x @ np.swapaxes(x, -1, -2) + 3 * np.eye(3)] for x in a]
    assert op_names(batched("cholesky", lanes, [1])) == ["cholesky"]
    assert op_names(batched("cholesky", lanes, [2])) == ["transpose", "cholesky"]
    assert op_names(batched("lu", lanes, [0])) == ["lu"]
    assert op_names(batched("eigh", lanes, [1], lower=True, vectors=True)) == ["eigh"]


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("db", [0, 1, 2, 3])
def test_triangular_solve_of_one_matrix_is_one_solve(left_side, db):
    """Every lane's right-hand sides are more columns (rows) of one solve."""
    a = np.tril(_RNG.standard_normal((2, 3, 3))) + 3 * np.eye(3)
    lanes = [[a, _RNG.standard_normal((2, 3, 4) if left_side else (2, 4, 3))]
             for _ in range(SIZE)]
    func = batched("triangular_solve", lanes, [None, db], left_side=left_side, lower=True,
                   transpose_a=False, unit_diagonal=False)
    assert op_names(func).count("triangular_solve") == 1
    assert "for_loop" not in op_names(func)


CONV = dict(strides=(2, 1), padding=((1, 0), (0, 2)), lhs_dilation=(1, 2),
            rhs_dilation=(2, 1))


@pytest.mark.parametrize("dims", dims_for([4, 4]))
def test_conv(dims):
    """One operand batched: one conv (lanes as more images, or more output features);
    both: a loop of convs."""
    lanes = [[_RNG.standard_normal((2, 3, 5, 4)), _RNG.standard_normal((4, 3, 2, 3))]
             for _ in range(SIZE)]
    names = op_names(batched("conv", lanes, dims, **CONV))
    assert (names.count("conv"), "for_loop" in names) == ((1, False) if None in dims else
                                                          (0, True))


@pytest.mark.parametrize("dims", dims_for([2, 2, 2]))
def test_sort_with_ties_and_payload(dims):
    keys = [_RNG.integers(0, 3, (4, 3)) for _ in range(SIZE)]
    lanes = [[k, _RNG.standard_normal((4, 3)), _RNG.standard_normal((4, 3))] for k in keys]
    batched("sort", lanes, dims, axis=0, num_keys=2, descending=True)
