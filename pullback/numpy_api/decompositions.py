"""``np.linalg``'s spectral functions: ``eigh``, ``eigvalsh``, ``svd``, ``qr`` on their
primitives (``ops/spectral.py``), and the compositions built on them: ``lstsq``,
``pinv``, ``cond``; and ``multi_dot`` (products in the cheapest order, as NumPy's).

NumPy computes these in float64 unless the operand is float32, and returns its named
tuples (``EighResult``, ``SVDResult``, ``QRResult``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConcretizationError, UnsupportedError
from ..ir.core import Atom, Lit
from ..ir.types import DType, int32
from ..ops import control as K
from ..ops import elementwise as E
from ..ops import reduce as R
from ..ops import shape as S
from ..ops import spectral as Sp
from .core import broadcast_to, convert, is_dynamic, register, shape_of, strong, typeof
from .indexing import take_along_axis
from .linalg import (
    _arrays,
    _linalg_dtype,
    _lu_solve,
    _matmul,
    _no_out,
    _reshape,
    _singular_values,
    _swap_last,
    norm,
)
from .sorting import argsort, sort

_LinAlgError = np.linalg.LinAlgError
_EighResult = type(np.linalg.eigh(np.eye(1)))
_SVDResult = type(np.linalg.svd(np.eye(1)))
_QRResult = type(np.linalg.qr(np.eye(1)))


def _stacked(a: Any) -> Atom:
    """``a`` as a stack of float matrices (float32 kept, else float64); LinAlgError as
    NumPy's for fewer than two dimensions."""
    a = strong(a)
    nd = len(shape_of(a))
    if nd < 2:
        raise _LinAlgError(f"{nd}-dimensional array given. Array must be at least "
                           f"two-dimensional")
    return convert(a, _linalg_dtype(a))


def _square(a: Any) -> Atom:
    a = _stacked(a)
    if shape_of(a)[-1] != shape_of(a)[-2]:
        raise _LinAlgError("Last 2 dimensions of the array must be square")
    return a


def _const(value: Any, dt: DType) -> Lit:
    return Lit(np.asarray(value, dt.np))


def _static(value: Any, what: str) -> Any:
    if is_dynamic(value):
        raise ConcretizationError(f"np.linalg.{what} must be known at compile time")
    return value


def _lower(uplo: Any) -> bool:
    uplo = _static(uplo, "eigh: UPLO")
    if uplo not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return uplo == "L"


@register(np.linalg.eigh)
def eigh(a: Any, UPLO: str = "L") -> Any:
    w, v = Sp.eigh(_square(a), lower=_lower(UPLO), vectors=True)
    return _EighResult(w, v)


@register(np.linalg.eigvalsh)
def eigvalsh(a: Any, UPLO: str = "L") -> Atom:
    (w,) = Sp.eigh(_square(a), lower=_lower(UPLO), vectors=False)
    return w


def _reversed_last(x: Atom) -> Atom:
    return S.rev(x, dims=(len(shape_of(x)) - 1,))


def _hermitian_svd(a: Atom, compute_uv: bool) -> Any:
    """NumPy's SVD of a symmetric matrix from its eigendecomposition: the singular values
    are the eigenvalues' magnitudes, in the reverse of their ascending (stable) order,
    the signs moved into Vh."""
    if not compute_uv:
        (w,) = Sp.eigh(a, lower=True, vectors=False)
        return _reversed_last(sort(E.abs_(w)))
    w, u = Sp.eigh(a, lower=True, vectors=True)
    order = _reversed_last(argsort(E.abs_(w)))
    s = take_along_axis(E.abs_(w), order)
    signs = take_along_axis(E.sign(w), order)
    nd = len(shape_of(u))
    u = take_along_axis(u, S.broadcast_in_dim(order, shape=shape_of(u),
                                              dims=(*range(nd - 2), nd - 1)))
    vh = _swap_last(E.mul(u, S.broadcast_in_dim(signs, shape=shape_of(u),
                                                dims=(*range(nd - 2), nd - 1))))
    return _SVDResult(u, s, vh)


