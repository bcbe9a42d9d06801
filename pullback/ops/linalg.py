"""Linear-algebra primitives: ``dot_general``, ``cholesky``, ``triangular_solve``, ``lu``.

Everything else in NumPy's linear algebra (matmul, einsum, det, inv, solve ...) is a
composition of these in ``numpy_api/linalg.py``.  The factorizations follow LAPACK's
conventions, and the native backend calls LAPACK (BLAS for triangular solves); the
reference impls are NumPy's Cholesky and, where NumPy has none, LAPACK's unblocked
algorithms as column loops vectorized over the batch dimensions.

Derivatives are written with these same ops (``dot_general`` for products,
``triangular_solve`` for inverses) and masks of the triangles a factorization reads,
so they batch and differentiate again like any other code.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ir.builder import current
from ..ir.core import Atom
from ..ir.op import Op, get_op
from ..ir.types import TensorType, int32, int64
from . import batching as B
from . import elementwise as E
from . import shape as S
from .derivs import const, zeros
from .index import gather, scatter_add

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


def bilinear_jvp(name: str):
    """The jvp of an op bilinear in its two operands: d(a*b) = da*b + a*db."""

    def jvp(primals, tangents, outs, **params):
        a, b = primals
        ta, tb = tangents
        op = get_op(name)
        terms = ([op(ta, b, **params)] if ta is not None else []) + (
            [op(a, tb, **params)] if tb is not None else [])
        if not terms:
            return [None]
        return [terms[0] if len(terms) == 1 else E.add(*terms)]

    return jvp


def _unpermute(x: Atom, order: list[int]) -> Atom:
    """``x``, whose axis i is axis ``order[i]`` of an operand, in the operand's axis order."""
    perm = tuple(sorted(range(len(order)), key=order.__getitem__))
    return x if perm == tuple(range(len(perm))) else S.transpose(x, perm=perm)


def _by_position(axes: tuple[int, ...], partners: tuple[int, ...]) -> list[int]:
    """The ``partners`` of ``axes`` (paired by position), ordered as ``axes`` ascend."""
    return [p for _, p in sorted(zip(axes, partners, strict=True))]


def _dot_general_vjp(primals, outs, cts, contract, batch):
    """Each operand's cotangent contracts the result's cotangent with the other operand
    over the other operand's free axes; batch axes stay batch axes.  The result comes
    out as [batch, own free, own contracted], so a transpose puts the axes back."""
    a, b = primals
    (ct,) = cts
    (lc, rc), (lb, rb) = contract, batch
    lf, rf = _free_axes(a.type.ndim, lc, lb), _free_axes(b.type.ndim, rc, rb)
    ct_batch = tuple(range(len(lb)))
    ct_lf = tuple(range(len(lb), len(lb) + len(lf)))
    ct_rf = tuple(range(len(lb) + len(lf), ct.type.ndim))
    ct_a = dot_general(ct, b, contract=(ct_rf, tuple(rf)), batch=(ct_batch, rb))
    ct_b = dot_general(a, ct, contract=(tuple(lf), ct_lf), batch=(lb, ct_batch))
    return [_unpermute(ct_a, [*lb, *lf, *_by_position(rc, lc)]),
            _unpermute(ct_b, [*rb, *_by_position(lc, rc), *rf])]


def _gemm_like(nd: int, batch: tuple[int, ...], free: list[int]) -> bool:
    """Whether an operand is laid out as the C backend's GEMM reads one: batch axes
    leading, then the free axes and the contracted ones as two blocks."""
    nb = len(batch)
    if batch != tuple(range(nb)) or not free:
        return batch == tuple(range(nb))
    return free == list(range(free[0], free[-1] + 1)) and (free[0] == nb or free[-1] == nd - 1)


def _free_lane(d: int, nd: int, batch: tuple[int, ...], free: list[int]) -> int:
    """Where a lane axis that becomes a free axis of an operand (``nd`` axes a lane) goes:
    where it is, unless that breaks a GEMM layout; then into the free block, or beside
    the contracted block when the operand has no free axes (a vector dotted)."""
    keep = range(free[0], free[-1] + 2) if free else (len(batch), nd)
    return d if d in keep or not _gemm_like(nd, batch, free) else keep[0]


