"""Forward mode: a block and tangents of its inputs give the tangents of its results.

One pass over the IR: each equation is copied and followed by its op's ``jvp`` rule;
control flow recurses into its blocks, which then carry tangents next to the primal
values (a loop carries the tangents of its active values, a recursive function gets a
forward-mode twin that calls itself).  A tangent ``None`` is a symbolic zero; it is
made concrete only where a block must return one.  Blocks must be closed
(``closure.close_func``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..errors import UnsupportedError
from ..ir.builder import Builder, current, declare_func
from ..ir.core import Atom, Block, Eqn, Func, Var
from ..ir.rewrite import Env, clone_eqn, inline
from ..ir.types import StackType
from ..ops import stack as St
from ..ops.derivs import zeros
from .activity import block_active, differentiable, loop_active
from .closure import close_func
from .fit import fit

_serial = itertools.count()


def tangent_or_zero(t: Atom | None, typ) -> Atom:
    if t is not None:
        return t
    return St.stack_new() if isinstance(typ, StackType) else zeros(typ)


class ForwardMode:
    """Emits tangent-carrying copies of blocks into the current builder."""

    def __init__(self):
        self.twins: dict[int, Func] = {}

    def block(self, block: Block, primals: Sequence[Atom], tangents: Sequence[Atom | None]
              ) -> tuple[list[Atom], list[Atom | None]]:
        env, tenv = Env(), {}
        env.bind(block.params, primals)
        for p, t in zip(block.params, tangents, strict=True):
            if t is not None:
                tenv[id(p)] = fit(t, p.type)
        for eqn in block.eqns:
            self.eqn(eqn, env, tenv)
        return [env[r] for r in block.results], [tenv.get(id(r)) for r in block.results]

    def eqn(self, eqn: Eqn, env: Env, tenv: dict) -> None:
        ins = [env[a] for a in eqn.inputs]
        tins = [tenv.get(id(a)) for a in eqn.inputs]
        tins = [St.stack_new() if t is None and isinstance(a.type, StackType) else t
                for a, t in zip(ins, tins, strict=True)]
        makes_stack = any(isinstance(o.type, StackType) for o in eqn.outputs)
        if all(t is None for t in tins) and not makes_stack:
            current().frame.eqns.append(clone_eqn(eqn, env))
            return
        with current().at(eqn.loc):
            handler = _CONTROL.get(eqn.op.name)
            if handler is not None:
                outs, touts = handler(self, eqn, ins, tins)
            else:
                outs = current().emit(eqn.op, ins, eqn.params, eqn.loc)
                touts = self.rule(eqn, ins, tins, outs)
        env.bind(eqn.outputs, outs)
        for o, t in zip(eqn.outputs, touts, strict=True):
            if t is not None and differentiable(o.type):
                tenv[id(o)] = fit(t, o.type)

    def rule(self, eqn: Eqn, ins, tins, outs) -> list:
        if not any(differentiable(o.type) for o in outs):
            return [None] * len(outs)
        if eqn.op.jvp is None:
            raise UnsupportedError(f"{eqn.op.name} has no derivative rule")
        return list(eqn.op.jvp(ins, tins, outs, **eqn.params))

    # -- control flow -------------------------------------------------------------

    def region(self, block: Block, primal_types, active: Sequence[bool], out_active,
               prefix: Sequence = ()) -> Block:
        """A copy of ``block`` taking tangents of its ``active`` parameters and returning
        tangents of its ``out_active`` results (zeros where it has none)."""
        params = [Var(t) for t in primal_types]
        tparams = [Var(t) if a else None for t, a in zip(primal_types, active, strict=True)]
        new = Block([*prefix, *params, *[t for t in tparams if t is not None]])
        with current().into(new):
            outs, touts = self.block(block, [*prefix, *params], [None] * len(prefix) + tparams)
            extra = [tangent_or_zero(t, o.type)
                     for o, t, a in zip(outs, touts, out_active, strict=True) if a]
        new.results = [*outs, *extra]
        return new

    def cond(self, eqn: Eqn, ins, tins):
        pred, *xs = ins
        active = [t is not None for t in tins[1:]]
        types = [x.type for x in xs]
        probe = [self._probe(blk, types, active) for blk in (eqn.params["then"],
                                                            eqn.params["orelse"])]
        out_active = [a or b for a, b in zip(*probe, strict=True)]
        then, orelse = (self.region(eqn.params[k], types, active, out_active)
                        for k in ("then", "orelse"))
        res = current().emit("cond", [pred, *xs, *[t for t in tins[1:] if t is not None]],
                             {"then": then, "orelse": orelse})
        return _split(res, len(eqn.outputs), out_active)

    def _probe(self, block: Block, types, active) -> list[bool]:
        return block_active(block, [a or isinstance(t, StackType) for t, a in
                                    zip(types, active, strict=True)], stacks=True)

    def loop(self, eqn: Eqn, ins, tins):
        is_for = eqn.op.name == "for_loop"
        bounds, xs = (ins[:3], ins[3:]) if is_for else ([], ins)
        tx = tins[3:] if is_for else tins
        active = loop_active(eqn, [False] * len(bounds) + [t is not None for t in tx],
                             stacks=True)
        types = [x.type for x in xs]
        body = eqn.params["body"]
        index = [Var(body.params[0].type)] if is_for else []
        new_body = self.region(body, types, active, active, prefix=index)
        tangents = [tangent_or_zero(t, x.type) for t, x, a in zip(tx, xs, active, strict=True)
                    if a]
        params = {"body": new_body, **_options(eqn)}
        if not is_for:
            params["cond"] = self._loop_cond(eqn.params["cond"], types, active)
        res = current().emit(eqn.op, [*bounds, *xs, *tangents], params)
        return _split(res, len(xs), active)

    def _loop_cond(self, cond: Block, types, active) -> Block:
        params = [Var(t) for t in types]
        tparams = [Var(t) for t, a in zip(types, active, strict=True) if a]
        new = Block([*params, *tparams])
        with current().into(new):
            new.results = inline(cond, params)
        return new

    def call(self, eqn: Eqn, ins, tins):
        callee = eqn.params["callee"]
        twin = self.twin(callee)
        tangents = [tangent_or_zero(t, x.type) for t, x in zip(tins, ins, strict=True)
                    if differentiable(x.type)]
        res = current().emit("call", [*ins, *tangents], {"callee": twin})
        return _split(res, len(eqn.outputs), [differentiable(t) for t in callee.out_types])

    def twin(self, func: Func) -> Func:
        """The forward-mode twin of a called function: every differentiable parameter
        takes a tangent and every differentiable result returns one."""
        if id(func) in self.twins:
            return self.twins[id(func)]
        active = [differentiable(t) for t in func.in_types]
        outs = [differentiable(t) for t in func.out_types]
        twin = declare_func(
            f"{func.name}_jvp{next(_serial)}",
            [*func.in_types, *[t for t, a in zip(func.in_types, active, strict=True) if a]],
            [*func.out_types, *[t for t, a in zip(func.out_types, outs, strict=True) if a]])
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
        """The user's rule: ``rule(*xs, *tangents of float xs) -> (*outs, *tangents)``."""
        tangents = [tangent_or_zero(t, x.type) for t, x in zip(tins, ins, strict=True)
                    if differentiable(x.type)]
        res = inline(eqn.params["rule"], [*ins, *tangents])
        return _split(res, len(eqn.outputs), [differentiable(o.type) for o in eqn.outputs])


