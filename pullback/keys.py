"""What makes two callables the same computation, so that compiled specialisations are
shared between them: ``pb.grad(f)(x)`` built afresh in a loop, or ``pb.jit(lambda x:
...)`` made on every call, finds what the first one compiled (as JAX's caches do).

A function is its code, the values its closure cells hold, the values of the globals it
reads (by name) and its defaults; a ``partial`` its function and bound arguments; a bound
method its function and object; a transform (``__pb_key__``) its kind, settings and the
key of what it wraps.  Values are compared by
value where Python can (hashable), plain containers by their items, anything else by
identity: the key then holds the object, so its ``id`` cannot be reused while the key
lives.  Arrays and floats in closure cells and globals are keyed by their type only: the
compiled code reads them when it is called (see ``frontend.outside``), so functions that
differ only in those values share their specialisations.  The cells met on the way are
listed in order (``cells``): two callables with equal keys have their cells in the same
places, so a specialisation staged through one reads the other's cells by position.
"""

from __future__ import annotations

import functools
import threading
import types
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from .errors import UnsupportedError


class _Same:
    """An object compared by identity, kept alive by the key that holds it."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


#: Containers with more items are keyed by identity: a key is computed each time a
#: transform is built, and a large table read by a function must not cost that much.
LARGEST = 64


def value_key(x: Any, seen: frozenset = frozenset(), strict: bool = False,
              cells: list | None = None) -> Any:
    """``x`` as a hashable key: equal keys for equal values, identity otherwise.  With
    ``strict`` (compile-time arguments, whose values the compiled code holds) there is no
    identity fallback: what is neither hashable nor a plain container is refused.  The
    closure cells of the functions met are appended to ``cells``."""
    if id(x) in seen:
        return _identity(x, strict)
    if callable(x) and not isinstance(x, type):
        return callable_key(x, seen, cells)
    if isinstance(x, (set, frozenset)):  # their items are hashable
        return (type(x), frozenset(x))
    if isinstance(x, slice):  # unhashable before Python 3.12
        return (slice, value_key(x.start, seen, strict), value_key(x.stop, seen, strict),
                value_key(x.step, seen, strict))
    if isinstance(x, (tuple, list, dict)):
        if len(x) > LARGEST and not strict:
            return _Same(x)
        inner = seen | {id(x)}
        if type(x) is not dict:
            return (type(x), tuple(value_key(v, inner, strict, cells) for v in x))
        try:
            items = sorted(x.items(), key=lambda kv: repr(kv[0]))
        except Exception:  # noqa: BLE001 (keys of mixed types: identity is still correct)
            return _identity(x, strict)
        return (dict, tuple((value_key(k, inner, strict), value_key(v, inner, strict, cells))
                            for k, v in items))
    try:
        hash(x)
    except TypeError:
        return _identity(x, strict)
    return (type(x), x)


def _identity(x: Any, strict: bool) -> _Same:
    if strict:
        raise UnsupportedError(
            f"a compile-time argument of type {type(x).__name__} is neither hashable nor a "
            "plain container, so pullback cannot tell whether a later call's value is the "
            "same", hint="pass a hashable value (a tuple, a frozenset, a frozen dataclass) "
            "or make it a run-time value (an array)")
    return _Same(x)


def callable_key(fn: Any, seen: frozenset = frozenset(), cells: list | None = None) -> Any:
    """The key of a callable (see the module docstring); the closure cells met on the way
    are appended to ``cells``."""
    inner = seen | {id(fn)}
    own = getattr(type(fn), "__pb_key__", None)
    if own is not None:
        return own(fn, lambda f: callable_key(f, inner, cells))
    if isinstance(fn, types.FunctionType):
        held = []
        for cell in fn.__closure__ or ():
            if cells is not None:
                cells.append(cell)
            try:
                held.append(outside_key(cell.cell_contents, inner, cells))
            except ValueError:  # an empty cell
                held.append(None)
        env = fn.__globals__
        read = tuple((name, outside_key(env[name], inner, cells))
                     for name in _global_names(fn.__code__) if name in env)
        return ("function", _Code(fn.__code__), id(env), read, tuple(held),
                value_key(fn.__defaults__, inner), value_key(fn.__kwdefaults__, inner))
    if isinstance(fn, functools.partial):
        return ("partial", callable_key(fn.func, inner, cells), value_key(fn.args, inner),
                value_key(fn.keywords, inner))
    if isinstance(fn, types.MethodType):
        return ("method", callable_key(fn.__func__, inner, cells),
                value_key(fn.__self__, inner))
    try:
        hash(fn)
    except TypeError:
        return _Same(fn)
    return ("object", fn)


def runtime_kind(x: Any) -> str | None:
    """How a value read from outside a staged function enters the compiled code: arrays
    and floats as run-time values (``'array'``, ``'scalar'``: NumPy scalars, ``'float'``:
    Python floats), anything else as a compile-time value (None)."""
    if type(x) is np.ndarray:
        return "array"
    if type(x) is float:
        return "float"
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return "scalar"
    return None


def outside_key(x: Any, seen: frozenset = frozenset(), cells: list | None = None) -> Any:
    """The key of a value a function reads from its closure or globals: run-time values
    (``runtime_kind``) by type, shape and layout, anything else by ``value_key``."""
    kind = runtime_kind(x)
    if kind == "array":
        return (kind, x.shape, x.dtype.str, bool(x.flags.c_contiguous))
    if kind is not None:
        return (kind, type(x))
    return value_key(x, seen, cells=cells)


_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The names a function's code (and the code of the functions defined in it) may
    read from its module: their values are part of its key, since staging reads them."""
    names = _NAMES.get(code)
    if names is None:
        found = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found.update(_global_names(const))
        names = _NAMES[code] = tuple(sorted(found))
    return names


class _Code:
    """A code object in a key, held weakly (see ``Registry``)."""

    __slots__ = ("ref", "hash")

    def __init__(self, code: types.CodeType):
        self.ref = weakref.ref(code)
        self.hash = id(code)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Code) and other.ref() is self.ref() is not None

    def __hash__(self) -> int:
        return self.hash


def _codes(key: Any) -> list[types.CodeType]:
    """The code objects named in a key."""
    if isinstance(key, _Code):
        code = key.ref()
        return [] if code is None else [code]
    if isinstance(key, tuple):
        return [c for part in key for c in _codes(part)]
    return []


class Registry:
    """Values per callable key, least recently used first out beyond ``size``.  An entry
    also goes when a code object its key names is collected (a function defined inside
    another that is gone), so keys never outlive the code they name."""

    def __init__(self, size: int = 512):
        self.size = size
        self.entries: OrderedDict = OrderedDict()
        self.lock = threading.RLock()  # a collection inside may drop an entry (_drop)

    def get(self, key: Any, make: Any) -> Any:
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None:
                self.entries.move_to_end(key)
                return hit
        made = make()
        with self.lock:
            value = self.entries.setdefault(key, made)
            if value is made:  # (another thread may have made it meanwhile)
                for code in _codes(key):
                    weakref.finalize(code, self._drop, key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return value

    def _drop(self, key: Any) -> None:
        with self.lock:
            self.entries.pop(key, None)
