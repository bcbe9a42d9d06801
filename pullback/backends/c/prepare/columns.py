"""Column splitting: arrays with a short last axis (``(p, 3)`` points, ``(p, 11)``
cameras, ``(p, 2)`` residuals) computed as that many ``(p,)`` columns.

Programs vectorised over many small records slice the record axis (``x[:, 0:3]``,
``x[:, 2:3]``), concatenate along it (``np.cross``), reduce over it (a norm) and
broadcast along it (``keepdims``).  Kept whole, each of those is a loop of its own over
a differently shaped array, so the element-wise chains between them cannot run as one
kernel and every intermediate goes through memory.  Split into columns they are all
equations over the one shape ``(p,)``: slices, concatenations and pads only renumber
columns, a reduction over the record axis is a chain of element-wise ops, a gather of
table rows is one gather per column, and fusion then runs the whole chain as a single
loop over the records.  A value is only assembled again (a concatenation of its
columns) where something needs it whole: a result, a product, a nested block.

The rewrite works on a copy of the module (the caller's IR is not touched) before the
C backend lowers it; a block where it meets anything unexpected stays as it was.
``PULLBACK_COLUMNS=0`` turns it off (to compare).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ....errors import CompileError
from ....ir.core import Atom, Block, Eqn, Lit, Module, Var
from ....ir.op import OPS
from ....ir.rewrite import free_vars, substitute
from ....ir.types import TensorType
from ....passes.walk import FunctionPass
from ..plan.fusion import POINTWISE, REDUCE

#: The longest last axis that is split into columns.
MAX_COLUMNS = 32
#: Arrays with fewer rows than this are left whole (splitting them saves nothing).
MIN_ROWS = 64
#: Ops reading columns, placed as early as their operands allow.
_EARLY = {"slice", "reshape", "gather"}
#: Ops that combine columns of their operands into columns of their result.
_COLUMN_OPS = {"slice", "concatenate", "pad", *REDUCE}


def _candidate(a: Atom) -> bool:
    """Whether ``a`` is an array whose last axis is short enough to split."""
    t = a.type
    return (isinstance(a, Var) and isinstance(t, TensorType) and t.ndim >= 2 and
            1 <= t.shape[-1] <= MAX_COLUMNS and math.prod(t.shape[:-1]) >= MIN_ROWS)


def _only_last(eqn: Eqn, x: TensorType) -> bool:
    """Whether a slice or pad of ``x`` changes its last axis only."""
    p = eqn.params
    if eqn.op.name == "slice":
        return all(p["start"][k] == 0 and p["limit"][k] == x.shape[k] and
                   p["stride"][k] == 1 for k in range(x.ndim - 1))
    return all(p["lo"][k] == 0 and p["hi"][k] == 0 and p["interior"][k] == 0
               for k in range(x.ndim - 1))


def _links(eqn: Eqn) -> tuple[list[Atom], bool] | None:
    """The array values ``eqn`` computes column by column (its output first, then the
    operands whose columns it reads), and whether it moves or combines columns (so that
    splitting pays); None when it cannot work by columns."""
    name = eqn.op.name
    if len(eqn.outputs) != 1:
        return None
    out = eqn.outputs[0]
    if name in REDUCE:
        (x,) = eqn.inputs
        if _candidate(x) and tuple(eqn.params["axes"]) == (x.type.ndim - 1,):
            return [x], True
        return None
    if not _candidate(out):
        if name == "reshape" and _candidate(eqn.inputs[0]) and \
                eqn.inputs[0].type.shape == out.type.shape + (1,):
            return [eqn.inputs[0]], True
        return None
    shape = out.type.shape
    if name in POINTWISE:
        if all(a.type.shape in ((), shape) for a in eqn.inputs):
            return [out, *[a for a in eqn.inputs if a.type.shape == shape]], False
        return None
    if name == "broadcast_in_dim":
        (x,) = eqn.inputs
        dims = tuple(eqn.params["dims"])
        if dims and dims[-1] == len(shape) - 1:
            return [out, x], x.type.shape[-1] != shape[-1]
        # spread along the last axis: that pays for a record's own value (``keepdims``),
        # not for a value of another axis (an image's channel bias spread over its rows)
        return [out], x.type.shape != () and dims == tuple(range(len(shape) - 1))
    if name == "reshape":
        x = eqn.inputs[0]
        if shape == x.type.shape + (1,):
            return [out], True
        return None
    if name in ("slice", "pad"):
        x = eqn.inputs[0]
        return ([out, x], True) if _only_last(eqn, x.type) else None
    if name == "concatenate":
        if eqn.params["axis"] == len(shape) - 1:
            return [out, *eqn.inputs], True
        return None
    if name == "gather":
        x, idx = eqn.inputs
        if eqn.params["axis"] < x.type.ndim - 1:
            return [out], False
        return None
    return None


def _split_values(blk: Block) -> set[int]:
    """The values of ``blk`` to compute as columns: the outputs of equations that can
    work by columns, connected through such equations to one that moves or combines
    columns."""
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        while parent.setdefault(a, a) != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    made: set[int] = set()
    marked: list[int] = []
    for e in blk.eqns:
        found = _links(e)
        if found is None:
            continue
        vals, pays = found
        ids = [id(v) for v in vals if _candidate(v)]
        if _candidate(e.outputs[0]):
            made.add(id(e.outputs[0]))
        for v in ids[1:]:
            parent[find(v)] = find(ids[0])
        if pays and ids:
            marked.append(ids[0])
    roots = {find(v) for v in marked}
    return {v for v in made if find(v) in roots}


class _Splitter:
    """Rewrites one block: the equations of split values (and those reading them by
    columns) are dropped and their columns computed where first needed."""

    def __init__(self, blk: Block, split: set[int]):
        self.blk = blk
        self.split = split
        self.producer = {id(o): e for e in blk.eqns for o in e.outputs}
        self.groups: list[list[Eqn]] = [[] for _ in range(len(blk.eqns) + 1)]
        self.current = 0  # the group new equations go to: the equation being rewritten
        self.group_of: dict[int, int] = {}  # a value: the group defining it
        self.cols: dict[int, list[Atom]] = {}
        self.col_memo: dict[tuple[int, int], Atom] = {}
        self.whole_memo: dict[int, Atom] = {}
        self.lazy = {id(e) for e in blk.eqns if self.is_lazy(e)}
        self.nested: list[tuple[Block, dict[int, Atom]]] = []

    def is_lazy(self, e: Eqn) -> bool:
        """Whether ``e`` is computed by columns (its outputs on demand)."""
        if len(e.outputs) != 1:
            return False
        if id(e.outputs[0]) in self.split:
            return True
        name = e.op.name
        return ((name in REDUCE or name == "reshape") and _links(e) is not None and
                id(e.inputs[0]) in self.split)

    # -- emission --------------------------------------------------------------------

    def emit(self, name: str, inputs: Sequence[Atom], params: dict, loc,
             out: Var | None = None) -> Var:
        """A new equation, placed just before the equation that needs it (so chains of
        columns stay together, as one run of element-wise equations), or for the reads
        of columns (``_EARLY``), right after its operands (so a run that starts before
        the reading equations can read them too)."""
        op = OPS[name]
        (t,) = op.infer_types([a.type for a in inputs], params)
        if out is None:
            out = Var(t)
        elif out.type != t:
            raise _Bail(f"{name} gives {t}, not {out.type}")
        at = self.current
        if name in _EARLY:
            at = max([self.group_of.get(id(a), 0) for a in inputs], default=0)
        self.groups[at].append(Eqn(op, inputs, [out], params, loc))
        self.group_of[id(out)] = at
        return out

    def run(self) -> None:
        for k, e in enumerate(self.blk.eqns):
            if id(e) in self.lazy:
                continue
            self.current = k
            e.inputs = [self.whole(a) for a in e.inputs]
            inner_free = [v for inner in e.blocks() for v in free_vars(inner)]
            mapping = {id(v): w for v in inner_free if (w := self.whole(v)) is not v}
            if mapping:
                self.nested.extend((inner, mapping) for inner in e.blocks())
            self.groups[k].append(e)
            self.group_of.update((id(o), k) for o in e.outputs)
        self.current = len(self.blk.eqns)
        self.blk.results = [self.whole(r) for r in self.blk.results]
        self.blk.eqns = [e for g in self.groups for e in g]
        for inner, mapping in self.nested:  # only once nothing can fail
            substitute(inner, mapping)

    # -- values ----------------------------------------------------------------------

    def whole(self, a: Atom) -> Atom:
        """``a`` as one array (assembled from its columns if it was split)."""
        if not isinstance(a, Var):
            return a
        got = self.whole_memo.get(id(a))
        if got is not None:
            return got
        e = self.producer.get(id(a))
        if e is None or id(e) not in self.lazy:
            return a
        if id(a) in self.split:
            t = a.type
            parts = [self.emit("reshape", [c], {"shape": t.shape[:-1] + (1,)}, e.loc)
                     if c.type.shape == t.shape[:-1] else c for c in self.columns(a)]
            parts = [self.emit("broadcast_in_dim", [c], {"shape": t.shape[:-1] + (1,),
                                                         "dims": ()}, e.loc)
                     if c.type.shape == () else c for c in parts]
            got = self.emit("concatenate", parts, {"axis": t.ndim - 1}, e.loc, out=a) \
                if len(parts) > 1 else self.emit("reshape", parts, {"shape": t.shape}, e.loc,
                                                 out=a)
        elif e.op.name == "reshape":  # (..., 1) -> (...): the one column
            got = self.col(e.inputs[0], 0)
        else:  # a reduction over the last axis
            cols = self.columns(e.inputs[0])
            op = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "max",
                  "reduce_min": "min"}[e.op.name]
            got = cols[0]
            for c in cols[1:]:
                got = self.emit(op, [got, c], {}, e.loc)
            if got.type != a.type:
                raise _Bail("a reduction's type changed")
        self.whole_memo[id(a)] = got
        return got

    def col(self, a: Atom, j: int) -> Atom:
        """Column ``j`` of ``a`` (an array of ``a``'s shape without its last axis)."""
        if isinstance(a, Lit):
            t = a.type
            return Lit(np.ascontiguousarray(np.asarray(a.value)[..., j]).reshape(t.shape[:-1]),
                       TensorType(t.shape[:-1], t.dtype))
        if id(a) in self.split:
            return self.columns(a)[j]
        key = (id(a), j)
        got = self.col_memo.get(key)
        if got is None:
            w = self.whole(a)
            t = w.type
            piece = self.emit("slice", [w], {
                "start": (0,) * (t.ndim - 1) + (j,), "limit": t.shape[:-1] + (j + 1,),
                "stride": (1,) * t.ndim}, None)
            got = self.emit("reshape", [piece], {"shape": t.shape[:-1]}, None)
            self.col_memo[key] = got
        return got

    def columns(self, v: Var) -> list[Atom]:
        """The columns of a split value, computed (with what they read) on first use."""
        got = self.cols.get(id(v))
        if got is not None:
            return got
        e = self.producer[id(v)]
        name, loc, t = e.op.name, e.loc, v.type
        k, rows = t.shape[-1], t.shape[:-1]
        if name in POINTWISE:
            got = [self.emit(name, [self.whole(a) if a.type.shape == () else self.col(a, j)
                                    for a in e.inputs], dict(e.params), loc)
                   for j in range(k)]
        elif name == "broadcast_in_dim":
            (x,) = e.inputs
            dims = tuple(e.params["dims"])
            if dims and dims[-1] == t.ndim - 1:
                sources = [self.col(x, j if x.type.shape[-1] == k else 0) for j in range(k)]
                dims = dims[:-1]
            else:
                sources = [self.whole(x)] * k
            got = [s if s.type.shape == rows and dims == tuple(range(len(rows))) else
                   self.emit("broadcast_in_dim", [s], {"shape": rows, "dims": dims}, loc)
                   for s in sources]
        elif name == "reshape":  # (...) -> (..., 1)
            got = [self.whole(e.inputs[0])]
        elif name == "slice":
            s, st = e.params["start"][-1], e.params["stride"][-1]
            got = [self.col(e.inputs[0], s + j * st) for j in range(k)]
        elif name == "concatenate":
            got = [self.col(x, j) for x in e.inputs for j in range(x.type.shape[-1])]
        elif name == "pad":
            x, value = e.inputs
            lo, gap, n = e.params["lo"][-1], e.params["interior"][-1] + 1, x.type.shape[-1]
            fill: Atom | None = None
            got = []
            for j in range(k):
                q, r = divmod(j - lo, gap)
                if r == 0 and 0 <= q < n:
                    got.append(self.col(x, q))
                else:
                    if fill is None:
                        fill = self.emit("broadcast_in_dim", [self.whole(value)],
                                         {"shape": rows, "dims": ()}, loc)
                    got.append(fill)
        elif name == "gather":
            x, idx = e.inputs
            got = [self.emit("gather", [self.col(x, j), self.whole(idx)], dict(e.params), loc)
                   for j in range(k)]
        else:
            raise _Bail(f"no columns for {name}")
        if len(got) != k or any(c.type.shape != rows or c.type.dtype != t.dtype
                                for c in got):
            raise _Bail(f"columns of {name} do not fit {t}")
        self.cols[id(v)] = got
        return got


class _Bail(Exception):
    """The block is left as it was."""


def split_block(blk: Block) -> None:
    """Rewrite ``blk`` and the blocks nested in it in place (a block the rewrite cannot
    handle stays as it was)."""
    for e in blk.eqns:
        for inner in e.blocks():
            split_block(inner)
    split = _split_values(blk)
    if not split:
        return
    eqns, results = list(blk.eqns), list(blk.results)
    inputs = [list(e.inputs) for e in eqns]
    try:
        _Splitter(blk, split).run()
    except (_Bail, CompileError):  # an op refusing its columns' types, say
        blk.eqns, blk.results = eqns, results
        for e, ins in zip(eqns, inputs, strict=True):
            e.inputs = ins


_PASS = FunctionPass(lambda block, rw: split_block(block))


def split_columns(module: Module) -> Module:
    """A copy of ``module`` whose functions compute short-last-axis arrays by columns."""
    main = _PASS(module.main)
    return Module.of(main)