def _options(eqn: Eqn) -> dict:
    return {k: eqn.params[k] for k in eqn.op.optional if k in eqn.params}


def _split(res: Sequence[Atom], n: int, active: Sequence[bool]):
    outs, extra = list(res[:n]), iter(res[n:])
    return outs, [next(extra) if a else None for a in active]


_CONTROL = {
    "cond": ForwardMode.cond,
    "while_loop": ForwardMode.loop,
    "for_loop": ForwardMode.loop,
    "call": ForwardMode.call,
    "checkpoint": ForwardMode.inline_body,
    "custom_vjp": ForwardMode.inline_body,
    "custom_jvp": ForwardMode.custom_jvp,
}


def jvp_emit(func: Func, primals: Sequence[Atom], tangents: Sequence[Atom | None]
             ) -> tuple[list[Atom], list[Atom | None]]:
    """Emit ``func`` and its forward derivative into the current builder."""
    return ForwardMode().block(close_func(func).block, primals, tangents)


def jvp_func(func: Func, active: Sequence[bool] | None = None) -> Func:
    """``f(*primals, *tangents) -> (*outs, *out_tangents)``: tangents for the ``active``
    floating-point parameters (default: all of them) and for every floating-point result
    (zeros where it does not depend on them)."""
    active = [differentiable(t) and (active is None or a)
              for t, a in zip(func.in_types, active or func.in_types, strict=True)]
    with Builder() as b:
        primals = [b.param(t) for t in func.in_types]
        tangents = [b.param(t) if a else None for t, a in zip(func.in_types, active,
                                                             strict=True)]
        outs, touts = jvp_emit(func, primals, tangents)
        extra = [tangent_or_zero(t, o.type) for o, t in zip(outs, touts, strict=True)
                 if differentiable(o.type)]
        return b.finish(f"{func.name}_jvp", [*outs, *extra])
