"""The C backend as an ordered list of named stages, each a function from one
representation to the next (as the graph passes' ``PIPELINE`` is):

``prepare``
    graph IR: the function and its callees as a ``Module``, rewritten for this backend
    (outer products as multiplies, ``prepare/products.py``; sums of zero-padded pieces
    side by side as concatenations, ``prepare/pieces.py``; pure scalar equations as
    early as their operands allow, so they do not split kernels, ``prepare/scalars.py``;
    records built column by column, ``prepare/columns.py``, unless
    ``PULLBACK_COLUMNS=0``), verified under ``PULLBACK_VERIFY``;
``plan``
    the module and its frozen ``ModulePlan`` (kernels, fused values, buffer lives,
    in-place updates, donations: ``plan/``);
``lower``
    loop IR as lowering made it (``lower/``), with the fault sites and prints;
``loops``
    loop IR after the loop-IR passes (``loops/passes.py``);
``c``
    the module's C text and name (``emit/``);
``build``
    the built extension module as a callable (``build/``, ``call/``).

``PULLBACK_DUMP=<stage>`` prints a stage's output as it is made (its ``show``; ``build``
shows nothing).  The stage list is the seam of other backends: a GPU or export backend
would keep the stages up to ``loops`` (prepare, plan and loop IR) and swap ``c`` and
``build`` for its own emitter and build.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from ... import config
from ...ir.core import Block, Func, Module
from ...ir.types import TensorType
from ...ir.verify import verify
from .build.compiler import build_module, built_quickly, quick_builds
from .build.libraries import HEADERS, needed
from .build.long_builds import check_size, reported
from .build.threads import runs_parallel
from .call.compiled import Compiled, Printed, Site
from .emit.source import Source, module_source
from .loops.ir import Unsupported
from .loops.passes import run_loop_passes
from .loops.printer import format_module
from .lower.lowering import LoweredModule, lower_module
from .plan.module import FuncPlan, ModulePlan, plan_module
from .prepare.columns import split_columns
from .prepare.pieces import concatenate_pieces
from .prepare.products import outer_products
from .prepare.scalars import hoist_scalars

#: The fewest lines of C a module has for its first build to be quick: below, GCC's
#: time is mostly its start and the prelude's, whatever the level.
QUICK_LINES = 300


class Entry(NamedTuple):
    """What a module is compiled from: the entry function, and the array parameters its
    caller hands over (``donated``: parameter -> the result it may be updated into in
    place; see ``plan.donation.entry_pairs`` and ``plan.module.ModulePlan``), and
    whether a large module builds quickly first (``build``)."""

    func: Func
    donated: Mapping[int, int]
    quick: bool = False


class Planned(NamedTuple):
    """The ``plan`` stage's output: the module and what lowering reads about it."""

    module: Module
    plan: ModulePlan


def prepare(entry: Entry, _: Entry) -> Module:
    """``func`` and its callees, as the backend compiles them."""
    func = entry.func
    module = Module.of(func)
    if any(not isinstance(t, TensorType) for t in [*func.in_types, *func.out_types]):
        raise Unsupported("a compiled function cannot take or return a stack")
    check_size(module)
    module = hoist_scalars(concatenate_pieces(outer_products(module)))
    if config.columns():
        module = split_columns(module)
        if config.verifying():
            verify(module)
    return module


def plan(entry: Entry, module: Module) -> Planned:
    return Planned(module, plan_module(module, entry.donated))


def lower(_: Entry, planned: Planned) -> LoweredModule:
    return lower_module(*planned)


def loop_passes(_: Entry, lowered: LoweredModule) -> LoweredModule:
    return lowered._replace(loops=run_loop_passes(lowered.loops, runs_parallel))


def emit(entry: Entry, lowered: LoweredModule) -> Source:
    return module_source(entry.func, lowered, entry.donated)


