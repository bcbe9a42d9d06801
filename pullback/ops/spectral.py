"""Spectral factorizations: ``eigh`` (symmetric eigendecomposition), ``svd`` and ``qr``.

Their reference semantics are NumPy's own (``np.linalg.eigh`` ... call LAPACK's
``?syevd``, ``?gesdd`` and ``?geqrf``/``?orgqr``; the native backend calls the same
routines), batched over leading axes.  The derivative rules are the closed forms, written
with ``dot_general``, ``triangular_solve`` and masks so that they differentiate again:

* eigh: with ``M = V^T dS V``, ``dw = diag(M)`` and ``dV = V (F o M)``, where
  ``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal and 0 on it.  ``dS`` is the tangent
  of the symmetric matrix the factorization reads (one triangle of the operand).
* svd: the same with ``F[i, j] = 1 / (s[j]^2 - s[i]^2)``, plus the parts of ``dA``
  outside the span of the singular vectors when the matrix is not square.
* qr: ``C = Q^T dA R^-1``, ``Omega = tril(C, -1) - tril(C, -1)^T``,
  ``dQ = Q (Omega - C) + dA R^-1``, ``dR = (C - Omega) R`` (m >= n); a wide matrix
  ``[X | Y]`` differentiates ``X = Q R1`` so, and ``R2 = Q^T Y``.

Degenerate spectra follow JAX's and PyTorch's convention: the eigenvalue (singular value)
derivatives are always finite, while eigenvector (singular vector) derivatives are inf or
NaN where two eigenvalues (singular values) are equal, since the vectors are not unique
there.  The extra columns of a full (``full_matrices=True`` / ``mode='complete'``) basis
of a non-square matrix are an arbitrary completion: their tangent is NaN, and a gradient
that depends on them is NaN.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.core import Atom
from ..ir.op import Op
from ..ir.types import TensorType
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .derivs import const, zeros
from .linalg import _keep, _matmul, _mT, _rows_cols, _solve, batch_stacked

# -- helpers ----------------------------------------------------------------------------


def _float_matrix(op: str, a: TensorType) -> tuple[int, int]:
    """The (rows, columns) of ``a`` [..., m, n] float; ShapeError otherwise."""
    if a.ndim < 2 or not a.dtype.is_float:
        raise ShapeError(f"{op} needs floating-point matrices [..., m, n], got {a}")
    return a.shape[-2], a.shape[-1]


def _type(a: TensorType, *core: int) -> TensorType:
    return TensorType((*a.shape[:-2], *core), a.dtype)


def _diag_of(m: Atom) -> Atom:
    """The diagonal of each matrix of ``m`` [..., n, n]."""
    return R.reduce_sum(_keep(m, E.eq), axes=(m.type.ndim - 1,))


def _spread(v: Atom, like: TensorType, axis: int) -> Atom:
    """``v`` [..., n] broadcast over the matrices ``like`` along their ``axis`` (-2: v[i]
    on row i, -1: v[j] in column j)."""
    nb = v.type.ndim - 1
    return S.broadcast_in_dim(v, shape=like.shape, dims=(*range(nb), like.ndim + axis))


def _scale(m: Atom, v: Atom, axis: int) -> Atom:
    """Rows (axis -2) or columns (axis -1) of ``m`` times ``v``: diag(v) m or m diag(v)."""
    return E.mul(m, _spread(v, m.type, axis))


def _diag_mat(v: Atom, like: TensorType) -> Atom:
    return _keep(_spread(v, like, -1), E.eq)


def _gaps(w: Atom, like: TensorType) -> Atom:
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (inf where w[i] == w[j]).
    The diagonal's denominator is made 1 before dividing, so that no 1/0 reaches the
    derivatives of these rules."""
    rows, cols = _rows_cols(like)
    diag = E.eq(rows, cols)
    diff = E.sub(_spread(w, like, -1), _spread(w, like, -2))
    safe = E.select(diag, const(1, like), diff)
    return E.select(diag, zeros(like), E.div(const(1, like), safe))


def _add(*terms: Atom | None) -> Atom | None:
    present = [t for t in terms if t is not None]
    if not present:
        return None
    out = present[0]
    for t in present[1:]:
        out = E.add(out, t)
    return out


def _cols(x: Atom, lo: int, hi: int) -> Atom:
    """Columns lo:hi of each matrix."""
    nd = x.type.ndim
    return S.slice_(x, start=(0,) * (nd - 1) + (lo,), limit=(*x.type.shape[:-1], hi),
                    stride=(1,) * nd)


def _rows(x: Atom, lo: int, hi: int) -> Atom:
    """Rows lo:hi of each matrix."""
    nd = x.type.ndim
    return S.slice_(x, start=(0,) * (nd - 2) + (lo, 0),
                    limit=(*x.type.shape[:-2], hi, x.type.shape[-1]), stride=(1,) * nd)


