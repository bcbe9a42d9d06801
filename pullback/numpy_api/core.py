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
* ``SUBSCRIPTS`` — NumPy objects indexed to build arrays (``np.r_[a, 0, b]``), keyed by
  ``id`` (they are module-level singletons), ``fn(items)`` with the index's items.
"""

from __future__ import annotations

import functools
import inspect
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
SUBSCRIPTS: dict[int, Callable] = {}


def register(*objs: Any) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the mapping of each of ``objs`` (e.g. ``np.max, np.amax``);
    NumPy's and SciPy's callables see their array-like arguments coerced (``_coercing``)."""

    def deco(fn: Callable) -> Callable:
        for obj in objs:
            if obj in CALLABLES:
                raise ValueError(f"{obj!r} mapped twice")
            module = (getattr(obj, "__module__", None) or "").split(".")[0]
            numpy_like = isinstance(obj, np.ufunc) or module in ("numpy", "scipy")
            CALLABLES[obj] = _coercing(fn) if numpy_like else fn
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
            METHODS[n] = _coercing(fn)
        return fn

    return deco


#: The names NumPy gives its array_like parameters.  A list or tuple passed for one of
#: them is an array to NumPy (``np.sum([1, a * a, 2])``, ``np.std([x, y])``), whereas a
#: sequence parameter (``np.stack(arrays)``, ``np.vstack(tup)``) iterates its items.
ARRAY_LIKE = frozenset({
    "a", "A", "arr", "array", "ary", "b", "condition", "fill_value", "m", "mean",
    "prototype", "sorter", "to_begin", "to_end", "v", "values", "weights", "where", "x",
    "x1", "x2", "xp", "fp", "y", "p",
})


def _coercing(fn: Callable) -> Callable:
    """``fn`` with a list or tuple given for an array_like parameter made an array first,
    as NumPy does; ``fn`` itself if it has no such parameter."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    named = [p for p in params if p.name in ARRAY_LIKE and p.kind != p.VAR_POSITIONAL
             and p.kind != p.VAR_KEYWORD]
    if not named:
        return fn
    positions = [params.index(p) for p in named if p.kind != p.KEYWORD_ONLY]
    names = {p.name for p in named}

    @functools.wraps(fn)
    def coerced(*args: Any, **kwargs: Any) -> Any:
        args = tuple(as_array(x) if i in positions and isinstance(x, (list, tuple)) else x
                     for i, x in enumerate(args))
        kwargs = {k: as_array(x) if k in names and isinstance(x, (list, tuple)) else x
                  for k, x in kwargs.items()}
        return fn(*args, **kwargs)

    return coerced


def subscript(obj: Any) -> Callable[[Callable], Callable]:
    """Register ``fn`` as what ``obj[items]`` means (``np.r_``, ``np.c_``)."""

    def deco(fn: Callable) -> Callable:
        SUBSCRIPTS[id(obj)] = fn
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
            OPERATORS[n] = _coercing(fn)  # an array's other operand: [a, b] @ m
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


# -- array coercion ---------------------------------------------------------------------


def _leaf(x: Any) -> Atom:
    """One element of a nested list as NumPy's array coercion sees it: Python scalars
    take their default dtype (they are not weak here)."""
    if isinstance(x, (Var, Lit)):
        return strong(x)
    if isinstance(x, (bool, int, float, np.generic, np.ndarray)):
        return Lit(np.asarray(x))
    raise TypeError(f"cannot make an array of {type(x).__name__} {x!r}")


def _has_var(x: Any) -> bool:
    if isinstance(x, (list, tuple)):
        return any(_has_var(e) for e in x)
    return isinstance(x, Var)


def _nested(x: Any) -> Any:
    """Nested lists with every leaf an atom."""
    if isinstance(x, (list, tuple)):
        return [_nested(e) for e in x]
    return _leaf(x)


def _leaves(x: Any) -> list[Atom]:
    if isinstance(x, list):
        return [a for e in x for a in _leaves(e)]
    return [x]


def _assemble(x: Any, dt: DType) -> Atom:
    """Stack nested lists of same-shaped atoms along new leading axes."""
    if not isinstance(x, list):
        return convert(x, dt)
    parts = [_assemble(e, dt) for e in x]
    shapes = {p.type.shape for p in parts}
    if len(shapes) > 1:
        raise ValueError(
            "setting an array element with a sequence. The requested array has an "
            f"inhomogeneous shape: elements of shapes {sorted(shapes)}"
        )
    inner = shapes.pop() if shapes else ()
    if not parts:
        return broadcast_to(Lit(np.zeros((), dt.np)), (0, *inner))
    rows = [S.reshape(p, shape=(1, *inner)) for p in parts]
    return rows[0] if len(rows) == 1 else S.concatenate(*rows, axis=0)


def as_array(obj: Any, dt: DType | None = None, copy: bool | None = True,
             ndmin: int = 0) -> Atom:
    """NumPy's array coercion of IR values, constants and nested lists of them."""
    if not _has_var(obj):  # all constant: coerce now, so static indices stay static
        if copy is False and isinstance(obj, (list, tuple)):
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        return Lit(np.array(static(obj, "a constant"), None if dt is None else dt.np,
                            ndmin=ndmin))
    nested = _nested(obj)
    leaves = _leaves(nested)
    if dt is None:
        dt = result_type(*(a.type for a in leaves)).dtype if leaves else float64
    if copy is False and (isinstance(obj, (list, tuple)) or leaves[0].type.dtype != dt):
        raise ValueError("Unable to avoid copy while creating an array as requested.")
    out = _assemble(nested, dt)
    shape = out.type.shape
    if len(shape) < ndmin:
        out = S.reshape(out, shape=(1,) * (ndmin - len(shape)) + shape)
    return out


def operand(x: Any) -> Any:
    """A function argument as NumPy sees it: lists and tuples are arrays."""
    return as_array(x) if isinstance(x, (list, tuple)) else x


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
