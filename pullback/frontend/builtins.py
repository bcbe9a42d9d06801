"""The builtins staging implements itself, where plain Python's would need concrete
values or would change what a compiled function does: ``len`` and ``range`` of run-time
sizes, ``zip``/``enumerate``/``reversed`` of loops that stay rolled, ``int()``/``float()``
/``bool()`` of run-time numbers, ``print`` at run time, ``isinstance`` of cells, and
refusals where no faithful staging exists.  Each handler takes the stager first."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .. import tree as T
from ..errors import ConcretizationError, UnsupportedError, users_call
from ..ir.builder import current
from ..ir.core import Lit
from ..ir.types import bool_, float64, int64
from ..numpy_api import ATTRIBUTES, METHODS
from ..numpy_api.core import convert
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import shape as S
from .interface import Staging
from .iteration import Counted, enumerate_counted, range_counted, reversed_counted, zip_counted
from .lifting import concrete, has_ref
from .values import DynStr, Ref


def _representative(ref: Ref) -> Any:
    """A concrete value of the cell's Python type, for isinstance/type."""
    t = ref.type
    if t.weak:
        return {"b": False, "i": 0, "f": 0.0}[t.dtype.kind]
    arr = np.zeros(t.shape, t.dtype.np)
    return arr[()] if ref.kind == "scalar" else arr


def _print(st: Staging, *args, sep=" ", end="\n", file=None, flush=False) -> None:
    if file is not None or has_ref([sep, end]):
        raise UnsupportedError("print to a file, or with run-time sep/end, is not supported")
    parts, operands = [], []
    for a in args:
        if isinstance(a, Ref):
            parts.append("{}")
            operands.append(a.get())
        elif isinstance(a, DynStr):
            parts.append(a.fmt)
            operands.extend(r.get() for r in a.args)
        else:
            if has_ref(a):
                raise UnsupportedError("printing a container of run-time arrays",
                                       hint="print the arrays one by one")
            parts.append(str(a).replace("{", "{{").replace("}", "}}"))
    C.debug_print(*operands, fmt=str(sep).replace("{", "{{").replace("}", "}}").join(parts)
                  + str(end).replace("{", "{{").replace("}", "}}"))


def _len(st: Staging, x) -> int:
    if isinstance(x, Ref):
        if not x.type.shape:
            raise TypeError("len() of unsized object")
        return x.type.shape[0]
    if isinstance(x, Counted):
        return st.static_value(x.length if isinstance(x.length, Ref) else x.length,
                               "the length")
    return len(x)


def _range(st: Staging, *args) -> Any:
    if not has_ref(args):
        return users_call(range, *args)
    for a in args:
        if isinstance(a, Ref) and not a.type.dtype.is_int and not a.type.dtype.is_bool:
            raise TypeError(f"'{a.type.dtype.name}' object cannot be interpreted as an "
                            "integer")
        if isinstance(a, Ref) and a.type.shape:  # NumPy's __index__ of a sized array
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
    lo, hi, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    static = [concrete(a) for a in (lo, hi, step)]
    if all(s is not None for s in static):
        return range(*(int(s) for s in static))
    return range_counted(lo, hi, step)


def _zip(st: Staging, *its, strict=False):
    parts = [st.iterable(i, None) for i in its]
    if all(isinstance(p, list) for p in parts):
        return list(zip(*parts, strict=strict))
    counted = [p if isinstance(p, Counted) else Counted(len(p), p.__getitem__) for p in parts]
    if all(c.static_length is not None for c in counted):
        return list(zip(*(c.items() for c in counted), strict=strict))
    return zip_counted(counted)


def _enumerate(st: Staging, it, start=0):
    p = st.iterable(it, None)
    if isinstance(p, list):
        return list(enumerate(p, start))
    return enumerate_counted(p, start)


def _reversed(st: Staging, it):
    if isinstance(it, (list, tuple)) and not isinstance(it, Counted):
        return list(reversed(it))
    p = st.iterable(it, None)
    if isinstance(p, list):
        return list(reversed(p))
    return reversed_counted(p)


def _isinstance(st: Staging, obj, cls) -> bool:
    if has_ref(cls):
        raise TypeError("isinstance() arg 2 must be a type")
    return isinstance(_representative(obj) if isinstance(obj, Ref) else obj, cls)


def _type(st: Staging, obj, *rest):
    if rest:
        raise UnsupportedError("type() with three arguments cannot be compiled")
    return type(_representative(obj) if isinstance(obj, Ref) else obj)


def _scalar(kind: str):
    def conv(st: Staging, x=0, *rest):
        if rest or not isinstance(x, Ref):
            if has_ref(rest):
                raise ConcretizationError(f"{kind}() of run-time values")
            return users_call({"int": int, "float": float, "bool": bool}[kind], x, *rest)
        c = concrete(x)
        if c is not None:
            return users_call({"int": int, "float": float, "bool": bool}[kind], c)
        if x.type.size != 1:
            raise TypeError("only length-1 arrays can be converted to Python scalars")
        if kind == "bool":
            return Ref(convert(st.truth(x), bool_, True))
        a = x.get()
        if a.type.shape != ():
            a = S.reshape(a, shape=())
        if kind == "int":
            if a.type.dtype.is_float:
                a = E.trunc(a)
                _check_fits_int64(a)
            return Ref(convert(a, int64, True))
        return Ref(convert(a, float64, True))
    return conv