def _nan_where_nonzero(x: Atom, ct: Atom | None) -> Atom:
    """``x``, or NaN everywhere when ``ct`` (the cotangent of an arbitrary completion of a
    basis) is not all zero: such a gradient is not defined."""
    if ct is None or ct.type.size == 0:
        return x
    t = ct.type
    used = R.reduce_max(E.ne(ct, zeros(t)), axes=tuple(range(t.ndim)))
    return E.select(used, S.broadcast_in_dim(const(np.nan, x.type), shape=x.type.shape,
                                             dims=()), x)


def _nan_like(t: TensorType) -> Atom:
    return S.broadcast_in_dim(const(np.nan, t), shape=t.shape, dims=())


def _read_symmetric(t: Atom, lower: bool) -> Atom:
    """The symmetric matrix whose ``lower`` (else upper) triangle is that of ``t``."""
    inner, strict = (E.ge, E.gt) if lower else (E.le, E.lt)
    return E.add(_keep(t, inner), _mT(_keep(t, strict)))


def _fold_symmetric(g: Atom, lower: bool) -> Atom:
    """The transpose of ``_read_symmetric``: tril(G) + tril(G^T, -1) (or the upper)."""
    inner, strict = (E.ge, E.gt) if lower else (E.le, E.lt)
    return E.add(_keep(g, inner), _keep(_mT(g), strict))


# -- eigh -------------------------------------------------------------------------------


def _eigh_infer(ts, lower, vectors):
    (a,) = ts
    m, n = _float_matrix("eigh", a)
    if m != n:
        raise ShapeError(f"eigh needs square matrices [..., n, n], got {a}")
    w = _type(a, n)
    return [w, a] if vectors else [w]


def _eigh_impl(a, lower, vectors):
    uplo = "L" if lower else "U"
    if vectors:
        w, v = np.linalg.eigh(a, UPLO=uplo)
        return [w, v]
    return [np.linalg.eigvalsh(a, UPLO=uplo)]


def _eigh_jvp(primals, tangents, outs, lower, vectors):
    (a,) = primals
    (t,) = tangents
    w, v = outs if vectors else eigh(a, lower=lower, vectors=True)
    m = _matmul(v, _matmul(_read_symmetric(t, lower), v), ta=True)
    dw = _diag_of(m)
    if not vectors:
        return [dw]
    return [dw, _matmul(v, E.mul(_gaps(w, a.type), m))]


def _eigh_vjp(primals, outs, cts, lower, vectors):
    (a,) = primals
    w, v = outs if vectors else eigh(a, lower=lower, vectors=True)
    ct_w, ct_v = cts if vectors else (cts[0], None)
    inner = _add(None if ct_w is None else _diag_mat(ct_w, a.type),
                 None if ct_v is None else E.mul(_gaps(w, a.type), _matmul(v, ct_v, ta=True)))
    if inner is None:
        return [None]
    return [_fold_symmetric(_matmul(v, _matmul(inner, v, tb=True)), lower)]


eigh = Op("eigh", infer=_eigh_infer, arity=1, impl=_eigh_impl, multiple_results=True,
          params={"lower": "bool", "vectors": "bool"}, jvp=_eigh_jvp, vjp=_eigh_vjp,
          batch=batch_stacked("eigh"))


# -- svd --------------------------------------------------------------------------------


def _svd_infer(ts, full_matrices, compute_uv):
    (a,) = ts
    m, n = _float_matrix("svd", a)
    k = min(m, n)
    s = _type(a, k)
    if not compute_uv:
        return [s]
    if full_matrices:
        return [_type(a, m, m), s, _type(a, n, n)]
    return [_type(a, m, k), s, _type(a, k, n)]


def _svd_impl(a, full_matrices, compute_uv):
    if not compute_uv:
        return [np.linalg.svd(a, compute_uv=False)]
    return list(np.linalg.svd(a, full_matrices=full_matrices))


def _reduced(a: Atom, outs, full_matrices: bool, compute_uv: bool):
    """U (m x k), s and V (n x k) of ``a``: the outputs' first k columns (rows of Vh), or
    a reduced factorization computed for the derivative when only s was."""
    if not compute_uv:
        u, s, vh = svd(a, full_matrices=False, compute_uv=True)
        return u, s, _mT(vh)
    u, s, vh = outs
    k = s.type.shape[-1]
    v = _mT(vh)
    if full_matrices:
        u, v = _cols(u, 0, k), _cols(v, 0, k)
    return u, s, v


def _square_gaps(s: Atom, like: TensorType) -> Atom:
    return _gaps(E.mul(s, s), like)


