"""``scipy.linalg``'s Cholesky factorization, triangular solves and matrix exponential,
mapped once a program imports it (``optional.py``: SciPy stays optional).

All are compositions: ``cholesky`` and ``cho_factor`` of the ``cholesky`` primitive,
``solve_triangular`` and ``cho_solve`` of the ``triangular_solve`` primitive, ``expm`` of
products, one ``np.linalg.solve`` and a loop of squarings, so their derivatives are those
of the parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg as _sl

from ..errors import UnsupportedError
from ..ir.builder import current
from ..ir.core import Atom, Lit, Var
from ..ir.types import TensorType, float64, int64
from ..ops import ad as AD
from ..ops import control as K
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import reduce as R
from ..ops import shape as S
from ..ops.derivs import const
from .core import broadcast_to, convert, promote, register, static
from .linalg import _diagonal, matmul, solve
from .optional import PUBLIC_MODULE


def _linalg(name: str) -> Callable[[Callable], Callable]:
    """Register as the mapping of ``scipy.linalg``'s function of this name."""
    obj = getattr(_sl, name)
    PUBLIC_MODULE[obj] = "scipy.linalg"
    return register(obj)


def _float_operands(*xs: Any) -> list[Atom]:
    """Operands in their common float dtype (integers as float64), as SciPy's LAPACK
    calls take them."""
    atoms, rt = promote(*xs)
    dt = rt.dtype if rt.dtype.is_float else float64
    return [convert(a, dt) for a in atoms]


def _check_nonsingular(a: Atom) -> None:
    """LAPACK's trtrs raises where the diagonal has a zero; so does this, at run time
    (reading the n diagonal elements alone, a strided slice)."""
    diagonal = _diagonal(a, 0, 0, 1)
    zero = E.eq(diagonal, const(0, diagonal.type))
    first = R.argmax(convert(zero, int64), axis=0)
    K.check(E.not_(R.reduce_max(zero, axes=(0,))), first, exc="LinAlgError",
            fmt="singular matrix: resolution failed at diagonal {}")


def _triangular(a: Atom, b: Atom, lower: bool, transpose: bool, unit: bool,
                check: bool = True) -> Atom:
    """``op(a) x = b`` for a square ``a`` and ``b`` of shape (n,) or (n, k)."""
    sa, sb = a.type.shape, b.type.shape
    if len(sa) != 2 or sa[0] != sa[1]:
        raise ValueError("expected square matrix")
    if len(sb) not in (1, 2) or sb[0] != sa[0]:
        if len(sb) > 2 and sb[0] == sa[0]:
            raise UnsupportedError("scipy.linalg's solves of right-hand sides of more than "
                                   "2 dimensions are not supported",
                                   hint="reshape b to (n, k) and back")
        raise ValueError(f"shapes of a {sa} and b {sb} are incompatible")
    if check and not unit:
        _check_nonsingular(a)
    rhs = S.reshape(b, shape=(sb[0], 1)) if len(sb) == 1 else b
    x = L.triangular_solve(a, rhs, left_side=True, lower=lower, transpose_a=transpose,
                           unit_diagonal=unit)
    return S.reshape(x, shape=sb) if len(sb) == 1 else x


_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def _transposed_from(a: Atom) -> Atom | None:
    """The matrix whose transpose ``a`` is, when the block being staged made it so
    (``low.T``).  SciPy hands such a view to LAPACK as it is, with the other triangle
    and the other ``trans``; so does this, sparing the copy, and reverse mode the
    transpose of its cotangent."""
    for eqn in reversed(current().frame.eqns):
        if a in eqn.outputs:
            perm = eqn.params.get("perm") if eqn.op.name == "transpose" else None
            return eqn.inputs[0] if perm == (1, 0) else None
    return None


@_linalg("solve_triangular")
def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     check_finite: bool = True) -> Atom:
    """Real matrices: the conjugate transpose (trans=2, 'C') is the transpose."""
    trans = static(trans, "trans")
    if trans not in _TRANS:
        raise ValueError(f"Unknown value for trans: {trans!r}")
    a, b = _float_operands(a, b)
    lower, trans = bool(static(lower, "lower")), _TRANS[trans]
    source = _transposed_from(a) if isinstance(a, Var) else None
    if source is not None:
        a, lower, trans = source, not lower, not trans
    return _triangular(a, b, lower, trans, bool(static(unit_diagonal, "unit_diagonal")))


def _factor(a: Any, lower: Any) -> tuple[Atom, bool]:
    """The Cholesky factor of ``a`` read from the triangle ``lower`` names (LAPACK's
    potrf), that triangle of the result holding it and the other zeros."""
    lower = bool(static(lower, "lower"))
    (a,) = _float_operands(a)
    if a.type.ndim != 2 or a.type.shape[0] != a.type.shape[1]:
        raise ValueError("Input array is expected to be square, "
                         f"but has the shape: {a.type.shape}.")
    if lower:
        return L.cholesky(a), True
    return S.transpose(L.cholesky(S.transpose(a, perm=(1, 0))), perm=(1, 0)), False


