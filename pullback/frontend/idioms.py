"""Python's functional idioms on run-time values: the ``operator`` module's functions and
its itemgetter/attrgetter/methodcaller, ``functools.reduce``, ``sorted``, ``list.sort``,
``min``/``max`` with ``key=`` or over tuples, and the ``dataclasses``/NamedTuple helpers.

Each handler takes the stager first, as the builtins in ``calls`` do, and stages what
the Python code does, step by step: an ``operator.add`` is the ``+`` of the expression
``a + b``, a ``reduce`` the calls one after the other.  Orderings are decided at compile
time; ``sorted`` refuses keys whose order only the data decides, while ``min`` and
``max`` pick their item at run time, keeping Python's first best item.
"""

from __future__ import annotations

import ast
import builtins
import collections
import copy
import dataclasses
import functools
import operator
from typing import Any

import numpy as np

from ..errors import UnsupportedError, users_call
from ..ir.core import Atom, Lit
from ..ir.types import bool_
from ..numpy_api.core import convert
from ..ops import elementwise as E
from .interface import Staging
from .lifting import has_ref
from .operators import BINOPS, COMPARE, dunder
from .values import DynStr, Ref, is_static_number

_MISSING = object()

# -- the operator module -------------------------------------------------------------

#: ``operator`` functions that are a binary operator of the language, by stager name.
_BINARY = (*BINOPS.values(), *COMPARE.values())
_UNARY = {"neg": "neg", "pos": "pos", "invert": "invert", "inv": "invert", "abs": "abs"}
_INPLACE = {"i" + dunder(n): n for n in BINOPS.values()}


def _binary(name: str):
    return lambda st, a, b: st.binop(name, a, b)


def _unary(name: str):
    return lambda st, a: st.unary(name, a)


def _inplace(name: str):
    return lambda st, a, b: st.inplace(name, a, b)


def _truth(st: Staging, a):
    t = st.truth(a)
    return t if isinstance(t, bool) else Ref(convert(t, bool_, True))


def _contains(st: Staging, a, b):
    return st.compare(ast.In(), b, a)


def _setitem(st: Staging, a, b, c) -> None:
    st.setitem(a, b, c)


OPERATOR_FUNCTIONS: dict[Any, Any] = {
    **{getattr(operator, n): _binary(n) for n in _BINARY},
    **{getattr(operator, n): _unary(u) for n, u in _UNARY.items()},
    **{getattr(operator, n): _inplace(b) for n, b in _INPLACE.items()},
    operator.not_: lambda st, a: st.not_(st.truth(a)),
    operator.truth: _truth,
    operator.is_: lambda st, a, b: a is b,
    operator.is_not: lambda st, a, b: a is not b,
    operator.contains: _contains,
    operator.getitem: lambda st, a, b: st.getitem(a, b),
    operator.setitem: _setitem,
}
if hasattr(operator, "call"):  # Python 3.11+
    OPERATOR_FUNCTIONS[operator.call] = lambda st, fn, /, *args, **kwargs: st.call(
        fn, list(args), kwargs)


def _itemgetter(st: Staging, getter: operator.itemgetter, obj: Any) -> Any:
    keys = getter.__reduce__()[1]
    got = tuple(st.getitem(obj, k) for k in keys)
    return got[0] if len(keys) == 1 else got


def _attrgetter(st: Staging, getter: operator.attrgetter, obj: Any) -> Any:
    got = []
    for dotted in getter.__reduce__()[1]:
        value = obj
        for name in dotted.split("."):
            value = st.getattr(value, name)
        got.append(value)
    return got[0] if len(got) == 1 else tuple(got)


def _methodcaller(st: Staging, caller: operator.methodcaller, obj: Any) -> Any:
    made, args = caller.__reduce__()
    if isinstance(made, functools.partial):  # with keyword arguments
        name, kwargs = made.args[0], dict(made.keywords)
    else:
        (name, *args), kwargs = args, {}
    return st.call(st.getattr(obj, name), list(args), kwargs)


_BY_TYPE = {operator.itemgetter: _itemgetter, operator.attrgetter: _attrgetter,
            operator.methodcaller: _methodcaller}


def instance_handler(fn: Any) -> Any:
    """The handler of a callable whose type says what it does (an itemgetter ...)."""
    handler = _BY_TYPE.get(type(fn))
    return None if handler is None else functools.partial(_call_instance, handler, fn)


def _call_instance(handler: Any, fn: Any, st, *args: Any, **kwargs: Any) -> Any:
    return handler(st, fn, *args, **kwargs)


