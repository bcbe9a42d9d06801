"""Numerical routines built from other mappings: comparisons with tolerances, piecewise
choices, polynomials, quadrature, interpolation, finite differences, covariances, open
meshes and the real/imaginary parts of real arrays.

Each is NumPy's own algorithm written with the mappings of the NumPy calls it makes
(``CALLABLES[np.xxx]``), in the same order of operations, so values round as NumPy's
do, dtypes follow NumPy's promotion, and derivatives, batching and compilation come from
the primitives underneath.  Sizes, axes and ``kth``-like arguments are static.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.core import Atom, Lit, Var
from ..ir.types import bool_, dtype, float64, result_type
from ..ops import elementwise as E
from .core import (
    CALLABLES,
    OPERATORS,
    as_array,
    attribute,
    broadcast_to,
    convert,
    method,
    normalize_axis,
    register,
    static,
    static_dtype,
    strong,
    typeof,
)
from .manip import concatenate, ravel, reshape_to, slice_axis, transpose_to


def np_(fn: Callable) -> Callable:
    """The mapping of a NumPy callable, to write NumPy's algorithms with."""
    return CALLABLES[fn]


def _row(a: Atom, i: int) -> Atom:
    """``a[i]`` for a static in-range ``i``: a slice, not a gather."""
    return reshape_to(slice_axis(a, 0, i, i + 1), a.type.shape[1:])


# -- tolerances ---------------------------------------------------------------------------


@register(np.isclose)
def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
            equal_nan: bool = False) -> Atom:
    x, y = as_array(a), as_array(b)
    if not y.type.dtype.is_float:  # NumPy compares in at least float64
        y = convert(y, result_type(y.type, typeof(1.0)).dtype, y.type.weak)
    absolute = np_(np.absolute)
    within = np_(np.less_equal)(absolute(np_(np.subtract)(x, y)),
                                np_(np.add)(atol, np_(np.multiply)(rtol, absolute(y))))
    result = np_(np.logical_or)(np_(np.logical_and)(within, np_(np.isfinite)(y)),
                                np_(np.equal)(x, y))
    if equal_nan:
        both = np_(np.logical_and)(np_(np.isnan)(x), np_(np.isnan)(y))
        result = np_(np.logical_or)(result, both)
    return result


@register(np.allclose)
def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
             equal_nan: bool = False) -> Atom:
    """A Python bool, as NumPy returns."""
    close = isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return convert(np_(np.all)(close), bool_, weak=True)


# -- real and imaginary parts of real values ----------------------------------------------
# (pullback has no complex dtypes: complex constants and arguments are refused on entry)


def _atom(x: Any) -> Atom:
    return x if isinstance(x, (Var, Lit)) else as_array(x)


@register(np.real)
def real(val: Any) -> Atom:
    """A real value is its own real part (a Python float stays one)."""
    return _atom(val)


@register(np.imag)
def imag(val: Any) -> Atom:
    """Zeros of the value's type: the imaginary part of a real value."""
    x = _atom(val)
    zero = convert(Lit(np.zeros((), x.type.dtype.np)), x.type.dtype, x.type.weak)
    return broadcast_to(zero, x.type.shape)


@register(np.conjugate)
def conjugate(x: Any, out: None = None) -> Atom:
    """The ufunc: a strong value; booleans come back as int8, as NumPy's loop casts them
    (which pullback refuses: it has no int8)."""
    if out is not None:
        raise UnsupportedError("np.conjugate(out=) is not supported",
                               hint="assign the result instead")
    a = strong(as_array(x))
    return convert(a, dtype(np.int8)) if a.type.dtype == bool_ else a


method("conj", "conjugate")(lambda self: conjugate(self))
attribute("real")(real)
attribute("imag")(imag)


@method("item")
def item(self: Any, *args: Any) -> Atom:
    """One element as a Python scalar: ``a.item()`` of a size-1 array, ``a.item(i)`` by
    flat index, ``a.item(i, j, ...)`` or ``a.item((i, j, ...))`` by position."""
    a = as_array(self)
    if len(args) == 1 and isinstance(args[0], tuple):
        args = args[0]
    if not args:
        if a.type.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        one = reshape_to(a, ())
    elif len(args) == 1:
        one = OPERATORS["getitem"](ravel(a), args[0])
    elif len(args) == a.type.ndim:
        one = OPERATORS["getitem"](a, tuple(args))
    else:
        raise ValueError("incorrect number of indices for array")
    python_type = {"b": bool, "i": int, "u": int, "f": float}[a.type.dtype.np.kind]
    return convert(one, typeof(python_type(0)).dtype, weak=True)