def _dot_general_batch(args, dims, size, contract, batch):
    """Lanes of both operands are one more batch pair (at the front, as GEMM wants);
    lanes of one operand are one more of its free axes (of its rows, for ``x @ W``), so
    a batched product stays one product."""
    (a, b), (da, db) = args, dims
    (lc, rc), (lb, rb) = contract, batch
    if da is not None and db is not None:
        pairs = (B.axes_in(lc, 0), B.axes_in(rc, 0))
        batched = ((0, *B.axes_in(lb, 0)), (0, *B.axes_in(rb, 0)))
        out = dot_general(B.moveaxis(a, da, 0), B.moveaxis(b, db, 0), contract=pairs,
                          batch=batched)
        return [out], [0]
    left = da is not None
    x, d, c, bt = (a, da, lc, lb) if left else (b, db, rc, rb)
    nd = x.type.ndim - 1
    to = _free_lane(d, nd, bt, _free_axes(nd, c, bt))
    x = B.moveaxis(x, d, to)
    c, bt = B.axes_in(c, to), B.axes_in(bt, to)
    pos = len(lb) + _free_axes(nd + 1, c, bt).index(to)
    if left:
        return [dot_general(x, b, contract=(c, rc), batch=(bt, rb))], [pos]
    pos += len(_free_axes(a.type.ndim, lc, lb))
    return [dot_general(a, x, contract=(lc, c), batch=(lb, bt))], [pos]


dot_general = Op(
    "dot_general",
    infer=_dot_general_infer,
    arity=2,
    impl=_dot_general_impl,
    params={"contract": "pairs", "batch": "pairs"},
    fusion="opaque",
    jvp=bilinear_jvp("dot_general"),
    vjp=_dot_general_vjp,
    batch=_dot_general_batch,
)


# -- shared by the factorizations ------------------------------------------------------


def _square_float(op: str, a: TensorType) -> int:
    """The order n of ``a`` [..., n, n] float; ShapeError otherwise."""
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op} needs square matrices [..., n, n], got {a}")
    if not a.dtype.is_float:
        raise ShapeError(f"{op} needs floating-point matrices, got {a}")
    return a.shape[-1]


def _matmul(a: Atom, b: Atom, ta: bool = False, tb: bool = False) -> Atom:
    """``op(a) @ op(b)`` over the batch dims, ``op`` transposing where asked (a transpose
    is a choice of contracted axis, so none is emitted)."""
    nd = a.type.ndim
    batch = tuple(range(nd - 2))
    contract = ((nd - 2 if ta else nd - 1,), (nd - 1 if tb else nd - 2,))
    return dot_general(a, b, contract=contract, batch=(batch, batch))


def _mT(x: Atom) -> Atom:
    """Each matrix of ``x`` transposed."""
    nd = x.type.ndim
    return S.transpose(x, perm=(*range(nd - 2), nd - 1, nd - 2))


def _rows_cols(t: TensorType) -> tuple[Atom, Atom]:
    """Each element's row and column number, for masks of triangles."""
    return tuple(S.iota(shape=t.shape, dim=t.ndim - k, dtype=int32) for k in (2, 1))


def _keep(x: Atom, cmp) -> Atom:
    """``x`` where ``cmp(row, col)`` holds (``E.ge``: the lower triangle ...), else 0."""
    return E.select(cmp(*_rows_cols(x.type)), x, zeros(x.type))


def _solve(a: Atom, b: Atom, left_side: bool, lower: bool = True, transpose_a: bool = False,
           unit_diagonal: bool = False) -> Atom:
    """``triangular_solve`` with the rules' usual defaults (a lower factor, as is)."""
    return triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                            unit_diagonal=unit_diagonal)



def batch_stacked(name: str):
    """The rule of an op on stacks of matrices [..., m, n] whose results are stacked
    alike (a factorization): the lane axis is one more stack axis, moved to the front
    only when it lies among the matrices' own axes."""

    def rule(args, dims, size, **params):
        (x,), (d,) = args, dims
        to = d if d < x.type.ndim - 2 else 0
        outs = current().emit(name, [B.moveaxis(x, d, to)], params)
        return outs, [to] * len(outs)

    return rule


# -- cholesky ---------------------------------------------------------------------------


def _cholesky_infer(ts):
    (a,) = ts
    _square_float("cholesky", a)
    return a


def _cholesky_impl(a):
    """NumPy's (LAPACK's potrf): reads the lower triangle of ``a``, raises LinAlgError
    when a matrix is not positive definite."""
    return np.linalg.cholesky(a)