def _reduce(st: Staging, function: Any, iterable: Any, initial: Any = _MISSING, /) -> Any:
    items = st.unroll(iterable, None)
    if initial is _MISSING:
        if not items:
            raise TypeError("reduce() of empty iterable with no initial value")
        initial, items = items[0], items[1:]
    total = initial
    for item in items:
        total = st.call(function, [total, item], {})
    return total


# -- orderings -----------------------------------------------------------------------


def _pick(cond: bool | Atom, then: bool | Atom, orelse: bool | Atom) -> bool | Atom:
    if isinstance(cond, bool):
        return then if cond else orelse
    if isinstance(then, bool) and isinstance(orelse, bool) and then == orelse:
        return then
    as_atom = lambda t: Lit(np.bool_(t)) if isinstance(t, bool) else t  # noqa: E731
    return E.select(cond, as_atom(then), as_atom(orelse))


def _is_sequence_pair(a: Any, b: Any) -> bool:
    return (isinstance(a, tuple) and isinstance(b, tuple)) or \
        (isinstance(a, list) and isinstance(b, list))


def _leaf_compare(st: Staging, a: Any, b: Any, op: str) -> bool | Atom:
    if isinstance(a, (Ref, DynStr)) or isinstance(b, (Ref, DynStr)):
        return st.truth(st.binop(op, a, b))
    if has_ref(a) or has_ref(b):
        raise UnsupportedError(
            f"comparing a {type(a).__name__} and a {type(b).__name__} that hold run-time "
            "arrays", hint="compare their fields, e.g. with key=")
    return bool(users_call(getattr(operator, op), a, b))


def equal(st: Staging, a: Any, b: Any) -> bool | Atom:
    """Python's ``a == b`` as a truth, as tuples compare their items (identity first)."""
    if a is b:
        return True
    if _is_sequence_pair(a, b):
        if len(a) != len(b):
            return False
        out: bool | Atom = True
        for x, y in zip(a, b, strict=True):
            out = _pick(out, equal(st, x, y), False)
            if out is False:
                return False
        return out
    return _leaf_compare(st, a, b, "eq")


def compare(st: Staging, a: Any, b: Any, op: str) -> bool | Atom:
    """Python's ``a < b`` (``op`` 'lt') or ``a > b`` ('gt') as a truth: a bool when the
    compile-time parts decide it, else a run-time bool.  Sequences compare at their
    first unequal items, which are the only ones Python compares with ``op``."""
    if not _is_sequence_pair(a, b):
        return _leaf_compare(st, a, b, op)
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        same = equal(st, x, y)
        if same is True:
            continue
        first = compare(st, x, y, op)
        if same is False:
            return first
        return _pick(same, compare(st, a[k + 1:], b[k + 1:], op), first)
    return getattr(operator, op)(len(a), len(b))


class _SortKey:
    """An item's key for Python's sort, whose every comparison must be static."""

    __slots__ = ("st", "value")

    def __init__(self, st, value: Any):
        self.st, self.value = st, value

    def __lt__(self, other: _SortKey) -> bool:
        t = compare(self.st, self.value, other.value, "lt")
        if not isinstance(t, bool):
            raise UnsupportedError(
                "sorting compares run-time values here: the order of the result would "
                "depend on the data",
                hint="sort on keys known at compile time (names, shapes, static fields), "
                "or put the values in an array and use np.sort / np.argsort")
        return t


def ordered(st: Staging, items: list, key: Any, reverse: Any) -> list:
    """``sorted(items, key=key, reverse=reverse)``, comparisons made at compile time."""
    keys = items if key is None else [st.call(key, [x], {}) for x in items]
    flip = st.static_value(reverse, "sorted()'s reverse=") if isinstance(reverse, Ref) \
        else reverse
    order = sorted(range(len(items)), key=lambda k: _SortKey(st, keys[k]), reverse=flip)
    return [items[k] for k in order]


def _sorted(st: Staging, iterable: Any, /, *, key: Any = None, reverse: Any = False) -> list:
    return st.new(ordered(st, st.unroll(iterable, None), key, reverse))


def sort_list(st: Staging, items: list, *, key: Any = None, reverse: Any = False) -> None:
    """``items.sort(key=..., reverse=...)`` in place."""
    items[:] = ordered(st, list(items), key, reverse)