def _svd_jvp(primals, tangents, outs, full_matrices, compute_uv):
    """With M = U^T dA V: ds = diag(M), dU = U (F o (M S + S M^T)) + (I - U U^T) dA V / s,
    dV = V (F o (S M + M^T S)) + (I - V V^T) dA^T U / s (the last terms when m > k or n > k)."""
    (a,) = primals
    (t,) = tangents
    u, s, v = _reduced(a, outs, full_matrices, compute_uv)
    mm = _matmul(u, _matmul(t, v), ta=True)
    ds = _diag_of(mm)
    if not compute_uv:
        return [ds]
    m, n = a.type.shape[-2:]
    k = s.type.shape[-1]
    f = _square_gaps(s, mm.type)
    ms = _scale(mm, s, -1)
    sm = _scale(mm, s, -2)
    du = _matmul(u, E.mul(f, E.add(ms, _mT(ms))))
    dv = _matmul(v, E.mul(f, E.add(sm, _mT(sm))))
    if m > k:
        dav = _matmul(t, v)
        du = E.add(du, _scale(E.sub(dav, _matmul(u, _matmul(u, dav, ta=True))), _recip(s), -1))
    if n > k:
        dau = _matmul(t, u, ta=True)
        dv = E.add(dv, _scale(E.sub(dau, _matmul(v, _matmul(v, dau, ta=True))), _recip(s), -1))
    if full_matrices:
        du = _completed(du, outs[0].type)
        dv = _completed(dv, outs[2].type)
    return [du, ds, _mT(dv)]


def _recip(x: Atom) -> Atom:
    return E.div(const(1, x.type), x)


def _completed(d: Atom, t: TensorType) -> Atom:
    """The tangent ``d`` of a basis's first k columns, with NaN columns for the rest."""
    extra = t.shape[-1] - d.type.shape[-1]
    if not extra:
        return d
    nan = _nan_like(TensorType((*t.shape[:-1], extra), t.dtype))
    return S.concatenate(d, nan, axis=t.ndim - 1)


def _svd_vjp(primals, outs, cts, full_matrices, compute_uv):
    """The transpose of the jvp: with J = F o (U^T Ubar), K = F o (V^T Vbar),
    Abar = U ((J + J^T) S + diag(sbar) + S (K + K^T)) V^T
           + (I - U U^T) Ubar V^T / s + U (Vbar / s)^T (I - V V^T)."""
    (a,) = primals
    u, s, v = _reduced(a, outs, full_matrices, compute_uv)
    ct_u, ct_s, ct_vh = cts if compute_uv else (None, cts[0], None)
    ct_v = None if ct_vh is None else _mT(ct_vh)
    m, n = a.type.shape[-2:]
    k = s.type.shape[-1]
    extras = []
    if full_matrices and ct_u is not None and m > k:
        extras.append(_cols(ct_u, k, m))
        ct_u = _cols(ct_u, 0, k)
    if full_matrices and ct_v is not None and n > k:
        extras.append(_cols(ct_v, k, n))
        ct_v = _cols(ct_v, 0, k)
    like = TensorType((*a.type.shape[:-2], k, k), a.type.dtype)
    f = _square_gaps(s, like)
    terms = [None if ct_s is None else _diag_mat(ct_s, like)]
    if ct_u is not None:
        j = E.mul(f, _matmul(u, ct_u, ta=True))
        terms.append(_scale(E.add(j, _mT(j)), s, -1))
    if ct_v is not None:
        kk = E.mul(f, _matmul(v, ct_v, ta=True))
        terms.append(_scale(E.add(kk, _mT(kk)), s, -2))
    inner = _add(*terms)
    out = [None if inner is None else _matmul(u, _matmul(inner, v, tb=True))]
    if ct_u is not None and m > k:
        scaled = _scale(ct_u, _recip(s), -1)
        out.append(_matmul(E.sub(scaled, _matmul(u, _matmul(u, scaled, ta=True))), v, tb=True))
    if ct_v is not None and n > k:
        scaled = _scale(ct_v, _recip(s), -1)
        proj = E.sub(scaled, _matmul(v, _matmul(v, scaled, ta=True)))
        out.append(_matmul(u, proj, tb=True))
    grad = _add(*out)
    if grad is None:
        return [None]
    for extra in extras:
        grad = _nan_where_nonzero(grad, extra)
    return [grad]


svd = Op("svd", infer=_svd_infer, arity=1, impl=_svd_impl, multiple_results=True,
         params={"full_matrices": "bool", "compute_uv": "bool"}, jvp=_svd_jvp, vjp=_svd_vjp,
         batch=batch_stacked("svd"))


# -- qr ---------------------------------------------------------------------------------


