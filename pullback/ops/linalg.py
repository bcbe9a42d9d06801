"""Linear-algebra primitives: ``dot_general``, ``cholesky``, ``triangular_solve``, ``lu``.

Everything else in NumPy's linear algebra (matmul, einsum, det, inv, solve ...) is a
composition of these in ``numpy_api/linalg.py``.  The factorizations follow LAPACK's
conventions so that native backends can call LAPACK or port the loops below directly;
the reference impls are written as column loops vectorized over the batch dimensions.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType, int32

# -- dot_general ----------------------------------------------------------------------


def _check_axes(what: str, axes: tuple[int, ...], t: TensorType, shown: str) -> None:
    if len(set(axes)) != len(axes) or any(not 0 <= ax < t.ndim for ax in axes):
        raise ShapeError(f"dot_general: bad {what} axes {axes} for {t} ({shown})")


def _free_axes(ndim: int, *used: tuple[int, ...]) -> list[int]:
    taken = {ax for axes in used for ax in axes}
    return [ax for ax in range(ndim) if ax not in taken]


def _dot_general_infer(ts, contract, batch):
    a, b = ts
    shown = f"{a} and {b}, contract={contract}, batch={batch}"
    if a.dtype != b.dtype:
        raise ShapeError(f"dot_general needs operands of one dtype, got {shown}")
    if len(contract) != 2 or len(batch) != 2:
        raise ShapeError(f"dot_general: contract and batch must be (lhs, rhs) pairs ({shown})")
    (lc, rc), (lb, rb) = contract, batch
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: lhs and rhs axis lists differ in length ({shown})")
    _check_axes("lhs", lc + lb, a, shown)
    _check_axes("rhs", rc + rb, b, shown)
    for la, ra in zip(lc + lb, rc + rb, strict=True):
        if a.shape[la] != b.shape[ra]:
            raise ShapeError(
                f"dot_general: size {a.shape[la]} of lhs axis {la} differs from size "
                f"{b.shape[ra]} of rhs axis {ra} ({shown})"
            )
    shape = (
        [a.shape[ax] for ax in lb]
        + [a.shape[ax] for ax in _free_axes(a.ndim, lc, lb)]
        + [b.shape[ax] for ax in _free_axes(b.ndim, rc, rb)]
    )
    return TensorType(tuple(shape), a.dtype)


def _as_batched_matrix(x: np.ndarray, batch, rows, cols) -> np.ndarray:
    """``x`` transposed to (batch, rows, cols) and flattened to a 3-d array."""
    sizes = [int(np.prod([x.shape[ax] for ax in axes], dtype=np.int64))
             for axes in (batch, rows, cols)]
    return np.transpose(x, [*batch, *rows, *cols]).reshape(sizes)


def _dot_general_impl(a, b, contract, batch):
    (lc, rc), (lb, rb) = contract, batch
    lf, rf = _free_axes(a.ndim, lc, lb), _free_axes(b.ndim, rc, rb)
    out = np.matmul(_as_batched_matrix(a, lb, lf, lc), _as_batched_matrix(b, rb, rc, rf))
    shape = [a.shape[ax] for ax in (*lb, *lf)] + [b.shape[ax] for ax in rf]
    return out.reshape(shape)


dot_general = Op(
    "dot_general",
    infer=_dot_general_infer,
    impl=_dot_general_impl,
    params={"contract": "pairs", "batch": "pairs"},
    fusion="opaque",
)


# -- shared by the factorizations ------------------------------------------------------


def _square_float(op: str, a: TensorType) -> int:
    """The order n of ``a`` [..., n, n] float; ShapeError otherwise."""
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op} needs square matrices [..., n, n], got {a}")
    if not a.dtype.is_float:
        raise ShapeError(f"{op} needs floating-point matrices, got {a}")
    return a.shape[-1]


def quiet(fn):
    """An impl with floating-point warnings silenced (inf/nan are values here)."""

    def impl(*xs, **params):
        with np.errstate(all="ignore"):
            return fn(*xs, **params)

    return impl


# -- cholesky ---------------------------------------------------------------------------


def _cholesky_infer(ts):
    (a,) = ts
    _square_float("cholesky", a)
    return a


def _cholesky_impl(a):
    """Cholesky–Banachiewicz, row of L by row; reads only the lower triangle of ``a``
    and raises like LAPACK potrf when a pivot is zero or negative (NaN propagates)."""
    n = a.shape[-1]
    low = np.zeros_like(a)
    for j in range(n):
        row = low[..., j, :j]
        d = a[..., j, j] - np.sum(row * row, axis=-1)
        if np.any(d <= 0):
            raise np.linalg.LinAlgError("Matrix is not positive definite")
        ljj = np.sqrt(d)
        low[..., j, j] = ljj
        below = a[..., j + 1 :, j] - (low[..., j + 1 :, :j] @ row[..., None])[..., 0]
        low[..., j + 1 :, j] = below / ljj[..., None]
    return low


cholesky = Op("cholesky", infer=_cholesky_infer, impl=quiet(_cholesky_impl))


# -- triangular_solve -------------------------------------------------------------------


def _triangular_solve_infer(ts, left_side, lower, transpose_a, unit_diagonal):
    a, b = ts
    m = _square_float("triangular_solve", a)
    fits = a.dtype == b.dtype and b.ndim == a.ndim and b.shape[:-2] == a.shape[:-2]
    if not fits or b.shape[-2 if left_side else -1] != m:
        where = "rows" if left_side else "columns"
        raise ShapeError(
            f"triangular_solve: b must have a's dtype, batch dims and {m} {where}, "
            f"got a: {a}, b: {b}"
        )
    return b


def _substitute(mat, rhs, lower, unit_diagonal):
    """Solve ``mat @ x = rhs`` reading only the strict lower (or upper) triangle of
    ``mat`` and, unless ``unit_diagonal``, its diagonal."""
    m = mat.shape[-1]
    x = np.zeros_like(rhs)
    for i in range(m) if lower else reversed(range(m)):
        known = slice(0, i) if lower else slice(i + 1, m)
        s = rhs[..., i, :] - (mat[..., i : i + 1, known] @ x[..., known, :])[..., 0, :]
        x[..., i, :] = s if unit_diagonal else s / mat[..., i, i, None]
    return x


def _triangular_solve_impl(a, b, left_side, lower, transpose_a, unit_diagonal):
    """``x op(a) = b`` is ``op(a)^T x^T = b^T``; a transposed lower factor is upper."""
    flip = transpose_a != (not left_side)
    mat = np.swapaxes(a, -1, -2) if flip else a
    rhs = b if left_side else np.swapaxes(b, -1, -2)
    x = _substitute(mat, rhs, lower != flip, unit_diagonal)
    return x if left_side else np.swapaxes(x, -1, -2).copy()


triangular_solve = Op(
    "triangular_solve",
    infer=_triangular_solve_infer,
    impl=quiet(_triangular_solve_impl),
    params={"left_side": "bool", "lower": "bool", "transpose_a": "bool", "unit_diagonal": "bool"},
)


# -- lu ---------------------------------------------------------------------------------


def _lu_infer(ts):
    (a,) = ts
    _square_float("lu", a)
    index = TensorType(a.shape[:-1], int32)
    return [a, index, index]


def _swap_rows(x: np.ndarray, k: int, p: np.ndarray) -> None:
    """Swap row ``k`` with row ``p[b]`` of each matrix ``x[b]`` (x is [B, n, ...])."""
    batch = np.arange(x.shape[0])
    row_k = x[batch, k].copy()
    x[batch, k] = x[batch, p]
    x[batch, p] = row_k


def _lu_impl(a):
    """Right-looking LU with partial pivoting, as LAPACK getf2.

    The pivot of column k is the first row (from k down) of largest magnitude (NaN
    first, as ``np.argmax``).  ``pivots[k]`` is the row swapped with row k (0-based);
    ``perm`` is the resulting row order, so ``a[perm] == L @ U``.  A zero pivot leaves
    its column unscaled (the matrix is singular; nothing is raised).
    """
    n = a.shape[-1]
    batch = a.shape[:-2]
    lu = a.reshape((int(np.prod(batch, dtype=np.int64)), n, n)).copy()
    pivots = np.zeros((lu.shape[0], n), np.int32)
    perm = np.tile(np.arange(n, dtype=np.int32), (lu.shape[0], 1))
    for k in range(n):
        p = k + np.argmax(np.abs(lu[:, k:, k]), axis=-1)
        pivots[:, k] = p
        _swap_rows(lu, k, p)
        _swap_rows(perm[..., None], k, p)
        pivot = lu[:, k, k, None]
        col = lu[:, k + 1 :, k]
        lu[:, k + 1 :, k] = np.where(pivot != 0, col / pivot, col)
        lu[:, k + 1 :, k + 1 :] -= lu[:, k + 1 :, k, None] * lu[:, k, None, k + 1 :]
    return [lu.reshape(a.shape), pivots.reshape((*batch, n)), perm.reshape((*batch, n))]


lu = Op("lu", infer=_lu_infer, impl=quiet(_lu_impl), multiple_results=True)