def _extreme(name: str):
    """``min``/``max`` with ``key=`` or over items that are not numbers: the first item
    no later one beats (``<`` for min, ``>`` for max); a run-time comparison chooses the
    item at run time.  Plain numbers and arrays stay with the NumPy mapping."""
    op = "lt" if name == "min" else "gt"

    def fn(st: Staging, *args, key: Any = None, default: Any = _MISSING):
        if key is None and _numbers_only(args):
            return NotImplemented
        if len(args) > 1 and default is not _MISSING:
            raise TypeError(f"Cannot specify a default for {name}() with multiple "
                            "positional arguments")
        items = st.unroll(args[0], None) if len(args) == 1 else list(args)
        if not items:
            extra = {} if default is _MISSING else {"default": default}
            return users_call(getattr(builtins, name), [], **extra)
        best = items[0]
        best_key = best if key is None else st.call(key, [best], {})
        for item in items[1:]:
            k = item if key is None else st.call(key, [item], {})
            beats = compare(st, k, best_key, op)
            if beats is True:
                best, best_key = item, k
            elif beats is not False:
                best, best_key = st.branch_value(beats, lambda i=item, k=k: (i, k),
                                                 lambda b=best, bk=best_key: (b, bk))
        return best

    return fn


def _numbers_only(args: tuple) -> bool:
    """Whether ``min``/``max`` without a key compares numbers or arrays only (the NumPy
    mapping's case), or nothing staged at all (Python's)."""
    pool = args[0] if len(args) == 1 else args
    if isinstance(pool, Ref) or not has_ref(args):
        return True
    return isinstance(pool, (list, tuple)) and all(
        isinstance(x, Ref) or is_static_number(x) for x in pool)


# -- dataclasses and NamedTuples -------------------------------------------------------


def _require_dataclass(obj: Any, what: str) -> None:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"{what}() should be called on dataclass instances")


def _replace(st: Staging, obj: Any, /, **changes: Any) -> Any:
    _require_dataclass(obj, "replace")
    for f in dataclasses.fields(obj):
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be "
                                 "specified with replace()")
            continue
        if f.name not in changes:
            changes[f.name] = st.getattr(obj, f.name)
    return st.call(type(obj), [], changes)


def _deep_copy(st: Staging, obj: Any, factory: Any, as_dict: bool) -> Any:
    """``dataclasses``' recursive conversion: dataclasses become ``factory`` of their
    fields, containers are rebuilt, arrays copied, other values deep-copied."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        values = [_deep_copy(st, st.getattr(obj, f.name), factory, as_dict)
                  for f in dataclasses.fields(obj)]
        made = [(f.name, v) for f, v in zip(dataclasses.fields(obj), values, strict=True)] \
            if as_dict else values
        return st.call(factory, [st.new(made)], {})
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return users_call(type(obj), *[_deep_copy(st, v, factory, as_dict) for v in obj])
    if isinstance(obj, (list, tuple)):
        return st.adopt(type(obj)(_deep_copy(st, v, factory, as_dict) for v in obj))
    if isinstance(obj, dict):
        return st.adopt(type(obj)((_deep_copy(st, k, factory, as_dict),
                                   _deep_copy(st, v, factory, as_dict))
                                  for k, v in obj.items()))
    if isinstance(obj, Ref):
        return obj if obj.kind == "scalar" else st.call(st.getattr(obj, "copy"), [], {})
    if has_ref(obj) or has_ref(list(getattr(obj, "__dict__", {}).values())):
        raise UnsupportedError(
            f"deep-copying a {type(obj).__name__} that holds run-time arrays",
            hint="make it a dataclass, or convert its fields yourself")
    return users_call(copy.deepcopy, obj)


def _asdict(st: Staging, obj: Any, *, dict_factory: Any = dict) -> Any:
    _require_dataclass(obj, "asdict")
    return _deep_copy(st, obj, dict_factory, True)


def _astuple(st: Staging, obj: Any, *, tuple_factory: Any = tuple) -> Any:
    _require_dataclass(obj, "astuple")
    return _deep_copy(st, obj, tuple_factory, False)


#: The code every NamedTuple's ``_replace`` shares (each class has its own function).
NAMEDTUPLE_REPLACE = collections.namedtuple("_Probe", "a")._replace.__code__


def namedtuple_replace(st: Staging, obj: Any, /, **changes: Any) -> Any:
    values = [changes.pop(name, v) for name, v in zip(obj._fields, obj, strict=True)]
    if changes:
        raise ValueError(f"Got unexpected field names: {list(changes)!r}")
    return users_call(type(obj)._make, values)


IDIOMS = {
    **OPERATOR_FUNCTIONS,
    functools.reduce: _reduce,
    sorted: _sorted,
    min: _extreme("min"),
    max: _extreme("max"),
    dataclasses.replace: _replace,
    dataclasses.asdict: _asdict,
    dataclasses.astuple: _astuple,
}
