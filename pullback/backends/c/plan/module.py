"""The plan of a module: every analysis lowering reads, computed up front and frozen.

Per function: where the entry's results are computed (``memory.destinations``), and per
block, nested ones included: products' epilogues, fusion's runs and fused values,
values placed in a concatenation's buffer or stored straight into its columns,
one-element reads and writes (``scalars``), and where each buffer is read last
(``memory.plan_block``).  Facts about values and equations are merged function-wide
(keyed by ``id``; each belongs to one block), the memory plan is kept per block.
Lowering only reads the plan; what it decides while it emits code is its own state.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ....ir.core import Block, Eqn, Func, Module, Var
from .donation import Donations, donations
from .fusion import Epilogue, epilogues, find_runs, fused_values
from .memory import BlockMemory, column_targets, destinations, placed_in_concats, plan_block
from .scalars import element_reads, element_writes


@dataclass(frozen=True)
class FuncPlan:
    """What lowering reads about one function's values, equations and blocks."""

    dest: Mapping[int, int]  # the entry's results computed in the caller's buffers
    blocks: Mapping[int, BlockMemory]  # by the block's id
    epilogues: Mapping[int, Epilogue]  # by the product's equation
    fusible: frozenset[int]  # values computed where read
    placed: Mapping[int, tuple[Var, int]]  # values computed in a concatenation's buffer
    column_targets: Mapping[int, tuple[Var, int, Var]]  # values a kernel may store
    producers: Mapping[int, Eqn]  # each value's equation
    element_reads: Mapping[int, Eqn]  # one-element slices: their 0-d reshape
    element_writes: frozenset[int]  # one-element updates read as 0-d values


@dataclass(frozen=True)
class ModulePlan:
    """``donated``: per called function, the array parameters it takes over (and the
    result each becomes); ``funcs``: each function's plan, by its id;
    ``entry_donated``: the entry's parameters its caller hands over, each with the
    result whose buffer it is (the result is computed there once the parameter is read
    for the last time, or copied there at the end)."""

    donated: Donations
    funcs: Mapping[int, FuncPlan]
    entry_donated: Mapping[int, int] = field(default_factory=dict)


def plan_module(module: Module, entry_donated: Mapping[int, int] = MappingProxyType({})
                ) -> ModulePlan:
    """The plan ``lower_module`` reads for ``module``."""
    funcs = {id(f): plan_func(f, entry=f is module.main,
                              handed=set(entry_donated.values()) if f is module.main else ())
             for f in module.funcs.values()}
    return ModulePlan(donations(module), MappingProxyType(funcs), entry_donated)


def plan_func(func: Func, entry: bool, handed: Collection[int] = ()) -> FuncPlan:
    """``func``'s plan; only the module's ``entry`` computes results in the caller's
    buffers, except the ``handed`` ones: those are its parameters' buffers, which the
    result may not be written to before the parameter's last read."""
    dest = {v: k for v, k in destinations(func.block).items() if k not in handed} \
        if entry else {}
    blocks: dict[int, BlockMemory] = {}
    products: dict[int, Epilogue] = {}
    fusible: set[int] = set()
    placed: dict[int, tuple[Var, int]] = {}
    targets: dict[int, tuple[Var, int, Var]] = {}
    producers: dict[int, Eqn] = {}
    reads: dict[int, Eqn] = {}
    writes: set[int] = set()
    todo = [func.block]
    while todo:
        blk = todo.pop()
        if id(blk) in blocks:
            continue
        eps = epilogues(blk)
        runs = find_runs(blk, {id(e) for ep in eps.values() for e in ep.eqns})
        fused = fused_values(blk, runs, {id(ep.out) for ep in eps.values()})
        products.update(eps)
        fusible |= fused
        placed.update(placed_in_concats(blk, fused, dest))
        targets.update(column_targets(blk, fused, runs))
        producers.update((id(o), e) for e in blk.eqns for o in e.outputs)
        reads.update(element_reads(blk, fused))
        writes |= element_writes(blk, fused)
        blocks[id(blk)] = plan_block(blk, runs, fused, dest)
        todo.extend(_nested(blk))
    return FuncPlan(MappingProxyType(dest), MappingProxyType(blocks),
                    MappingProxyType(products), frozenset(fusible), MappingProxyType(placed),
                    MappingProxyType(targets), MappingProxyType(producers),
                    MappingProxyType(reads), frozenset(writes))


def _nested(blk: Block) -> list[Block]:
    return [inner for e in blk.eqns for inner in e.blocks()]
