"""Batching: a function's IR run on ``size`` lanes at once, the pass behind ``vmap``.

Each value is an atom and its batch dim (``ops/batching.py``): the axis that runs over
the lanes, or None when every lane sees the same value.  Equations whose operands are
all unbatched are copied as they are; the others go through their op's ``batch`` rule.
Control flow is batched here, with a *mask* (bool, one per lane, or None: all lanes)
saying which lanes a block runs for:

* ``cond`` on a batched predicate runs both branches, each masked to its lanes, and
  selects the results per lane;
* ``while_loop`` with a batched condition runs while any lane goes on; a lane that is
  done keeps its carried values (frozen), so each lane makes the trips it would alone;
* ``for_loop`` with batched bounds runs the longest lane's trip count, each lane masked
  to its own;
* a ``call`` (recursion on run-time data) calls a batched twin of the function that
  takes the mask, and a call inside it is skipped when no lane of its mask is live, so
  the recursion ends when every lane's would;
* effects are masked: a ``check`` fails only for a live lane, and raises what the first
  failing lane raises; ``print`` prints each live lane's values, lane by lane.

Lanes that a mask turns off still compute (their values are thrown away), so an op that
would fault on their values is given safe operands instead (indices, matrices).

Reverse-mode tapes: a tape pushed in one place is popped in another, so both places
must agree on what an element is.  Where control flow is batched by the mask above,
every element pushed holds all lanes (an unbatched value is spread over them); where
lanes must run apart (a tape inside a batched ``cond``/loop, where lanes push different
numbers of elements, and any ``call`` with a tape), the equation runs once per lane in a
loop (``ops.batching.lane_loop``), lanes in order where it pushes and in reverse order
where it pops, so that each lane finds its own elements on top.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..errors import UnsupportedError
from ..ir.builder import Builder, current, declare_func
from ..ir.core import Atom, Block, Eqn, Func, Lit, Var
from ..ir.rewrite import Env, clone_eqn
from ..ir.types import StackType, TensorType, bool_, int64
from ..ops import elementwise as E
from ..ops import reduce as R
from ..ops.batching import Dim, at, batched_type, full, lane_loop, lane_of, lane_type
from ..ops.derivs import const, zeros
from .closure import close_func
from .fit import fit

_serial = itertools.count()

#: Lanes a while loop of scalars per lane runs at a time (``Batching.chunked``): 64
#: measured best of 16 to 256 on batched Newton (2-core AMD EPYC; 4x the speed of all
#: lanes at once, whose state goes through memory every trip).
CHUNK = 64


class Batching:
    """Emits batched copies of blocks into the current builder, for ``size`` lanes."""

    def __init__(self, size: int):
        self.size = size
        self.twins: dict[int, Func] = {}

    # -- blocks and equations -----------------------------------------------------

    def block(self, block: Block, ins: Sequence[Atom], dims: Sequence[Dim],
              mask: Atom | None = None) -> tuple[list[Atom], list[Dim]]:
        """Emit ``block`` on batched ``ins``; its results and their batch dims."""
        env, denv = Env(), {}
        env.bind(block.params, ins)
        for p, d in zip(block.params, dims, strict=True):
            if d is not None:
                denv[id(p)] = d
        for eqn in block.eqns:
            self.eqn(eqn, env, denv, mask)
        return [env[r] for r in block.results], [denv.get(id(r)) for r in block.results]

    def eqn(self, eqn: Eqn, env: Env, denv: dict[int, Dim], mask: Atom | None) -> None:
        ins = [env[a] for a in eqn.inputs]
        dims = [denv.get(id(a)) if isinstance(a, Var) else None for a in eqn.inputs]
        if not _needs_batching(eqn, dims, mask):
            current().frame.eqns.append(clone_eqn(eqn, env))
            return
        with current().at(eqn.loc):
            handler = _CONTROL.get(eqn.op.name)
            if handler is not None:
                outs, odims = handler(self, eqn, ins, dims, mask)
            else:
                if eqn.op.batch is None:
                    raise UnsupportedError(f"pb.vmap: {eqn.op.name} has no batching rule")
                if mask is not None and eqn.op.name in _GUARDED:
                    ins, dims = _GUARDED[eqn.op.name](self, ins, dims, mask)
                outs, odims = eqn.op.batch(ins, dims, self.size, **eqn.params)
        env.bind(eqn.outputs, outs)
        for o, d in zip(eqn.outputs, odims, strict=True):
            if d is not None:
                denv[id(o)] = d

    # -- blocks of control ops ----------------------------------------------------

    def types(self, lanes: Sequence, dims: Sequence[Dim]) -> list:
        """Types of values of lane types ``lanes`` batched at ``dims``."""
        return [t if d is None else batched_type(t, self.size, d)
                for t, d in zip(lanes, dims, strict=True)]

    def region(self, block: Block, dims: Sequence[Dim], mask: Atom | None,
               out_dims: Sequence[Dim] | None = None) -> tuple[Block, list[Dim]]:
        """A batched copy of ``block`` whose parameters are batched at ``dims``; its
        results are moved to ``out_dims`` (by default, where they come out)."""
        new = Block([Var(t) for t in self.types(block.in_types, dims)])
        with current().into(new):
            outs, odims = self.block(block, new.params, dims, mask)
            if out_dims is not None:
                outs = [self.move(o, d, want) for o, d, want in zip(outs, odims, out_dims,
                                                                   strict=True)]
                odims = list(out_dims)
        new.results = outs
        return new, odims

    def out_dims(self, blocks: Sequence[Block], dims: Sequence[Dim],
                 mask: Atom | None) -> list[Dim]:
        """Where the results of ``blocks`` (alternatives, such as branches) are put so
        that they agree: axis 0 where any block batches the result."""
        found: list[Dim] = [None] * len(blocks[0].results)
        for blk in blocks:
            _, odims = self.region(blk, dims, mask)  # a probe, thrown away
            found = [0 if a is not None or b is not None else None
                     for a, b in zip(found, odims, strict=True)]
        return found

    def move(self, x: Atom, d: Dim, want: Dim, lane=None) -> Atom:
        """``x`` batched at ``want``; an unbatched value of lane type ``lane`` (where
        an op or a block declares it) has that type exactly, weak flag included."""
        if want is None:
            if d is not None:
                raise AssertionError("internal: a batched value where none can be")
            return x if lane is None else fit(x, lane)
        return at(x, d, self.size, want)

    # -- cond ---------------------------------------------------------------------

    def cond(self, eqn: Eqn, ins, dims, mask):
        pred, *xs = ins
        pd, *xd = dims
        blocks = [eqn.params["then"], eqn.params["orelse"]]
        if pd is not None and _touches_stack(eqn):
            return self.lanes(eqn, ins, dims, mask)
        if pd is None:
            want = self.out_dims(blocks, xd, mask)
            then, _ = self.region(blocks[0], xd, mask, want)
            orelse, _ = self.region(blocks[1], xd, mask, want)
            xs = [self.move(x, d, d, a.type) for x, d, a in zip(xs, xd, eqn.inputs[1:],
                                                               strict=True)]
            outs = current().emit("cond", [pred, *xs], {"then": then, "orelse": orelse})
            return outs, want
        p = at(pred, pd, self.size)
        taken = p if mask is None else E.and_(mask, p)
        untaken = E.not_(p) if mask is None else E.and_(mask, E.not_(p))
        t_outs, t_dims = self.block(blocks[0], xs, xd, taken)
        e_outs, e_dims = self.block(blocks[1], xs, xd, untaken)
        outs, odims = [], []
        for a, ad, b, bd, o in zip(t_outs, t_dims, e_outs, e_dims, eqn.outputs, strict=True):
            d = ad if ad is not None else bd if bd is not None else 0
            shape = o.type.shape
            outs.append(E.select(full(p, 0, self.size, shape, d),
                                 full(a, ad, self.size, shape, d),
                                 full(b, bd, self.size, shape, d)))
            odims.append(d)
        return outs, odims

    # -- loops ----------------------------------------------------------------------

    def carried(self, eqn: Eqn, dims: Sequence[Dim], index: Dim | str, mask) -> tuple:
        """Where a loop's carried values sit (axis 0 for those any trip batches) and
        whether its condition is batched; ``index`` is the for-loop index's dim, or
        ``"none"`` for a while loop."""
        body = eqn.params["body"]
        prefix = [] if index == "none" else [index]
        cd: list[Dim] = [None if d is None else 0 for d in dims]
        while True:
            if "cond" in eqn.params:
                _, c = self.region(eqn.params["cond"], cd, mask)
                if c[0] is not None:
                    return cd, True
            _, bd = self.region(body, [*prefix, *cd], mask)
            new = [0 if a is not None or b is not None else None
                   for a, b in zip(cd, bd, strict=True)]
            if new == cd:
                return cd, False
            cd = new

    def while_loop(self, eqn: Eqn, ins, dims, mask):
        cd, batched_cond = self.carried(eqn, dims, "none", mask)
        if not batched_cond:
            xs = [self.move(x, d, c, a.type) for x, d, c, a in zip(ins, dims, cd, eqn.inputs,
                                                                  strict=True)]
            cond, _ = self.region(eqn.params["cond"], cd, mask, [None])
            body, _ = self.region(eqn.params["body"], cd, mask, cd)
            outs = current().emit("while_loop", xs, {**eqn.params, "cond": cond, "body": body})
            return outs, cd
        if _touches_stack(eqn):
            return self.lanes(eqn, ins, dims, mask)
        if self.size >= 2 * CHUNK and all(o.type.shape == () for o in eqn.outputs):
            return self.chunked(eqn, ins, dims, mask)
        return self.masked_loop(eqn, ins, dims, mask, None)

    def chunked(self, eqn: Eqn, ins, dims, mask):
        """A while loop of scalars per lane, run ``CHUNK`` lanes at a time: each chunk
        loops until its own lanes are done (not until the slowest of all lanes is), with
        its state in a few vectors instead of going through memory every trip."""
        body, size = eqn.params["body"], self.size
        changing = [i for i, (r, p) in enumerate(zip(body.results, body.params, strict=True))
                    if r is not p]
        xs = [x if d is None else at(x, d, size) for x, d in zip(ins, dims, strict=True)]
        b = current()

        def chunk(k, *bufs):
            start = E.min_(E.mul(k, Lit(np.int64(CHUNK))), Lit(np.int64(size - CHUNK)))

            def part(x):
                return b.emit("dynamic_slice", [x, start], {"sizes": (CHUNK,)})[0]

            lanes = [x if d is None else part(x) for x, d in zip(xs, dims, strict=True)]
            lane_dims = [None if d is None else 0 for d in dims]
            outs, odims = Batching(CHUNK).masked_loop(
                eqn, lanes, lane_dims, None if mask is None else part(mask), None)
            return [b.emit("dynamic_update_slice", [buf, at(outs[i], odims[i], CHUNK), start])[0]
                    for buf, i in zip(bufs, changing, strict=True)]

        bufs = [at(ins[i], dims[i], size) for i in changing]
        loop = b.block([TensorType((), int64), *[x.type for x in bufs]], chunk)
        res = iter(b.emit("for_loop", [Lit(np.int64(0)), Lit(np.int64(-(-size // CHUNK))),
                                       Lit(np.int64(1)), *bufs], {"body": loop}))
        outs = [next(res) if i in changing else ins[i] for i in range(len(ins))]
        return outs, [0 if i in changing else dims[i] for i in range(len(ins))]

    def masked_loop(self, eqn: Eqn, ins, dims, mask, trips):
        """A loop whose lanes stop at different trips: every carried value that
        changes is batched, and a lane that is done keeps its values.  ``trips`` is
        None for a while loop, else (index, trip counts per lane) of a for loop."""
        body = eqn.params["body"]
        offset = 0 if trips is None else 1
        kept = [r is p for r, p in zip(body.results, body.params[offset:], strict=True)]
        cd = [None if k and d is None else 0 for d, k in zip(dims, kept, strict=True)]
        xs = [self.move(x, d, c, t.type) for x, d, c, t in zip(ins, dims, cd, eqn.outputs,
                                                              strict=True)]
        types = self.types([x.type for x in eqn.outputs], cd)
        b = current()

        def live(params, j=None):
            """Which lanes make this trip (bool, batched at 0)."""
            if trips is None:
                (c,), (c_d,) = self.block(eqn.params["cond"], params, cd, mask)
                c = at(c, c_d, self.size)
                return c if mask is None else E.and_(mask, c)
            return E.lt(j, trips[1])

        def step(*params):
            j, carry = (None, list(params)) if trips is None else (params[0], list(params[1:]))
            active = live(carry, j)
            inner = carry if trips is None else [trips[0](j), *carry]
            in_dims = cd if trips is None else [trips[2], *cd]
            outs, odims = self.block(body, inner, in_dims, active)
            new = []
            for o, od, old, k, t in zip(outs, odims, carry, kept, eqn.outputs, strict=True):
                if k:
                    new.append(old)
                    continue
                shape = t.type.shape
                new.append(E.select(full(active, 0, self.size, shape, 0),
                                    at(o, od, self.size), old))
            return new

        if trips is None:
            cond = b.block(types, lambda *ps: R.reduce_max(live(list(ps)), axes=(0,)))
            body_b = b.block(types, step)
            outs = b.emit("while_loop", xs, {**eqn.params, "cond": cond, "body": body_b})
        else:
            n_max = R.reduce_max(trips[1], axes=(0,))
            index_t = eqn.params["body"].params[0].type
            body_b = b.block([index_t, *types], step)
            zero = Lit(np.zeros((), index_t.dtype.np))
            one = Lit(np.ones((), index_t.dtype.np))
            outs = b.emit("for_loop", [zero, n_max, one, *xs], {**eqn.params, "body": body_b})
        return outs, cd

    def for_loop(self, eqn: Eqn, ins, dims, mask):
        (lo, hi, step), xs = ins[:3], ins[3:]
        bd, xd = dims[:3], dims[3:]
        if all(d is None for d in bd):
            cd, _ = self.carried(eqn, xd, None, mask)
            xs = [self.move(x, d, c, t.type) for x, d, c, t in zip(xs, xd, cd, eqn.outputs,
                                                                  strict=True)]
            body, _ = self.region(eqn.params["body"], [None, *cd], mask, cd)
            outs = current().emit("for_loop", [lo, hi, step, *xs],
                                  {**eqn.params, "body": body})
            return outs, cd
        if _touches_stack(eqn):
            return self.lanes(eqn, ins, dims, mask)
        lo, hi, step = (x if d is None else at(x, d, self.size)
                        for x, d in zip(ins[:3], bd, strict=True))
        self.check_emit(E.ne(step, const(0, step.type)), bd[2] if bd[2] is None else 0,
                        [], [], mask, "ValueError", "range() arg 3 must not be zero")
        safe = E.select(E.eq(step, const(0, step.type)), const(1, step.type), step)
        span = E.sub(E.add(E.sub(hi, lo), safe), E.sign(safe))
        n = E.max_(E.floordiv(span, safe), const(0, span.type))
        n = at(n, 0 if n.type.shape else None, self.size)
        if mask is not None:
            n = E.select(mask, n, const(0, n.type))
        index_dim = None if bd[0] is None and bd[2] is None else 0

        def index(j):
            return E.add(lo, E.mul(j, step))

        return self.masked_loop(eqn, xs, xd, mask, (index, n, index_dim))

    # -- calls (recursion) --------------------------------------------------------------

    def call(self, eqn: Eqn, ins, dims, mask):
        callee = eqn.params["callee"]
        if _touches_stack(eqn) or _stacks_in(callee):
            return self.lanes(eqn, ins, dims, mask)
        twin = self.twin(callee)
        live = mask if mask is not None else full(Lit(np.True_), None, self.size, ())
        xs = [live, *[at(x, d, self.size) for x, d in zip(ins, dims, strict=True)]]
        b = current()
        types = [x.type for x in xs]
        then = b.block(types, lambda *ps: b.emit("call", list(ps), {"callee": twin}))
        skip = b.block(types, lambda *ps: [zeros(t) for t in twin.out_types])
        outs = b.emit("cond", [R.reduce_max(live, axes=(0,)), *xs],
                      {"then": then, "orelse": skip})
        return outs, [0] * len(outs)

    def twin(self, func: Func) -> Func:
        """The batched twin of ``func``: takes the mask and every parameter batched at
        0, returns every result batched at 0."""
        if id(func) in self.twins:
            return self.twins[id(func)]
        n = len(func.in_types)
        twin = declare_func(f"{func.name}_vmap{next(_serial)}",
                            [TensorType((self.size,), bool_), *self.types(func.in_types,
                                                                          [0] * n)],
                            self.types(func.out_types, [0] * len(func.out_types)))
        self.twins[id(func)] = twin
        with Builder():
            live, *params = twin.block.params
            new = Block([live, *params])
            with current().into(new):
                outs, odims = self.block(func.block, params, [0] * n, live)
                new.results = [at(o, d, self.size) for o, d in zip(outs, odims, strict=True)]
            twin.block = new
        return twin

    # -- lanes apart, whole blocks batched ----------------------------------------------

    def lanes(self, eqn: Eqn, ins, dims, mask):
        """``eqn`` run once per lane in a loop: pushes lanes in order, pops in reverse."""
        pops, pushes = _stack_ops(eqn)
        if pops and pushes:
            raise UnsupportedError(
                f"pb.vmap: {eqn.op.name} both pushes and pops a reverse-mode tape on lanes "
                "that take different paths; vmap the function before differentiating it")

        def emit_lane(lane: list[Atom]) -> list[Atom]:
            env = Env()
            env.bind(eqn.inputs, [fit(x, a.type) for x, a in zip(lane, eqn.inputs,
                                                                 strict=True)])
            copy = clone_eqn(eqn, env)
            current().frame.eqns.append(copy)
            return list(copy.outputs)

        outs = lane_loop(emit_lane, ins, dims, self.size, [o.type for o in eqn.outputs],
                         mask, reverse=pops)
        return outs, [None if isinstance(o.type, StackType) else 0 for o in eqn.outputs]

    def wrapped(self, eqn: Eqn, ins, dims, mask):
        """checkpoint and custom rules: every operand, result and block value batched at
        axis 0, so the blocks (a user's rule included) see batched values throughout."""
        xs = [at(x, d, self.size) for x, d in zip(ins, dims, strict=True)]
        blocks = {}
        for name in eqn.op.blocks:
            blk = eqn.params[name]
            blocks[name], _ = self.region(blk, [0] * len(blk.params), mask,
                                          [0] * len(blk.results))
        outs = current().emit(eqn.op, xs, {**eqn.params, **blocks})
        return outs, [0] * len(outs)

    # -- effects and tapes --------------------------------------------------------------

    def check(self, eqn: Eqn, ins, dims, mask):
        ok, *xs = ins
        self.check_emit(ok, dims[0], xs, dims[1:], mask, eqn.params["exc"], eqn.params["fmt"])
        return [], []

    def check_emit(self, ok: Atom, d: Dim, xs, dims, mask, exc: str, fmt: str) -> None:
        """A check that fails when any live lane's ``ok`` is false, with the message
        of the first such lane."""
        if d is None and mask is None:
            lane = [lane_of(at(x, xd, self.size), Lit(np.int64(0))) if xd is not None else x
                    for x, xd in zip(xs, dims, strict=True)]
            current().emit("check", [ok, *lane], {"exc": exc, "fmt": fmt})
            return
        good = at(ok, d, self.size) if d is not None else full(ok, None, self.size, ())
        if mask is not None:
            good = E.or_(good, E.not_(mask))
        first = R.argmin(good, axis=0)
        lane = [lane_of(at(x, xd, self.size), first) if xd is not None else x
                for x, xd in zip(xs, dims, strict=True)]
        current().emit("check", [R.reduce_min(good, axes=(0,)), *lane],
                       {"exc": exc, "fmt": fmt})

    def stack_push(self, eqn: Eqn, ins, dims, mask):
        tape, x = ins
        return current().emit("stack_push", [tape, at(x, dims[1], self.size)]), [None]

    def stack_pop(self, eqn: Eqn, ins, dims, mask):
        elem = batched_type(eqn.params["elem"], self.size)
        return current().emit("stack_pop", ins, {"elem": elem}), [None, 0]

    def stack_new(self, eqn: Eqn, ins, dims, mask):
        return current().emit("stack_new", []), [None]


def _guard(position: int, safe):
    """Operand ``position`` replaced by ``safe(lane type)`` in the lanes the mask turns
    off, whose values an op must not fault on (an index out of range, a matrix that is
    not positive definite)."""

    def guard(self: Batching, ins, dims, mask):
        ins, dims = list(ins), list(dims)
        x, d = ins[position], dims[position]
        t = lane_type(x.type, d)
        ins[position] = E.select(full(mask, 0, self.size, t.shape),
                                 full(x, d, self.size, t.shape),
                                 full(safe(t), None, self.size, t.shape))
        dims[position] = 0
        return ins, dims

    return guard


_indices = _guard(1, lambda t: Lit(np.zeros((), t.dtype.np)))

#: Ops that could fault on the values of lanes a mask turns off, and the guard that
#: makes their operand safe there.
_GUARDED = {
    "gather": _indices,
    "scatter": _indices,
    "scatter_add": _indices,
    "cholesky": _guard(0, lambda t: Lit(np.broadcast_to(np.eye(t.shape[-1], dtype=t.dtype.np),
                                                        t.shape), t)),
}


def _needs_batching(eqn: Eqn, dims: Sequence[Dim], mask: Atom | None) -> bool:
    if any(d is not None for d in dims) or _touches_stack(eqn):
        return True
    return mask is not None and (eqn.op.effect or _has_effects(eqn))


def _touches_stack(eqn: Eqn) -> bool:
    return any(isinstance(a.type, StackType) for a in (*eqn.inputs, *eqn.outputs))


def _inner_eqns(eqn: Eqn):
    """Every equation inside ``eqn``'s blocks and the functions it calls."""
    seen: set[int] = set()
    todo = [eqn]
    while todo:
        e = todo.pop()
        blocks = list(e.blocks())
        callee = e.params.get("callee")
        if isinstance(callee, Func) and id(callee) not in seen:
            seen.add(id(callee))
            blocks.append(callee.block)
        for blk in blocks:
            for inner in blk.walk():
                yield inner
                if "callee" in inner.params:
                    todo.append(inner)


def _has_effects(eqn: Eqn) -> bool:
    return any(e.op.effect for e in _inner_eqns(eqn))


def _stacks_in(func: Func) -> bool:
    return any(isinstance(t, StackType) for t in (*func.in_types, *func.out_types)) or any(
        e.op.name.startswith("stack_") for e in func.block.walk())


def _stack_ops(eqn: Eqn) -> tuple[bool, bool]:
    """Whether ``eqn`` pops and whether it pushes a tape it is given."""
    names = {e.op.name for e in _inner_eqns(eqn)} | {eqn.op.name}
    given = any(isinstance(a.type, StackType) for a in eqn.inputs)
    return given and "stack_pop" in names, given and "stack_push" in names


_CONTROL = {
    "cond": Batching.cond,
    "while_loop": Batching.while_loop,
    "for_loop": Batching.for_loop,
    "call": Batching.call,
    "checkpoint": Batching.wrapped,
    "custom_jvp": Batching.wrapped,
    "custom_vjp": Batching.wrapped,
    "check": Batching.check,
    "debug_print": Batching.lanes,  # each live lane prints, lanes in order
    "stack_push": Batching.stack_push,
    "stack_pop": Batching.stack_pop,
    "stack_new": Batching.stack_new,
}


def vmap_emit(func: Func, ins: Sequence[Atom], dims: Sequence[Dim],
              size: int) -> tuple[list[Atom], list[Dim]]:
    """Emit ``func`` run on ``size`` lanes into the current builder: its operands are
    batched at ``dims``; returns its results and their batch dims."""
    return Batching(size).block(close_func(func).block, ins, dims)