def _phi(x: Atom) -> Atom:
    """The lower triangle of ``x`` with its diagonal halved."""
    rows, cols = _rows_cols(x.type)
    diag = E.select(E.eq(rows, cols), E.mul(x, const(0.5, x.type)), zeros(x.type))
    return E.select(E.gt(rows, cols), x, diag)


def _cholesky_jvp(primals, tangents, outs):
    """dL = L Phi(L^-1 dS L^-T), with dS the symmetric matrix of the lower triangle of
    dA: the factorization reads nothing else."""
    (t,) = tangents
    (low,) = outs
    ds = E.add(_keep(t, E.ge), _mT(_keep(t, E.gt)))
    inner = _solve(low, _solve(low, ds, left_side=True), left_side=False, transpose_a=True)
    return [_matmul(low, _phi(inner))]


def _cholesky_vjp(primals, outs, cts):
    """One op of its own (``cholesky_adjoint``), so that a backend runs it as the blocked
    reverse of the factorization instead of products and solves of whole matrices."""
    (low,) = outs
    return [cholesky_adjoint(low, cts[0])]


cholesky = Op("cholesky", infer=_cholesky_infer, arity=1, impl=_cholesky_impl,
              jvp=_cholesky_jvp, vjp=_cholesky_vjp, batch=batch_stacked("cholesky"))


# -- cholesky_adjoint -------------------------------------------------------------------
#
# F(L, C) = Phi(S + S^T) with S = L^-T Phi(L^T C) L^-1: the cotangent of the lower
# triangle of A = L L^T (all the factorization reads) from the cotangent C of L.  It
# reads the lower triangles of L and C.  Written as products and solves of whole
# matrices it costs about 4 n^3 flops; the native backend runs Murray's blocked reverse
# of a left-looking Cholesky (2 n^3 / 3, BLAS-3), and the interpreter the formula.  Its
# own derivatives use Ssym = S + S^T = F + F^T.


def _cholesky_adjoint_infer(ts):
    low, ct = ts
    _square_float("cholesky_adjoint", low)
    if (ct.shape, ct.dtype) != (low.shape, low.dtype):
        raise ShapeError(f"cholesky_adjoint needs a cotangent of the factor's type {low}, "
                         f"got {ct}")
    return TensorType(low.shape, low.dtype)


def _phi_np(x: np.ndarray) -> np.ndarray:
    """NumPy's ``_phi``: the lower triangle of each matrix, its diagonal halved."""
    out = np.tril(x)
    n = x.shape[-1]
    out[..., range(n), range(n)] *= 0.5
    return out


def _cholesky_adjoint_impl(low, ct):
    low = np.tril(low)
    p = _phi_np(np.swapaxes(low, -1, -2) @ np.tril(ct))
    s = _triangular_solve_impl(low, p, left_side=True, lower=True, transpose_a=True,
                               unit_diagonal=False)
    s = _triangular_solve_impl(low, s, left_side=False, lower=True, transpose_a=False,
                               unit_diagonal=False)
    return _phi_np(s + np.swapaxes(s, -1, -2))


def _symmetric(f: Atom) -> Atom:
    """``Ssym`` from ``F = Phi(Ssym)``: F's lower triangle plus its transpose."""
    low = _keep(f, E.ge)
    return E.add(low, _mT(low))


def _congruent(low: Atom, x: Atom, inverse_first: bool) -> Atom:
    """``L^-T x L^-1`` (``inverse_first``: ``L^-1 x L^-T``), by two triangular solves."""
    y = _solve(low, x, left_side=True, transpose_a=not inverse_first)
    return _solve(low, y, left_side=False, transpose_a=inverse_first)


def _cholesky_adjoint_jvp(primals, tangents, outs):
    """Linear in C; along L, dS + dS^T = L^-T (Y + Y^T) L^-1 with
    Y = Phi(dL^T C) - dL^T Ssym L."""
    low, ct = primals
    t_low, t_ct = tangents
    terms = [] if t_ct is None else [cholesky_adjoint(low, t_ct)]
    if t_low is not None:
        low, t_low = _keep(low, E.ge), _keep(t_low, E.ge)
        y = E.sub(_phi(_matmul(t_low, _keep(ct, E.ge), ta=True)),
                  _matmul(t_low, _matmul(_symmetric(outs[0]), low), ta=True))
        terms.append(_phi(_congruent(low, E.add(y, _mT(y)), inverse_first=False)))
    if not terms:
        return [None]
    return [terms[0] if len(terms) == 1 else E.add(*terms)]