@_linalg("cholesky")
def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Atom:
    """Upper (U^T U = a, read from a's upper triangle) unless ``lower``."""
    return _factor(a, lower)[0]


@_linalg("cho_factor")
def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Atom, bool]:
    """``(c, lower)`` for ``cho_solve``; c's other triangle holds zeros (SciPy leaves
    whatever a held there, which nothing reads)."""
    return _factor(a, lower)


@_linalg("cho_solve")
def cho_solve(c_and_lower: Any, b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Atom:
    """A = L L^T (lower) or U^T U: two triangular solves reading only that triangle."""
    c, lower = c_and_lower
    lower = bool(static(lower, "lower"))
    c, b = _float_operands(c, b)
    if c.type.ndim != 2 or c.type.shape[0] != c.type.shape[1]:
        raise ValueError("The factored matrix c is not square.")
    if b.type.ndim == 0 or b.type.shape[0] != c.type.shape[0]:
        raise ValueError(f"incompatible dimensions ({c.type.shape} and {b.type.shape})")
    y = _triangular(c, b, lower, not lower, False, check=False)
    return _triangular(c, y, lower, lower, False, check=False)


# -- expm -------------------------------------------------------------------------------

#: Padé [13/13] of exp: b_j = (26 - j)! 13! / (26! j! (13 - j)!), and the 1-norm up to
#: which it is accurate to double precision without scaling (Higham 2005, theta_13).
_PADE = [math.factorial(26 - j) * math.factorial(13)
         / (math.factorial(26) * math.factorial(j) * math.factorial(13 - j)) for j in range(14)]
_THETA_13 = 5.371920351148152


def _identity(n: int, t: TensorType) -> Atom:
    eye = E.eq(S.iota(shape=(n, n), dim=0, dtype=int64), S.iota(shape=(n, n), dim=1, dtype=int64))
    one = E.select(eye, const(1, t), const(0, t))
    return broadcast_to(one, t.shape)


def _poly(terms: list[tuple[float, Atom]]) -> Atom:
    """The sum of ``c * X`` over the terms."""
    total = None
    for c, x in terms:
        term = E.mul(x, const(c, x.type))
        total = term if total is None else E.add(total, term)
    return total


def _squarings(a: Atom) -> Atom:
    """How many times to halve ``a`` (the largest of a batch): its 1-norm over theta_13,
    rounded up to a power of two; 0 for a small or non-finite norm (the result is then
    NaN or inf without help).  A constant of the derivative (it is an integer)."""
    t = a.type
    columns = R.reduce_sum(E.abs_(a), axes=(t.ndim - 2,))
    norm = R.reduce_max(columns, axes=tuple(range(columns.type.ndim)))
    s = E.ceil(E.log2(E.div(norm, const(_THETA_13, norm.type))))
    finite = E.eq(E.sub(s, s), const(0, s.type))
    s = E.select(E.and_(finite, E.gt(s, const(0, s.type))), s, const(0, s.type))
    return AD.stop_gradient(s)


@_linalg("expm")
def expm(A: Any) -> Atom:
    """Scaling and squaring with a Padé [13/13] approximant: exp(A) = r(A / 2^s)^(2^s)."""
    (a,) = _float_operands(A)
    t = a.type
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError("expected a square matrix" if t.ndim >= 2 else
                         "The input array must be at least two-dimensional")
    if t.dtype != float64:
        return convert(expm(convert(a, float64)), t.dtype)
    s = _squarings(a)
    a = E.mul(a, E.pow_(const(2.0, s.type), E.neg(s)))
    eye = _identity(t.shape[-1], t)
    a2 = matmul(a, a)
    a4 = matmul(a2, a2)
    a6 = matmul(a4, a2)
    b = _PADE
    u = matmul(a, E.add(matmul(a6, _poly([(b[13], a6), (b[11], a4), (b[9], a2)])),
                        _poly([(b[7], a6), (b[5], a4), (b[3], a2), (b[1], eye)])))
    v = E.add(matmul(a6, _poly([(b[12], a6), (b[10], a4), (b[8], a2)])),
              _poly([(b[6], a6), (b[4], a4), (b[2], a2), (b[0], eye)]))
    r = solve(E.sub(v, u), E.add(v, u))
    count = convert(s, int64)
    body = current().block([TensorType((), int64), r.type], lambda i, x: matmul(x, x))
    zero, one = (Lit(np.asarray(k, np.int64), TensorType((), int64)) for k in (0, 1))
    return current().emit("for_loop", [zero, count, one, r], {"body": body})[0]