@register(np.linalg.svd)
def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> Any:
    a = _stacked(a)
    compute_uv = bool(_static(compute_uv, "svd: compute_uv"))
    if _static(hermitian, "svd: hermitian"):
        return _hermitian_svd(_square(a), compute_uv)
    if not compute_uv:
        return _singular_values(a)
    u, s, vh = Sp.svd(a, full_matrices=bool(_static(full_matrices, "svd: full_matrices")),
                      compute_uv=True)
    return _SVDResult(u, s, vh)


@register(np.linalg.svdvals)
def svdvals(x: Any, /) -> Atom:
    return _singular_values(_stacked(x))


@register(np.linalg.qr)
def qr(a: Any, mode: str = "reduced") -> Any:
    mode = _static(mode, "qr: mode")
    if mode == "raw":
        raise UnsupportedError("np.linalg.qr(mode='raw') is not supported (LAPACK's "
                               "Householder reflectors)", hint="use mode='reduced'")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    q, r = Sp.qr(_stacked(a), complete=mode == "complete")
    return r if mode == "r" else _QRResult(q, r)


# -- compositions on the SVD -------------------------------------------------------------


def _inverted(s: Atom, large: Atom) -> Atom:
    """1/s where ``large``, else 0 (the small values' reciprocals never computed, so
    that their derivatives stay finite)."""
    one, zero = _const(1, typeof(s).dtype), _const(0, typeof(s).dtype)
    return E.select(large, E.div(one, E.select(large, s, one)), zero)


def _above_cutoff(s: Atom, rcond: Atom) -> Atom:
    """s > rcond * max(s) per matrix (s is [..., k] with k > 0, rcond [...])."""
    nd = len(shape_of(s))
    top = R.reduce_max(s, axes=(nd - 1,))
    cutoff = E.mul(top, rcond)
    return E.gt(s, S.broadcast_in_dim(cutoff, shape=shape_of(s), dims=tuple(range(nd - 1))))


def _spread_last(v: Atom, shape: Sequence[int], axis: int) -> Atom:
    nd = len(shape)
    return S.broadcast_in_dim(v, shape=tuple(shape), dims=(*range(nd - 2), nd + axis))


def _pinv_from_svd(u: Atom, s: Atom, vh: Atom, large: Atom) -> Atom:
    """V diag(1/s of the large values) U^T."""
    ut = _swap_last(u)
    scaled = E.mul(ut, _spread_last(_inverted(s, large), shape_of(ut), -2))
    return _matmul(_swap_last(vh), scaled)


@register(np.linalg.pinv)
def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = np._NoValue) -> Atom:
    a = _stacked(a)
    shape, dt = shape_of(a), typeof(a).dtype
    if rcond is None:
        rcond = (1e-15 if rtol is np._NoValue else
                 max(shape[-2:]) * np.finfo(dt.np).eps if rtol is None else rtol)
    elif rtol is not np._NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if min(shape[-2:]) == 0:
        return broadcast_to(_const(0, dt), (*shape[:-2], shape[-1], shape[-2]))
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    rc = broadcast_to(convert(strong(rcond), dt), shape[:-2])
    return _pinv_from_svd(u, s, vh, _above_cutoff(s, rc))


