"""Memory planning: where each buffer of a block is read last, and which results share
an operand's buffer.

The block that makes a buffer owns it and frees it (back to the runtime's pool) right
after its last read, a read inside a nested block counting as one at its equation; a
result moves out to the consumer.  ``plan`` computes those last reads from the fusion
decisions (a run's equations are read at its first, a fused value at its readers');
``lower`` then emits ``Alloc``/``Free`` and reuses dying buffers in place (the loop-IR
pass ``loops.arena`` then places the entry's top-level buffers on the call's arena).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ....ir.core import Atom, Block, Eqn, Var
from ....ir.rewrite import block_readers, free_vars, read_counts
from ....ir.types import TensorType

#: Ops whose array results are buffers made elsewhere, which they hand over: a callee's
#: results, and a popped array (a large one is the buffer that was pushed,
#: ``lower.control``).  Such a result is never computed in another buffer.
HANDED = ("call", "stack_pop")


def destinations(blk: Block) -> dict[int, int]:
    """Array results of the entry block that an equation of it allocates (not a
    control-flow result, which moves in): each is computed straight into the caller's
    output buffer of the first result it is."""
    made = {id(o) for e in blk.eqns if not e.op.blocks and e.op.name not in HANDED
            for o in e.outputs}
    dest: dict[int, int] = {}
    for k, r in enumerate(blk.results):
        if isinstance(r, Var) and r.type.shape != () and id(r) in made and id(r) not in dest:
            dest[id(r)] = k
    # a result that reshapes a value only it reads: that value is computed in the
    # caller's buffer too, and the reshape is a view of it
    producer = {id(o): e for e in blk.eqns for o in e.outputs}
    reads = read_counts(blk)
    for r, k in list(dest.items()):
        e = producer[r]
        x = e.inputs[0] if e.op.name == "reshape" else None
        if isinstance(x, Var) and id(x) in made and id(x) not in dest and \
                reads.get(id(x)) == 1 and x.type.dtype == e.outputs[0].type.dtype:
            dest[id(x)] = k
    return dest



def placed_in_concats(blk: Block, fusible: Collection[int], dest: Mapping[int, int]
                      ) -> dict[int, tuple[Var, int]]:
    """Values of ``blk`` computed straight into the buffer of the concatenation that is
    their only reader (directly or through a reshape), at their offset in it: operands
    of a concatenation whose operands are contiguous stretches of the result (the axes
    before the joined one all have size 1), made by an equation that allocates its
    result.  The concatenation then copies nothing for them."""
    made = {id(o): e for e in blk.eqns if not e.op.blocks and e.op.name not in
            (*HANDED, "reshape") for o in e.outputs}
    reads = read_counts(blk)
    reshaped = {id(e.outputs[0]): e.inputs[0] for e in blk.eqns if e.op.name == "reshape"}
    placed: dict[int, tuple[Var, int]] = {}
    for e in blk.eqns:
        if e.op.name != "concatenate":
            continue
        out, axis = e.outputs[0], e.params["axis"]
        if id(out) in fusible or any(d != 1 for d in out.type.shape[:axis]):
            continue
        offset = 0
        for x in e.inputs:
            y = reshaped.get(id(x), x) if reads.get(id(x)) == 1 else x
            if isinstance(y, Var) and isinstance(x, Var) and id(y) in made and \
                    reads.get(id(y)) == 1 and id(y) not in fusible and id(y) not in dest \
                    and id(x) not in dest and id(y) not in placed and y.type.shape != () \
                    and y.type.dtype == out.type.dtype and x is not out:
                placed[id(y)] = (out, offset)
            offset += x.type.size
    return placed


def column_targets(blk: Block, fusible: Collection[int], runs: Mapping[int, Sequence[Eqn]]
                   ) -> dict[int, tuple[Var, int, Var]]:
    """Values of ``blk`` that, outside the run computing them, only a reshape adding a
    last axis of size 1 reads (its other readers are run members the kernel computes
    from it, not values computed again in later loops), itself read only by a
    concatenation along that axis (a column of a record array): the run's kernel may
    store one straight into that column of the concatenation's buffer.  Each maps to the
    concatenation's result, the column, and the reshape."""
    run_of = {id(e): k for k, run in runs.items() for e in run}
    made_by = {id(o): e for e in blk.eqns for o in e.outputs}
    readers = block_readers(blk)
    producer = {id(o): e for e in blk.eqns for o in e.outputs}
    found: dict[int, tuple[Var, int, Var]] = {}
    for e in blk.eqns:
        if e.op.name != "concatenate" or id(e.outputs[0]) in fusible or \
                e.params["axis"] != e.outputs[0].type.ndim - 1:
            continue
        col = 0
        for x in e.inputs:
            r = readers.get(id(x), [])
            p = producer.get(id(x))
            if len(r) == 1 and p is not None and p.op.name == "reshape" and \
                    isinstance(x, Var) and x.type.shape[-1] == 1:
                v = p.inputs[0]
                own = run_of.get(id(made_by.get(id(v))), -1)
                others = [c for c in readers.get(id(v), []) if c is not p]
                if isinstance(v, Var) and v.type.shape == x.type.shape[:-1] and own >= 0 \
                        and all(c is not None and run_of.get(id(c)) == own and
                                id(c.outputs[0]) not in fusible for c in others) \
                        and v.type.dtype == x.type.dtype and e.inputs.count(x) == 1 and \
                        len(others) + 1 == len(readers.get(id(v), [])):
                    found[id(v)] = (e.outputs[0], col, x)
            col += x.type.shape[-1]
    return found


