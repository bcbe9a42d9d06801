"""Abstract values: what names are bound to while a function is staged.

Static Python objects stand for themselves.  A dynamic array or scalar lives in a
``Ref``: a cell holding the IR value it currently has.  Names bind to cells, so
``y = x`` aliases exactly as in NumPy, and ``x[i] = v`` replaces the cell's content
with an update equation that every alias sees.  A ``View`` (``x[1:3]``, ``x.T``) has no
content of its own: it reads its base and writes through to it.

When what an array aliases depends on a branch taken at run time, or on memory layout
NumPy decides at run time (``reshape`` of a strided view), the frontend cannot know
whether a write through one name changes another; such values are *entangled* with the
arrays they may alias: writing them is refused, and writing those arrays poisons them.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..errors import ConcretizationError, Loc, UnsupportedError
from ..ir.builder import as_atom
from ..ir.core import Atom, Lit, Var
from ..ir.types import TensorType
from ..numpy_api import OPERATORS
from .operators import BINOPS, UNARY, dunder

#: The write logs of the dynamic regions being staged, innermost last.
WRITE_LOGS: ContextVar[list[dict[Ref, Atom]]] = ContextVar("pullback_write_logs")
#: How deep in IR functions (recursive functions) staging is.
FUNC_DEPTH: ContextVar[int] = ContextVar("pullback_func_depth", default=0)

#: Cells of enclosing functions that the recursive function being staged reads, with
#: the parameters standing for them.
CAPTURES: ContextVar[dict | None] = ContextVar("pullback_captures", default=None)

_serial = itertools.count()


def next_serial() -> int:
    """One clock for cells, containers and regions: what was made before a region began
    has a smaller serial."""
    return next(_serial)


class Ref:
    """A cell holding a dynamic value.  ``kind`` is what plain Python would hold:
    ``'array'`` (an ndarray), ``'scalar'`` (a NumPy scalar, or a Python number when the
    type is weak).  Scalars are immutable."""

    __slots__ = ("_atom", "kind", "serial", "depth", "contiguous", "note", "readonly",
                 "entangled", "dependents", "poisoned", "__weakref__")

    def __init__(self, atom: Atom, kind: str | None = None, contiguous: bool = True):
        self._atom = atom
        t = atom.type
        if kind is None:
            kind = "scalar" if isinstance(t, TensorType) and t.shape == () else "array"
        self.kind = kind
        self.serial = next(_serial)
        self.depth = FUNC_DEPTH.get()
        self.contiguous = contiguous
        self.note: str | None = None  # why writes are refused (a constant, an argument ...)
        self.readonly: str | None = None  # NumPy's own read-only arrays: ValueError
        self.entangled: list[Ref] = []
        self.dependents: list[Ref] = []
        self.poisoned: str | None = None

    @property
    def type(self) -> TensorType:
        return self.get().type

    def root(self) -> Ref:
        return self

    def get(self) -> Atom:
        if self.poisoned:
            raise UnsupportedError(self.poisoned, hint="make a copy (`.copy()`) where the "
                                   "array is created so that it owns its memory")
        if isinstance(self._atom, Var) and self.depth < FUNC_DEPTH.get():
            captures = CAPTURES.get()
            if captures is not None:  # a value the recursive function closes over
                if id(self) not in captures:
                    captures[id(self)] = (self, Var(self._atom.type))
                return captures[id(self)][1]
            raise UnsupportedError(
                "a recursive function reads a run-time array of the function that calls it",
                hint="pass the array to the recursive function as an argument",
            )
        return self._atom

    def raw(self) -> Atom:
        """The content without checks (for saving and restoring around regions)."""
        return self._atom

    def restore(self, atom: Atom) -> None:
        self._atom = atom

    def set(self, atom: Atom) -> None:
        """Replace the content (``x[i] = v``): logged so dynamic regions can merge it."""
        if self.kind != "array":
            raise TypeError("'numpy scalar' object does not support item assignment")
        if self.readonly:
            raise ValueError(self.readonly)
        if self.note:
            raise UnsupportedError(self.note, hint="copy it first: `x = x.copy()`")
        if self.entangled:
            raise UnsupportedError(
                "cannot write to this array: it may or may not share memory with another "
                "array, depending on the branch taken at run time or the memory layout",
                hint="use `.copy()` to make it own its memory before writing to it")
        if self.depth < FUNC_DEPTH.get():
            raise UnsupportedError(
                "a function staged on its own (recursive, or differentiated by pullback) "
                "writes to an array of its caller",
                hint="return the new array from the function instead",
            )
        if atom.type != self._atom.type:
            raise TypeError(f"internal: cell of {self._atom.type} given {atom.type}")
        logs = WRITE_LOGS.get(None)
        if logs:
            logs[-1].setdefault(self, self._atom)
        self._atom = atom
        for d in self.dependents:
            d.poisoned = ("this array may share memory with another array that was "
                          "written after it was made")

    def entangle(self, others: list[Ref]) -> None:
        """This value may alias ``others`` (which one is decided at run time)."""
        for o in others:
            r = o.root()
            if r is not self and r not in self.entangled:
                self.entangled.append(r)
                r.dependents.append(self)

    def __repr__(self) -> str:
        return f"Ref#{self.serial}({self._atom!r}, {self.kind})"

    # Native Python code (a builtin, a library function given a container of arrays)
    # meets cells where the program has arrays: they behave as NumPy's arrays do, or
    # refuse where a concrete value is needed.  ``==`` keeps identity: pullback's own
    # code finds cells in lists.
    def __bool__(self) -> bool:
        return bool(self._concrete("the truth value"))

    def _concrete(self, what: str) -> Any:
        a = self.get()
        if isinstance(a, Lit):
            return a.value
        if a.type.size > 1 and what == "the truth value":
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        raise ConcretizationError(
            f"{what} of a run-time value of type {a.type} is needed by Python code that "
            "pullback runs at compile time (a builtin or library function)",
            hint="use NumPy functions on arrays, or compute it from shapes or static values")

    def __float__(self) -> float:
        return float(self._concrete("float()"))

    def __int__(self) -> int:
        return int(self._concrete("int()"))

    def __index__(self) -> int:
        return operator.index(self._concrete("an integer index"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self._concrete("the array"), dtype)

    def __len__(self) -> int:
        if not self.type.shape:
            raise TypeError("len() of unsized object")
        return self.type.shape[0]

    def __iter__(self) -> Any:
        if not self.type.shape:
            raise TypeError("iteration over a 0-d array")
        return (indexed(self, k, k, True) for k in range(self.type.shape[0]))

    __hash__ = object.__hash__


def _operator(name: str, swap: bool = False) -> Callable:
    def method(self: Ref, other: Any = None) -> Any:
        if other is None and name in _UNARY:
            return Ref(OPERATORS[name](self.get()))
        if not isinstance(other, (Ref, bool, int, float, complex, np.generic, np.ndarray)):
            return NotImplemented
        fn = OPERATORS.get(name)
        if fn is None:
            return NotImplemented
        a, b = (other, self) if swap else (self, other)
        return Ref(fn(*(x.get() if isinstance(x, Ref) else x for x in (a, b))))
    return method


_UNARY = (*UNARY.values(), "abs")
for _name in BINOPS.values():
    setattr(Ref, f"__{dunder(_name)}__", _operator(_name))
    setattr(Ref, f"__r{dunder(_name)}__", _operator(_name, swap=True))
for _name in ("lt", "le", "gt", "ge"):  # (== and != keep identity, see above)
    setattr(Ref, f"__{_name}__", _operator(_name))
for _name in _UNARY:
    setattr(Ref, f"__{_name}__", _operator(_name))


class View(Ref):
    """A view of ``base``: ``fwd(base)`` reads it, ``bwd(base, new)`` writes through;
    ``native(array)`` makes the same view of a NumPy array, where it is known at compile
    time (a view of an argument is returned as a view of the caller's array)."""

    __slots__ = ("base", "fwd", "bwd", "native")

    def __init__(self, base: Ref, fwd: Callable[[Atom], Atom],
                 bwd: Callable[[Atom, Atom], Atom], contiguous: bool = False,
                 native: Callable[[Any], Any] | None = None):
        self.base = base
        self.fwd = fwd
        self.bwd = bwd
        self.native = native
        super().__init__(self._read(), "array", contiguous)
        self.readonly = base.readonly
        self.note = base.note

    def root(self) -> Ref:
        return self.base.root()

    def _read(self) -> Atom:
        # re-read every time: a value cached inside one region must not leak out of it
        return self.fwd(self.base.get())

    def get(self) -> Atom:
        if self.poisoned:
            return super().get()
        return self._read()

    def raw(self) -> Atom:
        return self._read()

    def restore(self, atom: Atom) -> None:  # a view's content is its base's
        pass

    def set(self, atom: Atom) -> None:
        if self.readonly:
            raise ValueError(self.readonly)
        if self.note:
            raise UnsupportedError(self.note, hint="copy it first: `x = x.copy()`")
        if atom.type != self.type:
            raise TypeError(f"internal: view of {self.type} given {atom.type}")
        self.base.set(self.bwd(self.base.get(), atom))


def _is_basic(idx: Any) -> bool:
    items = idx if isinstance(idx, tuple) else (idx,)
    for it in items:
        if it is None or it is Ellipsis or isinstance(it, slice):
            continue
        if isinstance(it, (bool, np.bool_)):
            return False
        if isinstance(it, (int, np.integer)):
            continue
        if isinstance(it, Ref) and it.type.shape == () and it.type.dtype.is_int:
            continue
        return False
    return True


def indexed(ref: Ref, idx: Any, low: Any, static: bool) -> Ref:
    """``ref[idx]``, where ``low`` is ``idx`` with its cells' IR values and ``static`` says
    it holds no cell: basic indexing that keeps an array makes a view of ``ref``."""
    out = OPERATORS["getitem"](ref.get(), low)
    items = idx if isinstance(idx, tuple) else (idx,)
    if ref.kind == "array" and _is_basic(idx) and (out.type.shape != () or Ellipsis in items):
        return View(ref, lambda b: OPERATORS["getitem"](b, low),
                    lambda b, new: OPERATORS["setitem"](b, low, new),
                    native=(lambda a: a[idx]) if static else None)
    return Ref(out, "scalar" if out.type.shape == () else "array")


class Undefined:
    """A name without a value on some path; reading it is an error saying why."""

    __slots__ = ("name", "why", "loc")

    def __init__(self, name: str, why: str, loc: Loc | None = None):
        self.name = name
        self.why = why
        self.loc = loc


class DynStr:
    """An f-string with run-time parts: only ``print`` and ``assert`` can use it."""

    __slots__ = ("fmt", "args")

    def __init__(self, fmt: str, args: list[Ref]):
        self.fmt = fmt
        self.args = args


class RefMethod:
    """``x.sum`` for a staged array ``x``: an ndarray method waiting for its arguments."""

    __slots__ = ("ref", "name")

    def __init__(self, ref: Ref, name: str):
        self.ref = ref
        self.name = name


def lit_ref(value: Any) -> Ref:
    """A constant as a cell (NumPy arrays made at compile time stay arrays)."""
    kind = "array" if isinstance(value, np.ndarray) else None
    return Ref(as_atom(value), kind)  # as_atom refuses ndarray subclasses


def is_static_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))