@register(np.linalg.lstsq)
def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple:
    """The minimum-norm least-squares solution from the SVD, as LAPACK's gelsd computes
    it.  NumPy's residuals are empty unless the system is over-determined and of full
    rank, a run-time fact: their shape here is the full-rank one, and a rank-deficient
    over-determined system raises instead of returning them."""
    a, b = strong(a), strong(b)
    vector = len(shape_of(b)) == 1
    for x in (a, b):
        nd = len(shape_of(x))
        if nd != 2 and not (x is b and vector):
            raise _LinAlgError(f"{nd}-dimensional array given. Array must be two-dimensional")
    dt = _linalg_dtype(a, b)
    a, b = convert(a, dt), convert(b, dt)
    if vector:
        b = _reshape(b, (shape_of(b)[0], 1))
    (m, n), (m2, k) = shape_of(a), shape_of(b)
    if m != m2:
        raise _LinAlgError("Incompatible dimensions")
    if rcond is None:
        rcond = np.finfo(dt.np).eps * max(m, n)
    if min(m, n) == 0:
        x = broadcast_to(_const(0, dt), (n, k))
        s = broadcast_to(_const(0, dt), (0,))
        rank = _const(0, int32)
    else:
        u, s, vh = Sp.svd(a, full_matrices=False, compute_uv=True)
        large = _above_cutoff(s, convert(strong(rcond), dt))
        x = _matmul(_pinv_from_svd(u, s, vh, large), b)
        rank = R.reduce_sum(convert(large, int32), axes=(0,))
    if m > n and n > 0:
        K.check(E.eq(rank, _const(n, int32)), exc="RuntimeError",
                fmt="lstsq of a rank-deficient over-determined system: NumPy returns "
                    "empty residuals, a shape known only at run time; pullback cannot "
                    "(use np.linalg.pinv(a) @ b for the solution)")
        resid = E.sub(_matmul(a, x), b)
        residuals = R.reduce_sum(E.mul(resid, resid), axes=(0,))
    else:
        residuals = broadcast_to(_const(0, dt), (0,))
    return (_reshape(x, (n,)) if vector else x), residuals, rank, s


@register(np.linalg.cond)
def cond(x: Any, p: Any = None) -> Atom:
    p = _static(p, "cond: p")
    x = _stacked(x)
    nd = len(shape_of(x))
    if p is None or p in (2, -2):
        s = _singular_values(x)
        last = (nd - 2,)
        big, small = R.reduce_max(s, axes=last), R.reduce_min(s, axes=last)
        return E.div(small, big) if p == -2 else E.div(big, small)
    if shape_of(x)[-1] != shape_of(x)[-2]:
        raise _LinAlgError("Last 2 dimensions of the array must be square")
    r = E.mul(norm(x, p, (-2, -1)), norm(_inverse(x), p, (-2, -1)))
    # a singular matrix: NaN from its inverse's infinities is infinite, as NumPy says
    finite_x = E.not_(R.reduce_max(E.ne(x, x), axes=(nd - 2, nd - 1)))
    return E.select(E.and_(E.ne(r, r), finite_x), _const(np.inf, typeof(r).dtype), r)


def _inverse(a: Atom) -> Atom:
    """``a``'s inverse, inf or NaN where it is singular (``cond`` does not raise)."""
    shape = shape_of(a)
    eye = convert(E.eq(S.iota(shape=shape, dim=len(shape) - 2, dtype=int32),
                       S.iota(shape=shape, dim=len(shape) - 1, dtype=int32)), typeof(a).dtype)
    return _lu_solve(a, eye, checked=False)


# -- multi_dot ---------------------------------------------------------------------------


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The split points of the cheapest parenthesisation of matrices of sizes
    dims[i] x dims[i+1] (NumPy's dynamic programme, ties to the first split)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(arrays: list[Atom], split: list[list[int]], i: int, j: int) -> Atom:
    if i == j:
        return arrays[i]
    k = split[i][j]
    return _matmul(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


@register(np.linalg.multi_dot)
def multi_dot(arrays: Any, *, out: Any = None) -> Atom:
    _no_out(out)
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    arrays, _ = _arrays(*arrays)
    first_vec, last_vec = len(shape_of(arrays[0])) == 1, len(shape_of(arrays[-1])) == 1
    if first_vec:
        arrays[0] = _reshape(arrays[0], (1, shape_of(arrays[0])[0]))
    if last_vec:
        arrays[-1] = _reshape(arrays[-1], (shape_of(arrays[-1])[0], 1))
    for a in arrays:
        if len(shape_of(a)) != 2:
            raise _LinAlgError(f"{len(shape_of(a))}-dimensional array given. Array must be "
                               f"two-dimensional")
    dims = [shape_of(arrays[0])[0], *(shape_of(a)[1] for a in arrays)]
    result = _chain(arrays, _chain_order(dims), 0, len(arrays) - 1)
    shape = shape_of(result)
    keep = [d for d, drop in zip(shape, (first_vec, last_vec), strict=True) if not drop]
    return _reshape(result, keep)