def _qr_infer(ts, complete):
    (a,) = ts
    m, n = _float_matrix("qr", a)
    k = m if complete else min(m, n)
    return [_type(a, m, k), _type(a, k, n)]


def _qr_impl(a, complete):
    q, r = np.linalg.qr(a, mode="complete" if complete else "reduced")
    return [q, r]


def _qr_square_jvp(q: Atom, r: Atom, da: Atom) -> tuple[Atom, Atom]:
    """dQ, dR of A = Q R for A m x n, m >= n, Q m x n, R n x n."""
    b = _solve(r, da, left_side=False, lower=False)
    c = _matmul(q, b, ta=True)
    low = _keep(c, E.gt)
    omega = E.sub(low, _mT(low))
    dq = E.add(_matmul(q, E.sub(omega, c)), b)
    dr = _matmul(E.sub(c, omega), r)
    return dq, dr


def _qr_square_vjp(q: Atom, r: Atom, ct_q: Atom | None, ct_r: Atom | None) -> Atom | None:
    """The transpose of ``_qr_square_jvp``: X = Q^T Qbar - Rbar R^T,
    Cbar = tril(X - X^T, -1) - X, Abar = (Qbar + Q Cbar) R^-T."""
    x = _add(None if ct_q is None else _matmul(q, ct_q, ta=True),
             None if ct_r is None else E.neg(_matmul(ct_r, r, tb=True)))
    if x is None:
        return None
    cbar = E.sub(_keep(E.sub(x, _mT(x)), E.gt), x)
    bbar = _add(ct_q, _matmul(q, cbar))
    return _solve(r, bbar, left_side=False, lower=False, transpose_a=True)


def _qr_parts(a: Atom, outs, complete: bool):
    """Q's first k columns, R's first k rows (k = min(m, n)), and m, n, k."""
    q, r = outs
    m, n = a.type.shape[-2:]
    k = min(m, n)
    if complete and m > n:
        q = _cols(q, 0, k)
        r = _rows(r, 0, k)
    return q, r, m, n, k


def _qr_jvp(primals, tangents, outs, complete):
    (a,) = primals
    (t,) = tangents
    q, r, m, n, k = _qr_parts(a, outs, complete)
    if m >= n:
        dq, dr = _qr_square_jvp(q, r, t)
        if complete and m > n:
            dq = _completed(dq, outs[0].type)
            below = zeros(TensorType((*a.type.shape[:-2], m - n, n), a.type.dtype))
            dr = S.concatenate(dr, below, axis=a.type.ndim - 2)
        return [dq, dr]
    r1, r2 = _cols(r, 0, m), _cols(r, m, n)
    dq, dr1 = _qr_square_jvp(q, r1, _cols(t, 0, m))
    dr2 = _matmul(q, E.sub(_cols(t, m, n), _matmul(dq, r2)), ta=True)
    return [dq, S.concatenate(dr1, dr2, axis=a.type.ndim - 1)]


def _qr_vjp(primals, outs, cts, complete):
    (a,) = primals
    ct_q, ct_r = cts
    q, r, m, n, k = _qr_parts(a, outs, complete)
    extra = None
    if complete and m > n:
        if ct_q is not None:
            extra, ct_q = _cols(ct_q, k, m), _cols(ct_q, 0, k)
        if ct_r is not None:
            ct_r = _rows(ct_r, 0, k)
    if m >= n:
        grad = _qr_square_vjp(q, r, ct_q, ct_r)
        return [None if grad is None else _nan_where_nonzero(grad, extra)]
    r1, r2 = _cols(r, 0, m), _cols(r, m, n)
    ct_r1 = None if ct_r is None else _cols(ct_r, 0, m)
    ct_r2 = None if ct_r is None else _cols(ct_r, m, n)
    if ct_r2 is not None:
        moved = _matmul(_matmul(q, ct_r2), r2, tb=True)
        ct_q = E.neg(moved) if ct_q is None else E.sub(ct_q, moved)
    gx = _qr_square_vjp(q, r1, ct_q, ct_r1)
    gy = None if ct_r2 is None else _matmul(q, ct_r2)
    if gx is None and gy is None:
        return [None]
    batch = a.type.shape[:-2]
    gx = zeros(TensorType((*batch, m, m), a.type.dtype)) if gx is None else gx
    gy = zeros(TensorType((*batch, m, n - m), a.type.dtype)) if gy is None else gy
    return [S.concatenate(gx, gy, axis=a.type.ndim - 1)]


qr = Op("qr", infer=_qr_infer, arity=1, impl=_qr_impl, multiple_results=True,
        params={"complete": "bool"}, jvp=_qr_jvp, vjp=_qr_vjp, batch=batch_stacked("qr"))
