"""What every NumPy mapping needs: the registries, operand typing, promotion, broadcasting.

A mapping is a Python function with the signature of the NumPy callable it stands for.
It receives *values* — IR operands (``Var``/``Lit``) for what is dynamic, plain Python
and NumPy objects for what is static — emits primitives into the current builder, and
returns IR operands (or static Python values, e.g. for ``.shape``).

Registries, keyed by object identity of what a name resolves to:

* ``CALLABLES``  — ``np.tanh``, ``np.linalg.solve``, ``math.exp``, ``builtins.abs`` ...
* ``METHODS``    — ndarray methods by name (``sum``, ``reshape`` ...), ``fn(self, ...)``
* ``ATTRIBUTES`` — ndarray attributes by name (``shape``, ``T`` ...), ``fn(self)``
* ``OPERATORS``  — Python operators by ``operator`` module name (``add``, ``matmul``,
  ``neg``, ``getitem`` ...).  Operators keep Python's weak-scalar results; NumPy
  callables return strong NumPy values.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ConcretizationError, ShapeError, UnsupportedError
from ..ir.builder import as_atom
from ..ir.core import Atom, Lit, Var
from ..ir.types import DType, TensorType, broadcast_shapes, dtype, float64, result_type
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import shape as S

CALLABLES: dict[Any, Callable] = {}
METHODS: dict[str, Callable] = {}
ATTRIBUTES: dict[str, Callable] = {}
OPERATORS: dict[str, Callable] = {}


def register(*objs: Any) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the mapping of each of ``objs`` (e.g. ``np.max, np.amax``)."""

    def deco(fn: Callable) -> Callable:
        for obj in objs:
            if obj in CALLABLES:
                raise ValueError(f"{obj!r} mapped twice")
            CALLABLES[obj] = fn
        return fn

    return deco


#: Callables that write into their first argument and return None (``np.copyto``,
#: ``np.add.at`` ...): their mapping returns the argument's new content, which the
#: frontend stores into it.
WRITES_FIRST: set[Any] = set()


def writer(*objs: Any) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the mapping of callables that write into their first argument."""
    WRITES_FIRST.update(objs)
    return register(*objs)


def method(*names: str) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        for n in names:
            METHODS[n] = fn
        return fn

    return deco


def attribute(name: str) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        ATTRIBUTES[name] = fn
        return fn

    return deco


def operator_(*names: str) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        for n in names:
            if not hasattr(operator, n):
                raise ValueError(f"operator.{n} does not exist")
            OPERATORS[n] = fn
        return fn

    return deco


# -- operands -----------------------------------------------------------------------


def is_dynamic(x: Any) -> bool:
    return isinstance(x, Var)


def typeof(x: Any) -> TensorType:
    """The type of an operand or constant (Python scalars are weak)."""
    return as_atom(x).type


def shape_of(x: Any) -> tuple[int, ...]:
    return typeof(x).shape


def convert(x: Any, dt: DType, weak: bool = False) -> Atom:
    """``x`` as dtype ``dt``; constants are converted at compile time."""
    a = as_atom(x)
    t = a.type
    if t.dtype == dt and t.weak == weak:
        return a
    if isinstance(a, Lit):
        with np.errstate(all="ignore"):
            return Lit(a.value.astype(dt.np), TensorType(t.shape, dt, weak))
    return E.convert(a, dtype=dt, weak=weak)


def strong(x: Atom) -> Atom:
    """A NumPy (non-weak) value: what ``np.asarray`` of a Python scalar gives."""
    t = as_atom(x).type
    return convert(x, t.dtype, False) if t.weak else as_atom(x)


def promote(*xs: Any) -> tuple[list[Atom], TensorType]:
    """Operands converted to their common NumPy 2 result type (weak only if all are)."""
    atoms = [as_atom(x) for x in xs]
    rt = result_type(*(a.type for a in atoms))
    out = []
    for x, a in zip(xs, atoms, strict=True):
        if a.type.weak and a.type.dtype.is_int and rt.dtype.is_int and not rt.weak:
            _check_fits(x, a, rt.dtype)
        out.append(convert(a, rt.dtype, rt.weak))
    return out, rt


def _check_fits(x: Any, a: Atom, dt: DType) -> None:
    """A Python int meeting a narrower NumPy int must fit, or NumPy raises OverflowError:
    at compile time for a constant, at run time for a run-time Python int."""
    info = np.iinfo(dt.np)
    if info.min <= np.iinfo(a.type.dtype.np).min and np.iinfo(a.type.dtype.np).max <= info.max:
        return
    message = "Python integer {} out of bounds for " + dt.name
    if not isinstance(a, Var):
        value = int(a.value)
        if not info.min <= value <= info.max:
            raise OverflowError(message.format(value))
        return
    fits = E.and_(E.ge(a, Lit(info.min, a.type)), E.le(a, Lit(info.max, a.type)))
    C.check(fits, a, exc="OverflowError", fmt=message)


def to_float(rt: TensorType) -> DType:
    """The dtype a float-only ufunc computes in for operands of result type ``rt``."""
    if rt.dtype.is_float:
        return rt.dtype
    if rt.dtype.is_bool and not rt.weak:
        raise UnsupportedError(
            "NumPy computes this on booleans in float16, which pullback does not support",
            hint="convert first, e.g. x.astype(np.float32)",
        )
    return float64


# -- shapes -------------------------------------------------------------------------


def broadcast_to(x: Any, shape: Sequence[int]) -> Atom:
    """``np.broadcast_to`` semantics: ``x``'s shape aligned on the right of ``shape``."""
    a = as_atom(x)
    shape = tuple(shape)
    src = a.type.shape
    if src == shape:
        return a
    if len(src) > len(shape):
        raise ShapeError(f"cannot broadcast array of shape {src} to shape {shape}")
    dims = tuple(range(len(shape) - len(src), len(shape)))
    return S.broadcast_in_dim(a, shape=shape, dims=dims)


def broadcast_args(*xs: Any) -> list[Atom]:
    """Operands broadcast to their common shape; 0-d operands stay 0-d (ops splat them)."""
    atoms = [as_atom(x) for x in xs]
    shape = broadcast_shapes(*(a.type.shape for a in atoms))
    return [a if a.type.shape == () else broadcast_to(a, shape) for a in atoms]


def normalize_axis(axis: int, ndim: int) -> int:
    """A non-negative axis; NumPy's AxisError when out of range."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an integer")
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return int(axis) % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted unique axes from NumPy's ``axis=None | int | tuple``."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        out = tuple(normalize_axis(a, ndim) for a in axis)
        if len(set(out)) != len(out):
            raise ValueError("duplicate value in 'axis'")
        return tuple(sorted(out))
    return (normalize_axis(axis, ndim),)


def static(x: Any, what: str) -> Any:
    """A compile-time value: constants unwrapped, run-time values refused."""
    if isinstance(x, Var):
        raise ConcretizationError(
            f"{what} must be known at compile time, but it is a run-time value of type {x.type}",
            hint="the shape or type of the result would depend on data; compute it from "
            "shapes or pass a Python number",
        )
    if isinstance(x, Lit):
        return x.value.item() if x.type.shape == () else x.value
    if isinstance(x, (list, tuple)):
        return type(x)(static(e, what) for e in x)
    return x


def static_dtype(dt: Any) -> DType | None:
    """A ``dtype=`` argument as a DType (None stays None)."""
    return None if dt is None else dtype(dt)
