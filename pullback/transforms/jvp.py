"""Forward mode: a block and tangents of its inputs give the tangents of its results.

One pass over the IR: each equation is copied and followed by its op's ``jvp`` rule;
control flow recurses into its blocks, which then carry tangents next to the primal
values (a loop carries the tangents of its active values, a recursive function gets a
forward-mode twin that calls itself).  A tangent ``None`` is a symbolic zero; it is
made concrete only where a block must return one.  Blocks must be closed
(``closure.close_func``).

The pass pushes ``lanes`` tangents at once: each value has a *bundle* of that many
tangents (None when all are zero), the rules run once per lane, and blocks carry the
lanes that are not zero.  The primal is computed once for all of them: a Jacobian of a
few inputs, or the gradient of a loop with few parameters, needs no tape and no repeated
primal.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..errors import UnsupportedError
from ..ir.builder import Builder, current, declare_func
from ..ir.core import Atom, Block, Eqn, Func, Var
from ..ir.rewrite import Env, clone_eqn, inline
from ..ir.types import StackType, TensorType
from ..ops import stack as St
from ..ops.derivs import zeros
from .activity import block_active, differentiable, loop_active
from .closure import close_func
from .fit import fit

_serial = itertools.count()

#: The tangents of one value, one per lane (None: all zero).
Bundle = tuple  # tuple[Atom | None, ...]


def tangent_or_zero(t: Atom | None, typ) -> Atom:
    if t is not None:
        return t
    return St.stack_new() if isinstance(typ, StackType) else zeros(typ)


class ForwardMode:
    """Emits tangent-carrying copies of blocks into the current builder, ``lanes``
    tangents per value."""

    def __init__(self, lanes: int = 1):
        self.lanes = lanes
        self.twins: dict[int, Func] = {}

    def block(self, block: Block, primals: Sequence[Atom],
              tangents: Sequence[Bundle | None]) -> tuple[list[Atom], list[Bundle | None]]:
        env, tenv = Env(), {}
        env.bind(block.params, primals)
        for p, t in zip(block.params, tangents, strict=True):
            if t is not None:
                tenv[id(p)] = _fitted(t, p.type)
        for eqn in block.eqns:
            self.eqn(eqn, env, tenv)
        return [env[r] for r in block.results], [tenv.get(id(r)) for r in block.results]

    def eqn(self, eqn: Eqn, env: Env, tenv: dict) -> None:
        ins = [env[a] for a in eqn.inputs]
        tins = [tenv.get(id(a)) for a in eqn.inputs]
        makes_stack = any(isinstance(o.type, StackType) for o in eqn.outputs)
        if all(t is None for t in tins) and not makes_stack:
            current().frame.eqns.append(clone_eqn(eqn, env))
            return
        tins = [self.stacks() if t is None and isinstance(a.type, StackType) else t
                for a, t in zip(ins, tins, strict=True)]
        with current().at(eqn.loc):
            handler = _CONTROL.get(eqn.op.name)
            if handler is not None:
                outs, touts = handler(self, eqn, ins, tins)
            else:
                outs = current().emit(eqn.op, ins, eqn.params, eqn.loc)
                per_lane = [self.rule(eqn, ins, [_lane(t, j) for t in tins], outs)
                            for j in range(self.lanes)]
                touts = [_bundle(lane[i] for lane in per_lane) for i in range(len(outs))]
        env.bind(eqn.outputs, outs)
        for o, t in zip(eqn.outputs, touts, strict=True):
            if t is not None and differentiable(o.type):
                tenv[id(o)] = _fitted(t, o.type)

    def stacks(self) -> Bundle:
        return tuple(St.stack_new() for _ in range(self.lanes))

    def rule(self, eqn: Eqn, ins, tins, outs) -> list:
        if not any(differentiable(o.type) for o in outs) or all(t is None for t in tins):
            return [None] * len(outs)
        if eqn.op.jvp is None:
            raise UnsupportedError(f"{eqn.op.name} has no derivative rule")
        return list(eqn.op.jvp(ins, tins, outs, **eqn.params))

    def flat(self, bundles: Sequence[Bundle | None], like: Sequence[Atom],
             masks: Sequence[Sequence[bool]]) -> list[Atom]:
        """The lanes the ``masks`` select, value by value, zeros made concrete."""
        return [tangent_or_zero(_lane(t, j), x.type)
                for t, x, m in zip(bundles, like, masks, strict=True)
                for j in range(self.lanes) if m[j]]

    def split(self, res: Sequence[Atom], n: int, masks: Sequence[Sequence[bool]]):
        """Results ``(*outs, *the lanes the masks select)`` as outs and bundles."""
        outs, extra = list(res[:n]), iter(res[n:])
        return outs, [_bundle(next(extra) if m[j] else None for j in range(self.lanes))
                      for m in masks]

    def masks(self, bundles: Sequence[Bundle | None]) -> list[tuple[bool, ...]]:
        """Per value, which of its lanes are not symbolic zeros."""
        return [tuple(_lane(t, j) is not None for j in range(self.lanes)) for t in bundles]

    def per_lane(self, masks: Sequence[Sequence[bool]], activity) -> list[tuple[bool, ...]]:
        """``activity(lane j's mask per value) -> active per result`` for every lane, as
        masks per result: lanes are independent, so each is analysed on its own."""
        lanes = [activity([m[j] for m in masks]) for j in range(self.lanes)]
        return [tuple(lane[i] for lane in lanes) for i in range(len(lanes[0]))]

    # -- control flow -------------------------------------------------------------

    def region(self, block: Block, primal_types, active: Sequence[Sequence[bool]],
               out_active: Sequence[Sequence[bool]], prefix: Sequence = ()) -> Block:
        """A copy of ``block`` taking the tangents of its parameters' ``active`` lanes and
        returning those of its results' ``out_active`` lanes (zeros where it has none)."""
        params = [Var(t) for t in primal_types]
        tparams = [_bundle(Var(t) if a else None for a in m)
                   for t, m in zip(primal_types, active, strict=True)]
        new = Block([*prefix, *params, *[v for t in tparams if t is not None for v in t
                                         if v is not None]])
        with current().into(new):
            outs, touts = self.block(block, [*prefix, *params], [None] * len(prefix) + tparams)
            extra = self.flat(touts, outs, out_active)
        new.results = [*outs, *extra]
        return new

    def cond(self, eqn: Eqn, ins, tins):
        pred, *xs = ins
        active = self.masks(tins[1:])
        types = [x.type for x in xs]
        then, orelse = eqn.params["then"], eqn.params["orelse"]

        def probe(lane: list[bool]) -> list[bool]:
            return [a or b for a, b in zip(self._probe(then, types, lane),
                                           self._probe(orelse, types, lane), strict=True)]

        out_active = self.per_lane(active, probe)
        blocks = {k: self.region(eqn.params[k], types, active, out_active)
                  for k in ("then", "orelse")}
        res = current().emit("cond", [pred, *xs, *self.flat(tins[1:], xs, active)], blocks)
        return self.split(res, len(eqn.outputs), out_active)

    def _probe(self, block: Block, types, active) -> list[bool]:
        return block_active(block, [a or isinstance(t, StackType) for t, a in
                                    zip(types, active, strict=True)], stacks=True)

    def loop(self, eqn: Eqn, ins, tins):
        is_for = eqn.op.name == "for_loop"
        bounds, xs = (ins[:3], ins[3:]) if is_for else ([], ins)
        tx = tins[3:] if is_for else tins
        active = self.per_lane(self.masks(tx), lambda lane: loop_active(
            eqn, [False] * len(bounds) + lane, stacks=True))
        types = [x.type for x in xs]
        body = eqn.params["body"]
        index = [Var(body.params[0].type)] if is_for else []
        new_body = self.region(body, types, active, active, prefix=index)
        params = {"body": new_body, **_options(eqn)}
        if not is_for:
            params["cond"] = self._loop_cond(eqn.params["cond"], types, active)
        res = current().emit(eqn.op, [*bounds, *xs, *self.flat(tx, xs, active)], params)
        return self.split(res, len(xs), active)

    def _loop_cond(self, cond: Block, types, active) -> Block:
        params = [Var(t) for t in types]
        new = Block([*params, *[Var(t) for t in _masked(types, active)]])
        with current().into(new):
            new.results = inline(cond, params)
        return new

    def call(self, eqn: Eqn, ins, tins):
        callee = eqn.params["callee"]
        every = [self.every(x.type) for x in ins]
        res = current().emit("call", [*ins, *self.flat(tins, ins, every)],
                             {"callee": self.twin(callee)})
        return self.split(res, len(eqn.outputs), [self.every(t) for t in callee.out_types])

    def every(self, t) -> tuple[bool, ...]:
        """All lanes of a differentiable type, none of another."""
        return (differentiable(t),) * self.lanes

    def twin(self, func: Func) -> Func:
        """The forward-mode twin of a called function: every differentiable parameter
        takes its lanes of tangents and every differentiable result returns them."""
        if id(func) in self.twins:
            return self.twins[id(func)]
        active = [self.every(t) for t in func.in_types]
        outs = [self.every(t) for t in func.out_types]
        twin = declare_func(f"{func.name}_jvp{next(_serial)}",
                            [*func.in_types, *_masked(func.in_types, active)],
                            [*func.out_types, *_masked(func.out_types, outs)])
        self.twins[id(func)] = twin
        with Builder():
            twin.block = self.region(func.block, func.in_types, active, outs)
        return twin

    def inline_body(self, eqn: Eqn, ins, tins):
        """A checkpoint (forward mode has nothing to save) or the primal of a custom_vjp:
        differentiate the wrapped block."""
        name = "body" if eqn.op.name == "checkpoint" else "primal"
        return self.block(eqn.params[name], ins, tins)

    def custom_jvp(self, eqn: Eqn, ins, tins):
        """The user's rule, ``rule(*xs, *tangents of float xs) -> (*outs, *tangents)``,
        once per lane."""
        floats = [differentiable(x.type) for x in ins]
        outs_float = [differentiable(o.type) for o in eqn.outputs]
        n = len(eqn.outputs)
        outs, lanes = None, []
        for j in range(self.lanes):
            tangents = [tangent_or_zero(_lane(t, j), x.type)
                        for t, x, f in zip(tins, ins, floats, strict=True) if f]
            res = inline(eqn.params["rule"], [*ins, *tangents])
            outs = outs or list(res[:n])
            lanes.append(iter(res[n:]))
        return outs, [tuple(next(lane) for lane in lanes) if f else None for f in outs_float]


def _lane(t: Bundle | None, j: int) -> Atom | None:
    return None if t is None else t[j]


def _fitted(t: Bundle, typ) -> Bundle:
    return tuple(None if x is None else fit(x, typ) for x in t)


def _masked(types: Sequence, masks: Sequence[Sequence[bool]]) -> list:
    """Each type once per lane its mask selects: the types of the tangents a block
    takes or returns."""
    return [t for t, m in zip(types, masks, strict=True) for a in m if a]


def _bundle(ts) -> Bundle | None:
    ts = tuple(ts)
    return None if all(t is None for t in ts) else ts


def _options(eqn: Eqn) -> dict:
    return {k: eqn.params[k] for k in eqn.op.optional if k in eqn.params}


_CONTROL = {
    "cond": ForwardMode.cond,
    "while_loop": ForwardMode.loop,
    "for_loop": ForwardMode.loop,
    "call": ForwardMode.call,
    "checkpoint": ForwardMode.inline_body,
    "custom_vjp": ForwardMode.inline_body,
    "custom_jvp": ForwardMode.custom_jvp,
}


def jvp_emit(func: Func, primals: Sequence[Atom], tangents: Sequence[Bundle | None],
             lanes: int = 1) -> tuple[list[Atom], list[Bundle | None]]:
    """Emit ``func`` and its forward derivative into the current builder: per parameter a
    bundle of ``lanes`` tangents (or None), per result the same."""
    return ForwardMode(lanes).block(close_func(func).block, primals, tangents)


def jvp_func(func: Func, active: Sequence[bool] | None = None, lanes: int = 1) -> Func:
    """``f(*primals, *tangents) -> (*outs, *out_tangents)``: ``lanes`` tangents (one after
    the other) for each ``active`` floating-point parameter (default: all of them) and
    for each floating-point result (zeros where it does not depend on them)."""
    active = [differentiable(t) and (active is None or a)
              for t, a in zip(func.in_types, active or func.in_types, strict=True)]
    with Builder() as b:
        primals = [b.param(t) for t in func.in_types]
        tangents = [tuple(b.param(t) for _ in range(lanes)) if a else None
                    for t, a in zip(func.in_types, active, strict=True)]
        mode = ForwardMode(lanes)
        outs, touts = mode.block(close_func(func).block, primals, tangents)
        extra = mode.flat(touts, outs, [mode.every(o.type) for o in outs])
        return b.finish(f"{func.name}_jvp", [*outs, *extra])


def forward_agrees(func: Func) -> bool:
    """Whether forward mode gives the derivative reverse mode would: no ``custom_vjp``
    (forward mode differentiates its primal, not the user's rule) and a ``jvp`` rule for
    every op with a differentiable result."""
    for f in (func, *func.callees()):
        for eqn in f.block.walk():
            if eqn.op.name == "custom_vjp" or (
                    eqn.op.name not in _CONTROL and eqn.op.jvp is None
                    and any(differentiable(o.type) for o in eqn.outputs)):
                return False
    return True


def has_loops(func: Func) -> bool:
    """Whether reverse mode would keep a tape: a loop or a call anywhere in ``func``."""
    return any(e.op.name in ("for_loop", "while_loop", "call") for e in func.block.walk())


def scalar_only(func: Func) -> bool:
    """Whether every floating-point value ``func`` computes is a scalar (its arithmetic
    is bound by latency, not throughput: forward-mode lanes run beside the primal).  A
    tape (a stack, from a reverse pass inside) is not."""
    return all(not differentiable(o.type)
               or (isinstance(o.type, TensorType) and o.type.size <= 1)
               for f in (func, *func.callees()) for e in f.block.walk() for o in e.outputs)