def build(entry: Entry, src: Source) -> Compiled:
    """The module built, quickly first where ``entry`` asks and it is large (``QUICK_
    LINES``): then its ``upgrade`` builds it as asked."""
    lines = src.text.count("\n") + 1
    quick = entry.quick and lines >= QUICK_LINES and quick_builds()
    with reported(f"compiling {entry.func.name} ({lines} lines of C)"):
        built = build_module(src.text, src.name, headers=HEADERS, libraries=needed(src.text),
                             quick=quick)
    compiled = Compiled(entry.func, built, [Site.of(e) for e in src.checks],
                        [Printed.of(e) for e in src.prints], src.text)
    if built_quickly(built):
        compiled.upgrade = functools.partial(build, entry._replace(quick=False), src)
    return compiled


def describe_plan(planned: Planned) -> str:
    """The plan as text: per function what it donates, per block (nested ones indented)
    how many equations it has and what the plan decided about them."""
    lines = []
    for k, func in enumerate(planned.module.funcs.values()):
        fp = planned.plan.funcs[id(func)]
        donated = planned.plan.donated.get(id(func), {}) if func is not planned.module.main \
            else planned.plan.entry_donated
        lines.append(f"pbf_{k} {func.name}: {len(donated)} parameters donated, "
                     f"{len(fp.dest)} results computed in the caller's buffers")
        for depth, blk in _blocks(func.block, 1):
            lines.append("  " * depth + _describe_block(blk, fp))
    return "\n".join(lines) + "\n"


def _blocks(blk: Block, depth: int) -> Iterator[tuple[int, Block]]:
    yield depth, blk
    for e in blk.eqns:
        for name in e.op.blocks:
            yield from _blocks(e.params[name], depth + 1)


def _describe_block(blk: Block, fp: FuncPlan) -> str:
    mem = fp.blocks[id(blk)]
    values = [id(o) for e in blk.eqns for o in e.outputs]
    eqns = [id(e) for e in blk.eqns]
    runs = ", ".join(f"{len(r)} at {k}" for k, r in mem.runs.items()) or "none"
    facts = [(values, "fused", fp.fusible), (values, "placed in concatenations", fp.placed),
             (values, "stored into columns", fp.column_targets),
             (values, "updated by element", fp.element_writes),
             (eqns, "read by element", fp.element_reads),
             (eqns, "products with epilogues", fp.epilogues)]
    counts = ", ".join(f"{sum(x in seen for x in ids)} {what}" for ids, what, seen in facts)
    return (f"block: {len(blk.eqns)} equations; runs: {runs}; {counts}; "
            f"{len(mem.last)} buffers, {len(mem.views)} views")


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Entry, Any], Any]  # (what is compiled, the last stage's output)
    show: Callable[[Any], str] | None  # its output as text, for PULLBACK_DUMP


def _loops(lowered: LoweredModule) -> str:
    return format_module(lowered.loops)


STAGES: list[Stage] = [
    Stage("prepare", prepare, str),
    Stage("plan", plan, describe_plan),
    Stage("lower", lower, _loops),
    Stage("loops", loop_passes, _loops),
    Stage("c", emit, lambda src: src.text),
    Stage("build", build, None),
]


def run(func: Func, until: str = STAGES[-1].name, donated: Mapping[int, int] | None = None,
        quick: bool = False) -> Any:
    """The output of stage ``until`` for ``func`` (whose caller hands over the array
    parameters ``donated`` maps to results; ``quick``: see ``Entry``), every stage before
    it run in order (each printed when ``PULLBACK_DUMP`` names it).  Stages may rewrite
    what the stage before made (the loop passes rewrite functions in place): to look at a
    stage's output, run the pipeline up to it."""
    entry = Entry(func, MappingProxyType(dict(donated or {})), quick)
    value: Any = entry
    for stage in STAGES:
        value = stage.run(entry, value)
        if stage.show is not None and config.dumps(stage.name):
            print(stage.show(value))
        if stage.name == until:
            return value
    raise ValueError(f"no stage {until!r}; the stages: {', '.join(s.name for s in STAGES)}")
