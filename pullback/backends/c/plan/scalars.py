"""One-element windows as scalars: ``a[i, j]`` with run-time indices without a buffer.

NumPy indexing of one element stages as a one-element ``dynamic_slice`` and a
``reshape`` to 0-d; its reverse-mode cotangent adds a 0-d value into one element
(``reshape`` to a one-element array, then ``dynamic_update_slice``).  Lowered op by op,
each of those makes a one-element buffer: an allocation and a free around a single load
or store, which dominates scalar code such as a recursion over matrix entries.  The
pairs found here are lowered as one load into a C local, or as a store of the local.
"""

from __future__ import annotations

from ....ir.core import Block, Eqn
from ....ir.rewrite import free_vars


def _readers(blk: Block) -> tuple[dict[int, list[tuple[int, int]]], set[int]]:
    """Per value: the (equation index, operand position) reading it; and the values
    something else reads (a result, a nested block)."""
    readers: dict[int, list[tuple[int, int]]] = {}
    for k, e in enumerate(blk.eqns):
        for pos, a in enumerate(e.inputs):
            readers.setdefault(id(a), []).append((k, pos))
    other = {id(r) for r in blk.results}
    other |= {id(v) for e in blk.eqns for inner in e.blocks() for v in free_vars(inner)}
    return readers, other


def element_reads(blk: Block, fusible: set[int]) -> dict[int, Eqn]:
    """One-element ``dynamic_slice`` equations (by id) read only by the next equation, a
    ``reshape`` to 0-d: that reshape, which the pair lowers as one load."""
    readers, other = _readers(blk)
    out: dict[int, Eqn] = {}
    for k, e in enumerate(blk.eqns[:-1]):
        v = e.outputs[0] if len(e.outputs) == 1 else None
        if e.op.name != "dynamic_slice" or v is None or v.type.size != 1 or \
                id(v) in fusible or id(v) in other:
            continue
        nxt = blk.eqns[k + 1]
        if readers.get(id(v)) == [(k + 1, 0)] and nxt.op.name == "reshape" and \
                nxt.outputs[0].type.shape == ():
            out[id(e)] = nxt
    return out


def element_writes(blk: Block, fusible: set[int]) -> set[int]:
    """Values (by id) that reshape a 0-d value to one element and that only
    ``dynamic_update_slice`` reads, as its update: read as that 0-d value."""
    readers, other = _readers(blk)
    out: set[int] = set()
    for e in blk.eqns:
        if e.op.name != "reshape" or e.inputs[0].type.shape != ():
            continue
        v = e.outputs[0]
        uses = readers.get(id(v), [])
        if v.type.size == 1 and id(v) not in fusible and id(v) not in other and uses and \
                all(blk.eqns[k].op.name == "dynamic_update_slice" and pos == 1
                    for k, pos in uses):
            out.add(id(v))
    return out