def _check_fits_int64(t) -> None:
    """``int()`` of a run-time float, whose result is an int64 in compiled code: NaN and
    the infinities raise what Python raises; a value an int64 cannot hold (Python's exact
    int) raises OverflowError instead of wrapping."""
    dt = t.type.dtype.np
    C.check(E.eq(t, t), exc="ValueError", fmt="cannot convert float NaN to integer")
    C.check(E.lt(E.abs_(t), Lit(np.asarray(np.inf, dt))), exc="OverflowError",
            fmt="cannot convert float infinity to integer")
    big = Lit(np.asarray(2.0 ** 63, dt))
    where = str(current().loc).replace("{", "{{").replace("}", "}}")
    C.check(E.and_(E.ge(t, E.neg(big)), E.lt(t, big)), t, exc="OverflowError",
            fmt=f"int() of {{}} at {where} does not fit in the 64-bit integer compiled code "
            "holds it in (Python's int would be exact)")


def _any_all(is_all: bool):
    def fn(st: Staging, items):
        out: Any = is_all
        for item in st.unroll(items, None):
            t = st.truth(item)
            if isinstance(t, bool):
                if t != is_all:
                    return t
                continue
            out = t if isinstance(out, bool) else (E.and_(out, t) if is_all else E.or_(out, t))
        return out if isinstance(out, bool) else Ref(convert(out, bool_, True))
    return fn


def _map(st: Staging, fn, *its):
    lists = [st.unroll(i, None) for i in its]
    return st.new([st.call(fn, list(args), {}) for args in zip(*lists, strict=False)])


def _filter(st: Staging, fn, it):
    out = []
    for x in st.unroll(it, None):
        t = st.truth(x if fn is None else st.call(fn, [x], {}))
        if not isinstance(t, bool):
            raise ConcretizationError("filter() on run-time values gives a data-dependent "
                                      "length", hint="use np.where")
        if t:
            out.append(x)
    return st.new(out)


def _tree_map(st: Staging, fn, tree, *rest, is_leaf=None):
    """``tree_map`` whose function (and ``is_leaf``) are staged at each leaf; the
    structure is compile-time, so the map is unrolled."""
    def leaf_test(x: Any) -> bool:
        t = st.truth(st.call(is_leaf, [x], {}))
        if not isinstance(t, bool):
            raise ConcretizationError("tree_map: is_leaf must decide from structure, not "
                                      "from run-time values")
        return t

    return st.new(T.tree_map(lambda *xs: st.call(fn, list(xs), {}), tree, *rest,
                             is_leaf=None if is_leaf is None else leaf_test))


def _natively(fn):
    """A pytree function that only moves leaves around: run as it is, cells and all."""
    return lambda st, *args, **kwargs: fn(*args, **kwargs)


def _getattr(st: Staging, obj, name, *default):
    try:
        return st.getattr(obj, name)
    except AttributeError:
        if default:
            return default[0]
        raise


def _hasattr(st: Staging, obj, name) -> bool:
    if isinstance(obj, Ref):
        return name in ATTRIBUTES or name in METHODS
    return hasattr(obj, name)


def _setattr(st: Staging, obj, name, value) -> None:
    st.check_mutable(obj, f"setting .{name}")
    setattr(obj, name, value)


def _refuse(what: str, hint: str):
    def fn(st: Staging, *args, **kwargs):
        if has_ref(args) or what == "super":
            raise UnsupportedError(f"{what}() cannot be compiled here", hint=hint)
        return getattr(builtins, what)(*args, **kwargs)
    return fn


#: What the builtins the frontend stages itself do, by builtin.
BUILTINS = {
    print: _print, len: _len, range: _range, zip: _zip, enumerate: _enumerate,
    reversed: _reversed, isinstance: _isinstance, type: _type, int: _scalar("int"),
    float: _scalar("float"), bool: _scalar("bool"), any: _any_all(False),
    all: _any_all(True), map: _map, filter: _filter, getattr: _getattr, hasattr: _hasattr,
    setattr: _setattr, iter: _refuse("iter", "use a for loop"),
    next: _refuse("next", "use a for loop"), super: _refuse("super", "call the base class "
                                                            "method explicitly"),
    id: _refuse("id", "arrays have no identity at compile time"),
    hash: _refuse("hash", "arrays are unhashable"),
    T.tree_map: _tree_map,
    **{f: _natively(f) for f in (T.tree_flatten, T.tree_unflatten, T.tree_leaves,
                                 T.tree_structure, T.frozen_leaves)},
}
