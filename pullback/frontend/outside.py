"""Values a staged function reads from outside itself: its globals and closure cells.

Python reads them each time the function runs, and so does the compiled code (and so
are arrays that are attributes or items of objects that outlive the call): arrays and
floats among them become run-time parameters of the specialisation (fed their current
values on every call, so ``weights[:] = ...`` or ``scale = 3.0`` is seen); anything else
(ints, strings, functions, modules, objects) is a compile-time value, and the
specialisation is only used while each of them is still the same (the same object, or an
equal value).  A run-time value that staging needed as a constant (a global table used as
a shape, say) is *frozen*: staged as a constant and checked by content on every call.

A capture is read through where it was found: a module's globals by name, or a closure
cell; cells met by ``keys.callable_key`` from the compiled callable are read by their
position among its cells, so a specialisation shared by two equal-keyed closures reads
the cells of the one being called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.builder import Builder
from ..ir.core import Var
from ..ir.types import type_of_value
from ..keys import outside_key, runtime_kind
from .values import Ref


@dataclass(eq=False)
class Capture:
    """One value read from outside: where, what staging saw, and how it was staged."""

    env: dict | None  # the module's globals it was read from, by name
    name: str
    position: int | None  # else the cell's position among the root's (``keys``) ...
    cell: Any  # ... else the cell itself
    seen: Any
    kind: str | None  # runtime_kind: a parameter; None: a compile-time value
    frozen: bool  # a run-time kind staged as a constant: compared by content
    key: Any  # outside_key of what was seen (compile-time values; None for a callable,
    # which ``fits`` compares by identity: its key, the keys of every function it reads,
    # cost a transformer step's staging 3,500 key computations for nothing)
    same: tuple | None = None  # ("arg", leaf) or ("capture", Capture): the same array
    owner: Any = None  # else an object it is an attribute (or an item) of, by ``name``
    attribute: bool = False

    def read(self, cells: Sequence[Any]) -> Any:
        if self.env is not None:
            return self.env[self.name]
        if self.owner is not None:
            return getattr(self.owner, self.name) if self.attribute else self.owner[self.name]
        if self.position is not None:
            return cells[self.position].cell_contents
        return self.cell.cell_contents

    @property
    def pinned(self) -> bool:
        """A global that stays what it was while it is the same object (checked first,
        by identity, on the fast path)."""
        return self.env is not None and self.kind is None and \
            not isinstance(self.seen, (list, dict, set))

    def fits(self, value: Any) -> bool:
        """Whether ``value`` may stand where the specialisation saw ``seen``."""
        seen = self.seen
        if self.frozen:
            return type(value) is type(seen) and np.shape(value) == np.shape(seen) and \
                np.asarray(value).dtype == np.asarray(seen).dtype and \
                bool(np.array_equal(value, seen))
        if self.kind == "array":
            return type(value) is np.ndarray and value.shape == seen.shape and \
                value.dtype == seen.dtype and \
                value.flags.c_contiguous == seen.flags.c_contiguous
        if self.kind is not None:
            return type(value) is type(seen)
        if value is seen:
            return not isinstance(seen, (list, dict, set)) or outside_key(value) == self.key
        return not callable(seen) and outside_key(value) == self.key


def current_inputs(captures: Sequence[Capture], cells: Sequence[Any],
                   leaves: Sequence[Any], native: bool = False) -> list | None:
    """The values now of the captures that are parameters, in order; None when any
    capture no longer fits the specialisation (it must be staged again).  A ``native``
    entry checks the parameters' types and shapes itself."""
    values: list = []
    now: dict[int, Any] = {}
    for c in captures:
        try:
            v = c.read(cells)
        except (KeyError, ValueError, IndexError, AttributeError):  # deleted, emptied
            return None
        if c.same is not None:
            kind, other = c.same
            if v is not (leaves[other] if kind == "arg" else now.get(id(other))):
                return None
        elif c.kind is None or c.frozen:
            if not c.fits(v):
                return None
        elif native or c.fits(v):
            values.append(v)
            if c.kind == "array":
                now[id(c)] = v
        else:
            return None
    return values


def _by_identity(value: Any) -> bool:
    """Whether ``Capture.fits`` compares ``value`` by identity alone (never by key)."""
    return callable(value) and not isinstance(value, (list, dict, set))


class Outside:
    """The captures of one staging, made as names are read (``Frame.outside``)."""

    def __init__(self, builder: Builder, cells: Sequence[Any], arguments: dict[int, tuple]):
        self.builder = builder  # the top-level function's: captures are its parameters
        self.position = {id(c): i for i, c in enumerate(cells)}
        self.arguments = arguments  # id of an argument array: (leaf, its cell)
        self.captures: list[Capture] = []
        self.found: dict[tuple, Any] = {}  # (id(source), name): what staging works with
        self.held: dict[int, tuple[Capture, Ref]] = {}  # id of a captured array
        self.params: list[Var] = []  # the top-level parameters made, and their cells
        self.cells: list[Ref] = []
        self.freeze = False  # stage run-time kinds as constants (see module docstring)

    def __call__(self, source: Any, name: str, value: Any) -> Any:
        key = (id(source), name)
        if key in self.found:
            return self.found[key]
        kind = runtime_kind(value)
        env = source if isinstance(source, dict) else None
        frozen = self.freeze and kind is not None
        capture = Capture(env, name, None if env is not None else self.position.get(id(source)),
                          source, value.copy() if frozen and kind == "array" else value, kind,
                          frozen, None if kind is not None or _by_identity(value)
                          else outside_key(value))
        self.captures.append(capture)
        staged = value
        if kind is not None and not self.freeze:
            staged = self._parameter(capture, value)
        self.found[key] = staged
        return staged

    def member(self, owner: Any, name: Any, value: np.ndarray, attribute: bool) -> Any:
        """An array read as an attribute (or item) of an object that outlives the call: a
        run-time parameter too, read through the object on every call."""
        key = (id(owner), name, attribute)
        if key not in self.found:
            capture = Capture(None, name, None, None, value, "array", self.freeze, None,
                              owner=owner, attribute=attribute)
            self.captures.append(capture)
            self.found[key] = value if self.freeze else self._parameter(capture, value)
        return self.found[key]

    def _parameter(self, capture: Capture, value: Any) -> Ref:
        if capture.kind == "array":
            if id(value) in self.arguments:  # the caller passed it too: one array
                leaf, cell = self.arguments[id(value)]
                capture.same = ("arg", leaf)
                return cell
            if id(value) in self.held:  # read under another name
                first, cell = self.held[id(value)]
                capture.same = ("capture", first)
                return cell
        var = Var(type_of_value(value), "outside")
        self.builder.outer_param(var)
        cell = Ref(var, "array" if capture.kind == "array" else "scalar",
                   bool(value.flags.c_contiguous) if capture.kind == "array" else True)
        cell.depth = 0  # a value of the top-level function, wherever it is first read
        cell.serial = -1  # ... and made before any region of it
        self.params.append(var)
        self.cells.append(cell)
        if capture.kind == "array":
            self.held[id(value)] = (capture, cell)
        return cell
