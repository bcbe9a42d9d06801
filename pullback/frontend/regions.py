"""Staging code into a nested IR block and merging what it changed.

A *region* is a branch of a ``cond`` or the body of a loop.  Staging one runs the
statements with the frame's variables and the cells' contents as they are at entry,
records what changed (variables rebound, cells written), then puts the entry state
back, so the other branch, or the next attempt at a loop body, starts from the same
state.  ``Slots`` lines up what changed across regions: each dynamic leaf becomes one
result of the region's block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CompileError, Loc
from ..ir.core import Atom, Lit
from ..ir.types import TensorType, type_of_value
from ..ops import shape as S
from .interface import Staging
from .lifting import tree_leaves_refs
from .values import WRITE_LOGS, Ref, Undefined, is_static_number, next_serial


class Bottom(Exception):
    """The region cannot complete: a recursive call whose result is not known yet."""


class MergeError(CompileError):
    """A variable has different types on two paths that meet."""


@dataclass
class End:
    """What a region left: variables, cell contents, and where variables were set."""

    vars: dict[str, Any]
    where: dict[str, Loc]
    atoms: dict[int, Atom]  # the content, at the end, of every cell the variables hold
    writes: dict[Ref, Atom]  # cells that existed before the region and were written
    fresh_writes: set[int]  # ids of cells made inside the region and written there
    value: Any = None
    bottom: bool = False
    start: int = 0  # the region's serial: cells with smaller serials existed before it

    def outer_arrays(self, leaves: list) -> list[Ref]:
        """Arrays among ``leaves`` that existed before the region (names may alias them)."""
        return [x for x in leaves if isinstance(x, Ref) and x.kind == "array"
                and x.root().serial < self.start]

    def atom(self, ref: Ref) -> Atom:
        return self.atoms.get(id(ref)) or self.writes.get(ref) or ref.raw()


def zeros(t: TensorType) -> Atom:
    """A placeholder of type ``t`` (for values that a path never observes)."""
    if t.shape == ():
        return Lit(np.zeros((), t.dtype.np), t)
    return S.broadcast_in_dim(Lit(np.zeros((), t.dtype.np)), shape=t.shape, dims=())


def as_dynamic(x: Any) -> Ref:
    """A static number as a cell (a Python number stays weak, as NumPy treats it)."""
    return x if isinstance(x, Ref) else Ref(Lit(x, type_of_value(x)))


@dataclass
class Slot:
    """One leaf that differs between the regions that meet."""

    type: TensorType
    kind: str
    atoms: list[Atom] = field(default_factory=list)
    aliases: list[Ref] = field(default_factory=list)  # arrays the result may share memory with


def region_start(stager: Staging) -> int:
    return next_serial()


def run_region(stager: Staging, fn: Callable[[], Any]) -> End:
    """Run ``fn`` (it stages into the current block) and put the entry state back."""
    frame = stager.frame
    entry_vars = dict(frame.vars)
    entry_where = dict(frame.where)
    logs = WRITE_LOGS.get(None)
    token = None
    if logs is None:
        logs = []
        token = WRITE_LOGS.set(logs)
    log: dict[Ref, Atom] = {}
    logs.append(log)
    saved_region = stager.region
    start = stager.region = region_start(stager)
    try:
        try:
            value = fn()
            bottom = False
        except Bottom:
            value, bottom = None, True
        atoms = {id(r): r.raw() for r in tree_leaves_refs([frame.vars, value])}
        writes = {r: r.raw() for r in log if r.serial < start}
        fresh = {id(r) for r in log if r.serial >= start}
        return End(dict(frame.vars), dict(frame.where), atoms, writes, fresh, value, bottom,
                   start)
    finally:
        for r, old in log.items():
            r.restore(old)
        frame.vars.clear()
        frame.vars.update(entry_vars)
        frame.where.clear()
        frame.where.update(entry_where)
        logs.pop()
        if token is not None:
            WRITE_LOGS.reset(token)
        stager.region = saved_region


def describe(v: Any) -> str:
    if isinstance(v, Ref):
        return f"{'a Python ' + v.type.dtype.name if v.type.weak else v.kind} of type {v.type}"
    if isinstance(v, Undefined):
        return "undefined"
    if isinstance(v, (list, tuple, dict)):
        return f"a {type(v).__name__} of {len(v)} items"
    if is_static_number(v) or isinstance(v, str) or v is None:
        return f"the {type(v).__name__} {v!r}"
    return f"a {type(v).__name__}"


def mismatch(name: str, values: list[Any], locs: list[Loc | None], what: str) -> MergeError:
    where = [f"{describe(v)} (set at line {loc.line})" if loc else describe(v)
             for v, loc in zip(values, locs, strict=True)]
    shown = name if not name.startswith(".") else {
        ".retval": "the return value", ".value": "the value"}.get(name, name)
    return MergeError(
        f"'{shown}' is {where[0]} on one path but {where[1]} on another {what}",
        locs[-1] or locs[0],
        hint="give it the same dtype and shape on every path (e.g. initialise with "
        "0.0 or np.zeros_like, or convert with .astype)",
    )


def merge_leaf(values: list[Any]) -> tuple[bool, Any]:
    """``(True, v)`` when every region leaves the same static leaf ``v``."""
    first = values[0]
    if all(v is first for v in values):
        return True, first
    if any(isinstance(v, Ref) for v in values) or not all(is_static_number(v) for v in values):
        return False, None
    same = all(type(v) is type(first) and (v == first or (v != v and first != first))
               for v in values)
    return same, first