def _cholesky_adjoint_vjp(primals, outs, cts):
    """With G = Phi(Fbar) + Phi(Fbar)^T and H = L^-1 G L^-T (symmetric):
    Cbar = L Phi(H), Lbar = C Phi(H)^T - Ssym L H, each on the lower triangle read."""
    low, ct = (_keep(x, E.ge) for x in primals)
    g = _phi(cts[0])
    h = _congruent(low, E.add(g, _mT(g)), inverse_first=True)
    ph = _phi(h)
    ct_low = E.sub(_matmul(ct, ph, tb=True), _matmul(_symmetric(outs[0]), _matmul(low, h)))
    return [_keep(ct_low, E.ge), _keep(_matmul(low, ph), E.ge)]


def _cholesky_adjoint_batch(args, dims, size):
    """Both operands are stacks of matrices: the lane axis leads each."""
    low, ct = (B.at(x, d, size) for x, d in zip(args, dims, strict=True))
    return [cholesky_adjoint(low, ct)], [0]


cholesky_adjoint = Op("cholesky_adjoint", infer=_cholesky_adjoint_infer, arity=2,
                      impl=_cholesky_adjoint_impl, jvp=_cholesky_adjoint_jvp,
                      vjp=_cholesky_adjoint_vjp, batch=_cholesky_adjoint_batch)


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


def _substitute(mat, rhs, lower, unit_diagonal, block=64):
    """Solve ``mat @ x = rhs`` reading only the strict lower (or upper) triangle of
    ``mat`` and, unless ``unit_diagonal``, its diagonal: by blocks of rows, as LAPACK's
    blocked solves, so that the rows already solved enter each block as one product and
    the row loop reads a block of ``x`` (a row at a time over all of ``x`` costs seconds
    on 1000 x 1000 systems)."""
    m = mat.shape[-1]
    x = np.zeros(rhs.shape, rhs.dtype)  # rows contiguous, whatever rhs's layout
    for b0 in range(0, m, block) if lower else reversed(range(0, m, block)):
        b1 = min(b0 + block, m)
        known = slice(0, b0) if lower else slice(b1, m)
        part = rhs[..., b0:b1, :] - mat[..., b0:b1, known] @ x[..., known, :]
        for i in range(b0, b1) if lower else reversed(range(b0, b1)):
            near = slice(b0, i) if lower else slice(i + 1, b1)
            s = part[..., i - b0, :] - (mat[..., i : i + 1, near] @ x[..., near, :])[..., 0, :]
            x[..., i, :] = s if unit_diagonal else s / mat[..., i, i, None]
    return x


def _triangular_solve_impl(a, b, left_side, lower, transpose_a, unit_diagonal):
    """``x op(a) = b`` is ``op(a)^T x^T = b^T``; a transposed lower factor is upper."""
    flip = transpose_a != (not left_side)
    mat = np.swapaxes(a, -1, -2) if flip else a
    rhs = b if left_side else np.swapaxes(b, -1, -2)
    x = _substitute(mat, rhs, lower != flip, unit_diagonal)
    return x if left_side else np.swapaxes(x, -1, -2).copy()


def _read_part(a: Atom, lower: bool, unit_diagonal: bool) -> Atom:
    """The part of ``a`` a triangular solve reads: one triangle, the diagonal unless unit."""
    cmp = {(True, False): E.ge, (True, True): E.gt, (False, False): E.le, (False, True): E.lt}
    return _keep(a, cmp[lower, unit_diagonal])


def _triangular_solve_jvp(primals, tangents, outs, left_side, lower, transpose_a,
                          unit_diagonal):
    """op(A) x = b gives op(A) dx = db - op(dA) x (x op(A) = b: dx op(A) = db - x op(dA))."""
    a, _ = primals
    ta, tb = tangents
    (x,) = outs
    rhs = tb
    if ta is not None:
        da = _read_part(ta, lower, unit_diagonal)
        moved = (_matmul(da, x, ta=transpose_a) if left_side
                 else _matmul(x, da, tb=transpose_a))
        rhs = E.neg(moved) if tb is None else E.sub(tb, moved)
    if rhs is None:
        return [None]
    return [_solve(a, rhs, left_side, lower, transpose_a, unit_diagonal)]