# -- choosing ------------------------------------------------------------------------------


@register(np.select)
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Atom:
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(choicelist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    choices = [as_array(c) for c in choicelist]
    conds = [as_array(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.type.dtype != bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    fallback = default if isinstance(default, (Var, Lit)) else as_array(default) \
        if isinstance(default, (list, tuple, np.ndarray)) else Lit(default)
    rt = result_type(*(c.type for c in choices), fallback.type)
    out = convert(fallback, rt.dtype)
    where = np_(np.where)
    for cond, choice in zip(reversed(conds), reversed(choices), strict=True):
        out = where(cond, convert(choice, rt.dtype), out)
    shape = np.broadcast_shapes(*(a.type.shape for a in (*conds, *choices, fallback)))
    return broadcast_to(out, shape)


# -- polynomials and quadrature ------------------------------------------------------------


@register(np.polyval)
def polyval(p: Any, x: Any) -> Atom:
    """Horner's rule over the (static number of) coefficients."""
    coeffs = as_array(p)
    x = strong(as_array(x))
    y = np_(np.zeros_like)(x)
    for i in range(coeffs.type.shape[0] if coeffs.type.ndim else 1):
        c = coeffs if coeffs.type.ndim == 0 else _row(coeffs, i)
        y = np_(np.add)(np_(np.multiply)(y, x), c)
    return y


@register(np.trapezoid)
def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Atom:
    y = strong(as_array(y))
    ax = normalize_axis(axis, y.type.ndim)
    n = y.type.shape[ax]
    if x is None:
        d = dx
    else:
        x = as_array(x)
        if x.type.ndim == 1:
            d = np_(np.diff)(x)
            d = reshape_to(d, [d.type.shape[0] if k == ax else 1 for k in range(y.type.ndim)])
        else:
            d = np_(np.diff)(x, axis=ax)
    upper = slice_axis(y, ax, min(1, n), n)
    lower = slice_axis(y, ax, 0, max(n - 1, 0))
    mean_heights = np_(np.true_divide)(np_(np.add)(upper, lower), 2.0)
    return np_(np.sum)(np_(np.multiply)(d, mean_heights), axis=ax)


# -- interpolation -------------------------------------------------------------------------


@register(np.interp)
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Atom:
    """Piecewise-linear, with NumPy's order of operations (``slope * (x - xp[j]) + fp[j]``)
    and its exact values at the last knot and outside the knots."""
    if period is not None:
        raise UnsupportedError("np.interp(period=) is not supported",
                               hint="reduce x and xp modulo the period and sort them first")
    x, xp, fp = (convert(as_array(v), float64) for v in (x, xp, fp))
    if x.type.ndim == 0:  # as a 1-element array, so the lookups gather rows
        return reshape_to(interp(reshape_to(x, (1,)), xp, fp, left, right), ())
    if xp.type.ndim != 1 or fp.type.ndim != 1:
        raise ValueError("object too deep for desired array")
    n = xp.type.shape[0]
    if n == 0:
        raise ValueError("array of sample points is empty")
    if fp.type.shape[0] != n:
        raise ValueError("fp and xp are not of the same length.")
    take, where = np_(np.take), np_(np.where)
    first, last = _row(fp, 0), _row(fp, n - 1)
    below = first if left is None else convert(left, float64)
    above = last if right is None else convert(right, float64)
    if n == 1:
        inside = broadcast_to(first, x.type.shape)
    else:
        j = np_(np.clip)(np_(np.subtract)(np_(np.searchsorted)(xp, x, side="right"), 1),
                         0, n - 2)
        x0, f0 = take(xp, j), take(fp, j)
        slope = np_(np.true_divide)(np_(np.subtract)(take(fp, np_(np.add)(j, 1)), f0),
                                    np_(np.subtract)(take(xp, np_(np.add)(j, 1)), x0))
        inside = np_(np.add)(np_(np.multiply)(slope, np_(np.subtract)(x, x0)), f0)
        inside = where(np_(np.equal)(x, _row(xp, n - 1)), last, inside)
    out = where(np_(np.less)(x, _row(xp, 0)), below, inside)
    return where(np_(np.greater)(x, _row(xp, n - 1)), above, out)


# -- finite differences ---------------------------------------------------------------------


def _spacing(h: Any, n: int, ax: int) -> tuple[Atom, bool]:
    """A spacing argument of ``np.gradient``: a scalar step, or the differences of a
    coordinate array; whether it is uniform (known only for constants: a run-time
    coordinate array takes the general formula, exact for any spacing)."""
    h = as_array(h)
    if h.type.ndim == 0:
        return h, True
    if h.type.ndim != 1:
        raise ValueError("distances must be either scalars or 1d")
    if h.type.shape[0] != n:
        raise ValueError("when 1d, distances must match the length of the corresponding "
                         "dimension")
    if h.type.dtype.is_int:
        h = convert(h, float64)
    steps = np_(np.diff)(h)
    if isinstance(steps, Lit) and (steps.value == steps.value.flat[0]).all():
        return Lit(np.asarray(steps.value.flat[0])), True
    return steps, False


def _shaped(h: Atom, ax: int, ndim: int) -> Atom:
    """1-d steps laid along axis ``ax`` of an ``ndim``-d array."""
    return reshape_to(h, [h.type.shape[0] if k == ax else 1 for k in range(ndim)])


def _gradient_axis(f: Atom, h: Atom, uniform: bool, ax: int, edge_order: int) -> Atom:
    add, sub, mul, div = (np_(g) for g in (np.add, np.subtract, np.multiply, np.true_divide))
    n, nd = f.type.shape[ax], f.type.ndim

    def at(i: int) -> Atom:
        i %= n
        return slice_axis(f, ax, i, i + 1)

    def combo(a: Any, b: Any, c: Any, fs: tuple[Atom, Atom, Atom]) -> Atom:
        return add(add(mul(a, fs[0]), mul(b, fs[1])), mul(c, fs[2]))

    lo, mid, hi = slice_axis(f, ax, 0, n - 2), slice_axis(f, ax, 1, n - 1), slice_axis(f, ax, 2, n)
    if uniform:
        interior = div(sub(hi, lo), mul(2.0, h))
    else:
        dx1 = _shaped(slice_axis(h, 0, 0, n - 2), ax, nd)
        dx2 = _shaped(slice_axis(h, 0, 1, n - 1), ax, nd)
        a = div(np_(np.negative)(dx2), mul(dx1, add(dx1, dx2)))
        b = div(sub(dx2, dx1), mul(dx1, dx2))
        c = div(dx1, mul(dx2, add(dx1, dx2)))
        interior = combo(a, b, c, (lo, mid, hi))
    step = (lambda i: h) if uniform else (lambda i: slice_axis(h, 0, i % (n - 1), i % (n - 1) + 1))
    if edge_order == 1:
        start = div(sub(at(1), at(0)), step(0))
        end = div(sub(at(-1), at(-2)), step(-1))
    elif uniform:
        start = combo(div(-1.5, h), div(2.0, h), div(-0.5, h), (at(0), at(1), at(2)))
        end = combo(div(0.5, h), div(-2.0, h), div(1.5, h), (at(-3), at(-2), at(-1)))
    else:
        dx1, dx2 = step(0), step(1)
        a = np_(np.negative)(div(add(mul(2.0, dx1), dx2), mul(dx1, add(dx1, dx2))))
        b = div(add(dx1, dx2), mul(dx1, dx2))
        c = np_(np.negative)(div(dx1, mul(dx2, add(dx1, dx2))))
        start = combo(a, b, c, (at(0), at(1), at(2)))
        dx1, dx2 = step(-2), step(-1)
        a = div(dx2, mul(dx1, add(dx1, dx2)))
        b = np_(np.negative)(div(add(dx2, dx1), mul(dx1, dx2)))
        c = div(add(mul(2.0, dx2), dx1), mul(dx2, add(dx1, dx2)))
        end = combo(a, b, c, (at(-3), at(-2), at(-1)))
    return concatenate([start, interior, end], ax)


@register(np.gradient)
def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    f = strong(as_array(f))
    nd = f.type.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axis = static(axis, "axis")
        axes = tuple(normalize_axis(a, nd) for a in (axis if isinstance(axis, (tuple, list))
                                                     else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError("duplicate value in 'axis'")
    edge_order = operator.index(static(edge_order, "edge_order"))
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    if len(varargs) == 0:
        spacings: Sequence[Any] = [1.0] * len(axes)
    elif len(varargs) == 1 and _atom(varargs[0]).type.ndim == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    otype = f.type.dtype if f.type.dtype.is_float else float64
    f = convert(f, otype)
    outs = []
    for ax, h in zip(axes, spacings, strict=True):
        n = f.type.shape[ax]
        if n < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                             "least (edge_order + 1) elements are required.")
        step, uniform = _spacing(h, n, ax)
        outs.append(convert(_gradient_axis(f, step, uniform, ax, edge_order), otype))
    return outs[0] if len(outs) == 1 else tuple(outs)


# -- covariance -------------------------------------------------------------------------------


def _rows(m: Any, rowvar: bool, dt: Any) -> Atom:
    x = as_array(m)
    if x.type.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    x = convert(x, dt)
    if x.type.ndim < 2:
        x = reshape_to(x, (1,) * (2 - x.type.ndim) + x.type.shape)
    return transpose_to(x, (1, 0)) if not rowvar and x.type.shape[0] != 1 else x


@register(np.cov)
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
        fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> Atom:
    if fweights is not None or aweights is not None:
        raise UnsupportedError("np.cov with fweights/aweights is not supported",
                               hint="weight the centred data yourself")
    if ddof is not None and ddof != int(static(ddof, "ddof")):
        raise ValueError("ddof must be integer")
    dt = static_dtype(dtype) or result_type(typeof(as_array(m)), typeof(np.float64(0))).dtype
    x = _rows(m, rowvar, dt)
    if y is not None:
        x = concatenate([x, _rows(y, rowvar, dt)], 0)
    if x.type.shape[0] == 0:
        return Lit(np.zeros((0, 0), dt.np))
    ddof = (0 if bias else 1) if ddof is None else int(static(ddof, "ddof"))
    fact = max(x.type.shape[1] - ddof, 0)
    centred = np_(np.subtract)(x, reshape_to(np_(np.mean)(x, axis=1), (x.type.shape[0], 1)))
    c = np_(np.dot)(centred, transpose_to(centred, (1, 0)))
    with np.errstate(divide="ignore"):
        scale = np.true_divide(1, np.asarray(fact, dt.np))
    c = E.mul(c, Lit(scale))
    return np_(np.squeeze)(c)


@register(np.corrcoef)
def corrcoef(x: Any, y: Any = None, rowvar: bool = True, bias: Any = np._NoValue,
             ddof: Any = np._NoValue, *, dtype: Any = None) -> Atom:
    c = cov(x, y, rowvar, dtype=dtype)
    div = np_(np.true_divide)
    if c.type.ndim == 0:
        return div(c, c)
    stddev = np_(np.sqrt)(np_(np.diagonal)(c))
    n = stddev.type.shape[0]
    c = div(c, reshape_to(stddev, (n, 1)))
    c = div(c, reshape_to(stddev, (1, n)))
    return np_(np.clip)(c, -1, 1)


# -- open meshes --------------------------------------------------------------------------------


@register(np.ix_)
def ix_(*args: Any) -> tuple[Atom, ...]:
    out = []
    nd = len(args)
    for k, seq in enumerate(args):
        a = as_array(seq) if not isinstance(seq, (Var, Lit)) else seq
        if isinstance(seq, (list, tuple)) and a.type.size == 0:
            a = Lit(np.zeros(0, np.intp))
        if a.type.ndim != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if a.type.dtype == bool_:
            if isinstance(a, Var):
                raise UnsupportedError("np.ix_ of a run-time boolean mask: the result's "
                                       "length depends on the data",
                                       hint="pass integer indices, or a mask known at "
                                       "compile time")
            a = Lit(np.nonzero(a.value)[0])
        out.append(reshape_to(a, [a.type.shape[0] if j == k else 1 for j in range(nd)]))
    return tuple(out)


__all__ = ["allclose", "conjugate", "corrcoef", "cov", "gradient", "imag", "interp",
           "isclose", "item", "ix_", "np_", "polyval", "real", "select", "trapezoid"]