def views_of(eqn: Eqn, fusible: Collection[int], dest: Mapping[int, int]
             ) -> list[tuple[Var, Var]]:
    """``(result, operand)`` pairs of ``eqn`` where the result shares the operand's buffer:
    a reshape, and a loop's carries its body passes through unchanged."""
    name = eqn.op.name
    if name == "reshape":
        pairs = [(eqn.outputs[0], eqn.inputs[0])]
    elif name in ("for_loop", "while_loop"):
        body = eqn.params["body"]
        skip = 1 if name == "for_loop" else 0  # the iteration index
        xs = eqn.inputs[3:] if name == "for_loop" else eqn.inputs
        pairs = [(o, x) for o, x, p, r in zip(eqn.outputs, xs, body.params[skip:],
                                              body.results, strict=True) if r is p]
    else:
        return []
    return [(o, x) for o, x in pairs
            if isinstance(x, Var) and isinstance(x.type, TensorType) and x.type.shape != ()
            and o.type.shape != () and id(x) not in fusible and
            dest.get(id(o), -1) == dest.get(id(x), -1)]



@dataclass(frozen=True)
class BlockMemory:
    """Where a block's buffers are read.  Positions are equation indices (a run's
    equations are read at its first, a fused equation at its last consumer's; parameters
    at -1, results at ``len(eqns)``)."""

    runs: Mapping[int, tuple[Eqn, ...]]  # fusion's runs, by the index of their first
    pos: tuple[int, ...]  # per equation: where its operands are read
    root: Mapping[int, Var]  # a view's id: the value owning its buffer
    last: Mapping[int, int]  # a buffer-owning value's id: position of its last read
    views: frozenset[int]


def plan_block(blk: Block, runs: Mapping[int, Sequence[Eqn]], fusible: Collection[int],
               dest: Mapping[int, int]) -> BlockMemory:
    """Where each buffer of ``blk`` is read last (views extend their owner's life)."""
    eqns = blk.eqns
    readers: dict[int, list[int]] = {}
    for k, e in enumerate(eqns):
        for a in e.inputs:
            readers.setdefault(id(a), []).append(k)
    pos = list(range(len(eqns)))
    index = {id(e): k for k, e in enumerate(eqns)}
    for start, run in runs.items():
        for e in run:
            pos[index[id(e)]] = start
    for k in reversed(range(len(eqns))):
        outs = eqns[k].outputs
        if len(outs) == 1 and id(outs[0]) in fusible:
            pos[k] = max(pos[k], *(pos[r] for r in readers[id(outs[0])]))
    root: dict[int, Var] = {}
    views: set[int] = set()
    for e in eqns:
        for o, x in views_of(e, fusible, dest):
            root[id(o)] = root.get(id(x), x)
            views.add(id(o))
    last: dict[int, int] = {}

    def use(a: Atom, at: int) -> None:
        if isinstance(a, Var):
            r = id(root.get(id(a), a))
            last[r] = max(last.get(r, -1), at)

    for p in blk.params:
        use(p, -1)
    for k, e in enumerate(eqns):
        for a in [*e.outputs, *e.inputs, *(v for inner in e.blocks() for v in free_vars(inner))]:
            use(a, pos[k])
    for r in blk.results:
        use(r, len(eqns))
    return BlockMemory(MappingProxyType({k: tuple(run) for k, run in runs.items()}),
                       tuple(pos), MappingProxyType(root), MappingProxyType(last),
                       frozenset(views))