def _triangular_solve_vjp(primals, outs, cts, left_side, lower, transpose_a, unit_diagonal):
    """bbar solves the transposed system; Abar = -bbar x^T (left side) or -x^T bbar (right),
    transposed when op(A) is a transpose, and restricted to the part of A that was read."""
    a, _ = primals
    (x,) = outs
    ct_b = _solve(a, cts[0], left_side, lower, not transpose_a, unit_diagonal)
    first, second = (x, ct_b) if transpose_a == left_side else (ct_b, x)
    outer = (_matmul(first, second, tb=True) if left_side
             else _matmul(first, second, ta=True))
    return [_read_part(E.neg(outer), lower, unit_diagonal), ct_b]


def _triangular_solve_batch(args, dims, size, left_side, **flags):
    """One matrix for every lane: the lanes' right-hand sides are more columns (rows,
    solving from the right) of one solve.  Otherwise the lane axis is a stack axis of
    both operands."""
    (a, b), (da, db) = args, dims
    if da is None:
        at = b.type.ndim - (2 if left_side else 3)
        x = triangular_solve(a, B.fold_lanes(b, db, size, at), left_side=left_side, **flags)
        return [B.unfold_lanes(x, size, at)], [at]
    to = da if da < a.type.ndim - 2 else 0
    x = triangular_solve(B.moveaxis(a, da, to), B.at(b, db, size, to), left_side=left_side,
                         **flags)
    return [x], [to]


triangular_solve = Op(
    "triangular_solve",
    infer=_triangular_solve_infer,
    arity=2,
    impl=_triangular_solve_impl,
    params={"left_side": "bool", "lower": "bool", "transpose_a": "bool", "unit_diagonal": "bool"},
    jvp=_triangular_solve_jvp,
    vjp=_triangular_solve_vjp,
    batch=_triangular_solve_batch,
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


def _permute_rows(x: Atom, perm: Atom, inverse: bool) -> Atom:
    """``x[..., perm, :]`` of each matrix, or with ``inverse`` the rows put back where
    ``perm`` took them from: a gather (scatter) of the rows of all matrices at once."""
    *batch, n, m = x.type.shape
    count = math.prod(batch)
    rows = S.reshape(x, shape=(count * n, m))
    matrix = S.iota(shape=(count, n), dim=0, dtype=int64)
    local = E.convert(S.reshape(perm, shape=(count, n)), dtype=int64, weak=False)
    index = S.reshape(E.add(E.mul(matrix, const(n, matrix.type)), local), shape=(count * n,))
    moved = (scatter_add(zeros(rows.type), index, rows, axis=0) if inverse
             else gather(rows, index, axis=0))
    return S.reshape(moved, shape=x.type.shape)


def _lu_factors(packed: Atom) -> tuple[Atom, Atom]:
    """L (unit lower triangular) and U (upper triangular) unpacked from ``lu``."""
    rows, cols = _rows_cols(packed.type)
    unit = E.select(E.eq(rows, cols), const(1, packed.type), zeros(packed.type))
    return E.select(E.gt(rows, cols), packed, unit), _keep(packed, E.le)


def _lu_jvp(primals, tangents, outs):
    """With P A = L U and X = L^-1 P dA U^-1: dL = L strict_lower(X), dU = upper(X) U,
    and the packed factor's tangent is their sum (dL has a zero diagonal)."""
    (t,) = tangents
    packed, _, perm = outs
    pda = _permute_rows(t, perm, inverse=False)
    x = _solve(packed, _solve(packed, pda, left_side=True, unit_diagonal=True),
               left_side=False, lower=False)
    low, up = _lu_factors(packed)
    d = E.add(_matmul(low, _keep(x, E.gt)), _matmul(_keep(x, E.le), up))
    return [d, None, None]


def _lu_vjp(primals, outs, cts):
    """The transpose of the jvp: M = strict_lower(L^T C) + upper(C U^T), then
    Abar = P^T L^-T M U^-T."""
    c = cts[0]
    if c is None:
        return [None]
    packed, _, perm = outs
    low, up = _lu_factors(packed)
    m = E.add(_keep(_matmul(low, c, ta=True), E.gt), _keep(_matmul(c, up, tb=True), E.le))
    y = _solve(packed, m, left_side=True, transpose_a=True, unit_diagonal=True)
    y = _solve(packed, y, left_side=False, lower=False, transpose_a=True)
    return [_permute_rows(y, perm, inverse=True)]


lu = Op("lu", infer=_lu_infer, arity=1, impl=_lu_impl, multiple_results=True,
        jvp=_lu_jvp, vjp=_lu_vjp, batch=batch_stacked("lu"))
