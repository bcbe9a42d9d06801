"""Reverse mode: the forward pass now, the backward pass when cotangents are given.

The forward pass copies each equation and records a *step*: a closure that emits the
equation's backward from its op's ``vjp`` rule.  Running the steps in reverse order
emits the backward pass.  Rules read forward values freely; which forward values the
backward needs (the *residuals*) is found afterwards, by looking for forward values the
backward reads:

* at the top level, forward and backward are in one function, so residuals are plain
  SSA values;
* inside a block that runs many times (a loop body, a branch, a recursive function)
  the residuals are pushed onto a run-time stack, the *tape*, at the end of each
  forward run and popped at the start of the matching backward run.  The tape is
  threaded through every control-flow op, so one stack serves a whole computation.

Control flow: ``cond`` saves its predicate and the taken branch pushes its residuals;
the backward is a ``cond`` on the same predicate.  ``for_loop`` runs backward over the
same indices in reverse.  ``while_loop`` counts its iterations and the backward is a
``for_loop`` of that count.  A recursive ``call`` calls a forward twin that pushes, and
its backward calls a backward twin that pops.  Values a block passes through unchanged
(loop invariants, branch operands) are read outside instead of being pushed.

Array cotangents through calls and branches: a backward twin, and the backward of each
branch, is handed the running cotangent of every array operand and returns it with its
own added, instead of returning an array of its own for the caller to add.  Together
with adding an indexed read's cotangent (zeros but for one window) into that window
only, a recursion reading ``a[i, j]`` costs O(1) per call in its backward, not
O(a.size): the C backend updates the handed-over buffer in place (``donation.py``).

A cotangent ``None`` is a symbolic zero; blocks are closed first
(``closure.close_func``).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from ..errors import UnsupportedError
from ..ir.builder import Builder, current, declare_func
from ..ir.core import Atom, Block, Eqn, Func, Lit, Var
from ..ir.liveness import prune
from ..ir.rewrite import Env, clone_eqn, free_vars, inline, substitute
from ..ir.types import StackType, TensorType, int64
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import index as Ix
from ..ops import shape as Sh
from ..ops import stack as St
from ..ops.derivs import const, zeros
from .activity import differentiable, eqn_active, loop_active
from .closure import close_func
from .fit import fit

_serial = itertools.count()


class Context:
    """The forward emission of one block: values, which are varied, backward steps and
    the tape as it is now (created when first needed at the top level)."""

    def __init__(self, tape: Atom | None):
        self.env = Env()
        self.varied: set[int] = set()
        self.steps: list[Callable[[Cotangents], None]] = []
        self.tape = tape
        self.btape: Atom | None = None  # the tape as the backward pass goes

    def is_varied(self, a: Atom) -> bool:
        return isinstance(a, Var) and id(a) in self.varied

    def mark(self, atoms: Sequence[Atom], varied: Sequence[bool]) -> None:
        self.varied.update(id(a) for a, v in zip(atoms, varied, strict=True)
                           if v and isinstance(a, Var))

    def take_tape(self) -> Atom:
        if self.tape is None:
            self.tape = St.stack_new()
        return self.tape


class Cotangents:
    """Accumulated cotangents of the varied forward values of a context."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.cts: dict[int, Atom] = {}

    def get(self, a: Atom) -> Atom | None:
        return self.cts.get(id(a)) if isinstance(a, Var) else None

    def get_or_zero(self, a: Atom) -> Atom:
        ct = self.get(a)
        if ct is not None:
            return ct
        return St.stack_new() if isinstance(a.type, StackType) else zeros(a.type)

    def add(self, a: Atom, ct: Atom | None) -> None:
        if ct is None or not self.ctx.is_varied(a):
            return
        ct = fit(ct, a.type)
        old = self.cts.get(id(a))
        if old is not None and isinstance(a.type, StackType):
            raise ValueError("internal: a stack got two cotangents")
        if old is None:
            self.cts[id(a)] = ct
            return
        window = _window(ct) if a.type.shape != () else None
        # zero but for one window (an indexed read's cotangent): add into that window
        # only, which the backend does in place, instead of adding whole arrays
        self.cts[id(a)] = E.add(old, ct) if window is None else _add_window(old, *window)

    def replace(self, a: Atom, ct: Atom) -> None:
        """``a``'s cotangent is now ``ct``, which already includes the old one."""
        if self.ctx.is_varied(a):
            self.cts[id(a)] = fit(ct, a.type)


class ReverseMode:
    def __init__(self):
        self.twins: dict[int, tuple[Func, Func]] = {}

    # -- forward ------------------------------------------------------------------

    def forward(self, ctx: Context, block: Block, ins: Sequence[Atom],
                varied: Sequence[bool]) -> list[Atom]:
        ctx.env.bind(block.params, ins)
        ctx.mark(ins, varied)
        for eqn in block.eqns:
            self.eqn(ctx, eqn)
        return [ctx.env[r] for r in block.results]

    def eqn(self, ctx: Context, eqn: Eqn) -> None:
        ins = [ctx.env[a] for a in eqn.inputs]
        vin = [ctx.is_varied(a) for a in ins]
        if not any(vin):
            current().frame.eqns.append(clone_eqn(eqn, ctx.env))
            return
        with current().at(eqn.loc):
            handler = _CONTROL.get(eqn.op.name)
            if handler is not None:
                outs, vout, step = handler(self, ctx, eqn, ins, vin)
            else:
                outs = current().emit(eqn.op, ins, eqn.params, eqn.loc)
                vout = eqn_active(eqn, vin, stacks=False)
                if any(vout) and eqn.op.vjp is None:
                    raise UnsupportedError(f"{eqn.op.name} has no derivative rule")
                step = partial(_rule_step, eqn, ins, outs)
        ctx.env.bind(eqn.outputs, outs)
        ctx.mark(outs, vout)
        if any(vout) or handler is not None:
            ctx.steps.append(step)

    # -- blocks that run many times -----------------------------------------------

    def region(self, block: Block, in_varied: Sequence[bool], out_varied: Sequence[bool],
               outer: dict[int, Callable[[Atom | None], Atom]],
               index: TensorType | None = None, carried: int | None = None,
               accumulate: Sequence[bool] = (), trips: int | None = None
               ) -> tuple[Block, Block, list[int]]:
        """The forward and backward blocks of ``block``, and the shifted carries.

        forward: ``(*params, tape) -> (*results, tape)``, pushing its residuals;
        backward: ``([index], *cts of out_varied results, *shifted, tape) -> (*cts of
        in_varied params, *shifted, tape)``, popping them.  The parameters marked in
        ``accumulate`` (varied ones) get a running cotangent, passed after the results'
        cotangents, that the backward adds theirs into and returns.  ``outer[k](index)`` gives,
        inside the backward, the value of parameter k when it need not be pushed (it is
        known outside).  ``trips``: how many times the loop runs, when constant.

        For a loop body whose carried values start at parameter ``carried``: when the
        backward reads both a carried value at the start of an iteration and its new
        value, the new value is not pushed, because it is the next iteration's start
        value, popped one backward step earlier.  The backward carries it from step to
        step (``shifted`` lists those carries; it starts with the loop's result)."""
        b = current()
        fparams = [Var(p.type, p.hint) for p in block.params]
        fwd = Block([*fparams, Var(StackType())])
        inner = Context(fwd.params[-1])
        with b.into(fwd):
            outs = self.forward(inner, block, fparams, in_varied)
        ct_params = [Var(o.type) for o, v in zip(outs, out_varied, strict=True) if v]
        jparam = [Var(index)] if index is not None else []
        start_tape = Var(StackType())
        accs = [(p, Var(p.type)) for p, a in zip(fparams, accumulate or [False] * len(fparams),
                                                 strict=True) if a]
        bwd = Block([*jparam, *ct_params, *[v for _, v in accs], start_tape])
        head = Block()  # the known values, put first once the rest is pruned
        with b.into(head):
            known = {id(fparams[k]): make(jparam[0] if jparam else None)
                     for k, make in outer.items()}
        with b.into(bwd):
            inner.btape = start_tape
            cts = Cotangents(inner)
            for o, c in zip([o for o, v in zip(outs, out_varied, strict=True) if v], ct_params,
                            strict=True):
                cts.add(o, c)
            for p, acc in accs:
                cts.add(p, acc)
            for step in reversed(inner.steps):
                step(inner, cts)
            cins = [cts.get_or_zero(p) for p, v in zip(fparams, in_varied, strict=True) if v]
        bwd.results = [*cins, inner.btape]
        prune(bwd)  # rules may compute what nobody reads: it must not cost a push
        defined = {id(p) for p in fparams} | {id(o) for e in fwd.eqns for o in e.outputs}
        residuals = [v for v in free_vars(bwd) if id(v) in defined and id(v) not in known]
        residuals, again = _recomputed(fwd, residuals, known, trips)
        pushed = {id(r) for r in residuals}
        shifted = [] if carried is None else [
            k for k, o in enumerate(outs) if isinstance(o, Var) and id(o) in pushed and
            id(fparams[carried + k]) in pushed and o is not fparams[carried + k]]
        news = {id(outs[k]) for k in shifted}
        residuals = [r for r in residuals if id(r) not in news]
        carry_in = [Var(outs[k].type) for k in shifted]
        bwd.params[-1:-1] = carry_in
        bwd.results[-1:-1] = [fparams[carried + k] for k in shifted]
        with b.into(fwd):
            tape = inner.tape
            for r in residuals:
                tape = St.stack_push(tape, r)
        fwd.results = [*outs, tape]
        known = {**known, **{id(outs[k]): c for k, c in zip(shifted, carry_in, strict=True)}}
        _pop_residuals(bwd, residuals, known, again, head.eqns)
        return fwd, bwd, shifted

    # -- control flow -------------------------------------------------------------

    def cond(self, ctx: Context, eqn: Eqn, ins, vin):
        pred, *xs = ins
        vout = eqn_active(eqn, vin, stacks=False)
        outer = {k: (lambda j, x=x: x) for k, x in enumerate(xs)}
        acc = [v and _accumulates(x.type) for x, v in zip(xs, vin[1:], strict=True)]
        (fthen, bthen, _), (felse, belse, _) = (
            self.region(eqn.params[k], vin[1:], vout, outer, accumulate=acc)
            for k in ("then", "orelse"))
        res = current().emit("cond", [pred, *xs, ctx.take_tape()],
                             {"then": fthen, "orelse": felse})
        outs, ctx.tape = res[:-1], res[-1]

        def step(ctx: Context, cts: Cotangents) -> None:
            couts = [cts.get_or_zero(o) for o, v in zip(outs, vout, strict=True) if v]
            varied = [x for x, v in zip(xs, vin[1:], strict=True) if v]
            accs, replaces = _accumulators(cts, varied, [_accumulates(x.type) for x in varied])
            back = current().emit("cond", [pred, *couts, *accs, ctx.btape],
                                  {"then": bthen, "orelse": belse})
            _absorb(cts, varied, back[:-1], replaces)
            ctx.btape = back[-1]

        return outs, vout, step

    def loop(self, ctx: Context, eqn: Eqn, ins, vin):
        is_for = eqn.op.name == "for_loop"
        bounds, xs = (ins[:3], ins[3:]) if is_for else ([], ins)
        body = eqn.params["body"]
        off = len(bounds) and 1
        vcarry = loop_active(eqn, vin, stacks=False)
        outer = {k + off: (lambda j, x=x: x) for k, x in enumerate(xs)
                 if body.results[k] is body.params[k + off]}
        if is_for:
            lo, hi, stride = bounds
            count = _trip_count(lo, hi, stride)
            outer[0] = lambda j: fit(E.add(lo, E.mul(E.sub(E.sub(count, const(1, lo.type)), j),
                                                     stride)), body.params[0].type)
            index = lo.type.strong()
        else:
            index = TensorType((), int64)
        every = eqn.params.get("checkpoint", 0)
        trips = int(count.value) if is_for and isinstance(count, Lit) else None
        fwd, bwd, shifted = self.region(body, [False] * off + vcarry, vcarry, outer, index,
                                        None if every else off, trips=trips)
        if every:
            outs, counted = self._snapshots(ctx, eqn, bounds, xs, every)
            count = count if is_for else counted
        elif is_for:
            res = current().emit("for_loop", [*bounds, *xs, ctx.take_tape()], {"body": fwd})
            outs, ctx.tape = res[:len(xs)], res[len(xs)]
        else:
            res = current().emit("while_loop", [*xs, ctx.take_tape(), Lit(np.int64(0))],
                                 {"cond": _counting(fwd, eqn.params["cond"], len(xs)),
                                  "body": fwd})
            outs, ctx.tape, count = res[:len(xs)], res[len(xs)], res[-1]

        varied = [k for k, v in enumerate(vcarry) if v]
        # an array the loop only reads: the backward adds into its running cotangent
        # (in place, element by element) instead of returning one to add here
        through = [body.results[k] is body.params[k + off] and _accumulates(xs[k].type)
                   for k in varied]

        def step(ctx: Context, cts: Cotangents) -> None:
            accs, replaces = _accumulators(cts, [xs[k] for k in varied], through)
            running = iter(accs)
            couts = [_plus(next(running), cts.get(outs[k])) if t else cts.get_or_zero(outs[k])
                     for k, t in zip(varied, through, strict=True)]
            if every:
                back = self._segments(ctx, couts, bounds, xs, count, every, fwd, bwd, index)
            else:
                back = current().emit("for_loop", [const(0, index), count, const(1, index),
                                                   *couts, *[outs[k] for k in shifted],
                                                   ctx.btape], {"body": bwd, "adjoint": True})
            _absorb(cts, [xs[k] for k in varied], back[:len(couts)], replaces)
            ctx.btape = back[-1]

        return outs, vcarry, step

    def _snapshots(self, ctx: Context, eqn: Eqn, bounds, xs, every: int):
        """The forward loop of a checkpointed loop: the plain body, pushing the carried
        values every ``every`` iterations; returns the results and the iteration count."""
        b = current()
        body = eqn.params["body"]
        types = [x.type for x in xs]
        counter = TensorType((), int64)
        index = [body.params[0].type] if bounds else []

        def snapshot_body(*params):
            i, carry = list(params[:len(index)]), list(params[len(index):len(index) + len(xs)])
            tape, count = params[-2:]
            due = E.eq(E.mod(count, Lit(np.int64(every))), Lit(np.int64(0)))

            def push(t, *values):
                for v in values:
                    t = St.stack_push(t, v)
                return [t]

            tape = C.cond(due, tape, *carry, then=b.block([StackType(), *types], push),
                          orelse=b.block([StackType(), *types], lambda t, *_: [t]))[0]
            new = inline(body, [*i, *carry])
            return [*new, tape, E.add(count, Lit(np.int64(1)))]

        blk = b.block([*index, *types, StackType(), counter], snapshot_body)
        init = [*xs, ctx.take_tape(), Lit(np.int64(0))]
        if bounds:
            res = C.for_loop(*bounds, *init, body=blk)
        else:
            cond = b.block([*types, StackType(), counter],
                           lambda *ps: inline(eqn.params["cond"], ps[:len(xs)]))
            res = C.while_loop(*init, cond=cond, body=blk)
        ctx.tape = res[len(xs)]
        return list(res[:len(xs)]), res[-1]

    def _segments(self, ctx: Context, couts, bounds, xs, count, every, fwd, bwd, index):
        """The backward of a checkpointed loop: segment by segment from the last, restore
        the snapshot, rerun the segment pushing residuals, then run its backward."""
        b = current()
        types = [x.type for x in xs]
        count = E.convert(count, dtype=int64, weak=False)
        n_seg = E.floordiv(E.add(count, Lit(np.int64(every - 1))), Lit(np.int64(every)))
        one = Lit(np.int64(1))

        def segment(s, *carry):
            *cts, tape = carry
            start = E.mul(E.sub(E.sub(n_seg, one), s), Lit(np.int64(every)))
            m = E.min_(Lit(np.int64(every)), E.sub(count, start))
            snap = []
            for t in reversed(types):
                tape, v = St.stack_pop(tape, elem=t)
                snap.insert(0, v)

            def rerun(j, *state):
                at = [fit(E.add(bounds[0], E.mul(E.convert(j, dtype=index.dtype, weak=False),
                                                bounds[2])), fwd.params[0].type)] if bounds else []
                return inline(fwd, [*at, *state])

            redo = b.block([TensorType((), int64), *types, StackType()], rerun)
            tape = C.for_loop(start, E.add(start, m), one, *snap, tape, body=redo)[-1]
            top = E.convert(E.sub(count, start), dtype=index.dtype, weak=False)
            return list(C.for_loop(E.sub(top, E.convert(m, dtype=index.dtype, weak=False)),
                                   top, const(1, index), *cts, tape, body=bwd))

        seg = b.block([TensorType((), int64), *[c.type for c in couts], StackType()], segment)
        return C.for_loop(Lit(np.int64(0)), n_seg, one, *couts, ctx.btape, body=seg)

    def call(self, ctx: Context, eqn: Eqn, ins, vin):
        callee = eqn.params["callee"]
        fwd, bwd = self.twin(callee)
        res = current().emit("call", [*ins, ctx.take_tape()], {"callee": fwd})
        outs, ctx.tape = res[:-1], res[-1]
        vout = [differentiable(t) for t in callee.out_types]

        def step(ctx: Context, cts: Cotangents) -> None:
            couts = [cts.get_or_zero(o) for o, v in zip(outs, vout, strict=True) if v]
            varied = [x for x in ins if differentiable(x.type)]
            accs, replaces = _accumulators(cts, varied, [_accumulates(x.type) for x in varied])
            back = current().emit("call", [*couts, *accs, ctx.btape], {"callee": bwd})
            _absorb(cts, varied, back[:-1], replaces)
            ctx.btape = back[-1]

        return outs, vout, step

    def twin(self, func: Func) -> tuple[Func, Func]:
        """The forward twin (pushes its residuals) and the backward twin (pops them) of a
        called function; every differentiable parameter and result takes part."""
        if id(func) in self.twins:
            return self.twins[id(func)]
        vin = [differentiable(t) for t in func.in_types]
        vout = [differentiable(t) for t in func.out_types]
        n = next(_serial)
        fwd = declare_func(f"{func.name}_fwd{n}", [*func.in_types, StackType()],
                           [*func.out_types, StackType()])
        acc = [v and _accumulates(t) for t, v in zip(func.in_types, vin, strict=True)]
        bwd = declare_func(f"{func.name}_bwd{n}",
                           [*[t for t, v in zip(func.out_types, vout, strict=True) if v],
                            *[t for t, a in zip(func.in_types, acc, strict=True) if a],
                            StackType()],
                           [*[t for t, v in zip(func.in_types, vin, strict=True) if v],
                            StackType()])
        self.twins[id(func)] = (fwd, bwd)
        with Builder():
            fwd.block, bwd.block, _ = self.region(func.block, vin, vout, {}, accumulate=acc)
        return fwd, bwd


    # -- ops that steer differentiation --------------------------------------------------

    def checkpoint(self, ctx: Context, eqn: Eqn, ins, vin):
        """Run the body plainly; the backward runs it again, saving residuals as it goes,
        and then its backward: only the operands are kept in between."""
        body = eqn.params["body"]
        outs = _fresh_results(inline(body, ins), ins)
        vout = [differentiable(o.type) for o in outs]

        def step(ctx: Context, cts: Cotangents) -> None:
            self.nested(body, ins, vin, outs, cts)

        return outs, vout, step

    def nested(self, block: Block, ins, vin, outs, cts: Cotangents,
               seeds: Sequence[Atom] | None = None) -> None:
        """Emit ``block``'s forward and backward here, in one go: cotangents of ``outs``
        (or of the block's results ``seeds`` index) flow to ``ins``."""
        sub = Context(None)
        res = self.forward(sub, block, ins, vin)
        inner = Cotangents(sub)
        targets = res if seeds is None else [res[k] for k in seeds]
        for r, o in zip(targets, outs, strict=True):
            inner.add(r, cts.get(o))
        sub.btape = sub.tape
        for s in reversed(sub.steps):
            s(sub, inner)
        for x in dict.fromkeys(ins, None):
            cts.add(x, inner.get(x))

    def custom_vjp(self, ctx: Context, eqn: Eqn, ins, vin):
        """The user's rules: ``fwd(*xs) -> (*outs, *residuals)`` now, ``bwd(*xs,
        *residuals, *cotangents of float outs) -> cotangents of float xs`` later."""
        n = len(eqn.outputs)
        res = inline(eqn.params["fwd"], ins)
        outs, saved = _fresh_results(res[:n], ins), res[n:]
        vout = [differentiable(o.type) for o in outs]

        def step(ctx: Context, cts: Cotangents) -> None:
            couts = [cts.get_or_zero(o) for o, v in zip(outs, vout, strict=True) if v]
            cins = inline(eqn.params["bwd"], [*ins, *saved, *couts])
            _add_all(cts, [x for x in ins if differentiable(x.type)], cins)

        return outs, vout, step

    def custom_jvp(self, ctx: Context, eqn: Eqn, ins, vin):
        """Reverse mode from the user's forward rule: the rule's tangents are linear in
        the input tangents, so reversing the rule at zero tangents gives the transpose."""
        outs = _fresh_results(inline(eqn.params["primal"], ins), ins)
        vout = [differentiable(o.type) for o in outs]

        def step(ctx: Context, cts: Cotangents) -> None:
            floats = [x for x in ins if differentiable(x.type)]
            tangents = [E.convert(zeros(x.type), dtype=x.type.dtype, weak=x.type.weak)
                        for x in floats]
            active = [False] * len(ins) + [True] * len(tangents)
            targets = [o for o, v in zip(outs, vout, strict=True) if v]
            seeds = [len(outs) + k for k in range(len(targets))]
            relay = _Relay(cts, dict(zip(map(id, tangents), floats, strict=True)))
            self.nested(eqn.params["rule"], [*ins, *tangents], active, targets, relay, seeds)

        return outs, vout, step


def _fresh_results(outs: list[Atom], ins: Sequence[Atom]) -> list[Atom]:
    """A region op's results as values of their own: a result that is one of its operands
    (``return x``) or an earlier result gets a copy, so that its cotangent, which the
    op's own rule turns into the operands' cotangents, is not also the operand's."""
    seen = {id(a) for a in ins}
    out = []
    for o in outs:
        if isinstance(o, Var) and id(o) in seen:
            o = E.convert(o, dtype=o.type.dtype, weak=o.type.weak)
        seen.add(id(o))
        out.append(o)
    return out


class _Relay(Cotangents):
    """Cotangents read from ``cts`` and, for the stand-in tangent values of a custom
    jvp rule, written to the inputs they stand for."""

    def __init__(self, cts: Cotangents, stand_ins: dict[int, Atom]):
        self.base, self.stand_ins = cts, stand_ins

    def get(self, a: Atom) -> Atom | None:
        return self.base.get(a)

    def add(self, a: Atom, ct: Atom | None) -> None:
        target = self.stand_ins.get(id(a))
        if target is not None:
            self.base.add(target, ct)


def _rule_step(eqn: Eqn, ins: list, outs: list, ctx: Context, cts: Cotangents) -> None:
    couts = [cts.get(o) for o in outs]
    stacks = [isinstance(o.type, StackType) for o in outs]
    if all(c is None for c in couts) and not any(stacks):
        return
    couts = [cts.get_or_zero(o) if s else c for o, c, s in zip(outs, couts, stacks, strict=True)]
    with current().at(eqn.loc):
        cins = eqn.op.vjp(ins, outs, couts, **eqn.params)
    _add_all(cts, ins, cins)


def _add_all(cts: Cotangents, atoms, values) -> None:
    for a, c in zip(atoms, values, strict=True):
        cts.add(a, c)


def _producer(v: Atom) -> Eqn | None:
    """The equation of the block being emitted that made ``v``, if among its last few."""
    if not isinstance(v, Var):
        return None
    for e in current().frame.eqns[:-9:-1]:
        if any(o is v for o in e.outputs):
            return e
    return None


def _is_zeros(a: Atom) -> bool:
    if isinstance(a, Lit):
        return not np.any(a.value)
    e = _producer(a)
    return e is not None and e.op.name == "broadcast_in_dim" and \
        isinstance(e.inputs[0], Lit) and not np.any(e.inputs[0].value)


def _window(ct: Atom) -> tuple[Atom, list[Atom]] | None:
    """``(update, starts)`` when ``ct`` is zeros with ``update`` written at ``starts``
    (the cotangent of an indexed read: ``dynamic_slice``'s rule, zero-padded by
    ``slice``'s), else None."""
    e = _producer(ct)
    inner, lo = ct, (0,) * ct.type.ndim
    if e is not None and e.op.name == "pad":
        x, value = e.inputs
        if not _is_zeros(value) or any(e.params["interior"]) or \
                min((*e.params["lo"], *e.params["hi"]), default=0) < 0:
            return None
        inner, lo, e = x, e.params["lo"], _producer(x)
    if e is None or e.op.name != "dynamic_update_slice" or not _is_zeros(e.inputs[0]):
        return None
    _, upd, *starts = e.inputs
    at: list[Atom] = []
    for s, n, d_in, d_out, w in zip(starts, lo, inner.type.shape, ct.type.shape,
                                    upd.type.shape, strict=True):
        if isinstance(s, Lit):  # clamped as dynamic_update_slice does, then shifted
            at.append(const(min(max(int(s.value), 0), d_in - w) + n, s.type))
        elif n == 0 and d_in == d_out:  # the same clamp in ``ct``
            at.append(s)
        else:
            return None
    return upd, at


def _add_window(old: Atom, upd: Atom, starts: list[Atom]) -> Atom:
    """``old`` plus zeros holding ``upd`` at ``starts``: only that window changes (a
    single element as a scalar, so that no one-element array is made)."""
    shape = upd.type.shape
    if upd.type.size == 1:
        e = _producer(upd)
        value = e.inputs[0] if e is not None and e.op.name == "reshape" and \
            e.inputs[0].type.shape == () else Sh.reshape(upd, shape=())
        here = Sh.reshape(Ix.dynamic_slice(old, *starts, sizes=shape), shape=())
        new = Sh.reshape(fit(E.add(here, value), here.type), shape=shape)
    else:
        new = fit(E.add(Ix.dynamic_slice(old, *starts, sizes=shape), upd), upd.type)
    return Ix.dynamic_update_slice(old, new, *starts)


def _accumulators(cts: Cotangents, xs: Sequence[Atom], flags: Sequence[bool]
                  ) -> tuple[list[Atom], list[bool]]:
    """The running cotangents to hand to a backward that adds into them, for the ``xs``
    marked in ``flags``, and whether each result replaces its value's cotangent (a value
    passed twice gets zeros the second time: that result is added)."""
    seen: set[int] = set()
    accs, replaces = [], []
    for x, f in zip(xs, flags, strict=True):
        if not f:
            replaces.append(False)
            continue
        first = id(x) not in seen and cts.ctx.is_varied(x)
        seen.add(id(x))
        accs.append(cts.get_or_zero(x) if first else zeros(x.type))
        replaces.append(first)
    return accs, replaces


def _absorb(cts: Cotangents, xs: Sequence[Atom], values: Sequence[Atom],
            replaces: Sequence[bool]) -> None:
    """Take a backward's results: running cotangents replace their values' first (a
    value also passed another way gets that result added after, not overwritten)."""
    for first in (True, False):
        for x, c, r in zip(xs, values, replaces, strict=True):
            if r and first:
                cts.replace(x, c)
            elif not r and not first:
                cts.add(x, c)


def _plus(a: Atom, b: Atom | None) -> Atom:
    return a if b is None else E.add(a, b)


def _accumulates(t) -> bool:
    """Whether a backward adds a parameter's cotangent into a running one it is handed
    (arrays: their cotangents are mostly small windows, added in place)."""
    return isinstance(t, TensorType) and differentiable(t) and t.shape != ()


def _trip_count(lo: Atom, hi: Atom, stride: Atom) -> Atom:
    """How many indices ``range(lo, hi, stride)`` has: a constant for constant bounds,
    so that a nested loop's backward does not pop its trip count and the C compiler
    knows the range of its indices (and drops their wrap-around and clamps)."""
    bounds = [int(a.value) if isinstance(a, Lit) else None for a in (lo, hi, stride)]
    if None not in bounds and bounds[2] != 0:
        return const(len(range(*bounds)), lo.type)
    one = const(1, lo.type)
    n = E.floordiv(E.sub(E.add(E.sub(hi, lo), stride), E.mul(E.sign(stride), one)), stride)
    return E.max_(n, const(0, lo.type))


def _counting(fwd: Block, cond: Block, n: int) -> Block:
    """Make the forward body of a while loop count its runs; returns the loop's
    condition on the carry, the tape and the count."""
    count = Var(TensorType((), int64))
    fwd.params.append(count)
    with current().into(fwd):
        fwd.results.append(E.add(count, Lit(np.int64(1))))
    params = [Var(p.type, p.hint) for p in fwd.params]
    new = Block(params)
    with current().into(new):
        new.results = inline(cond, params[:n])
    return new


#: Element-wise ops cheaper to run again in the backward pass than to push and pop.
_CHEAP = frozenset({"add", "sub", "mul", "neg", "abs", "sign", "max", "min", "convert",
                    "select", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "iota"})

#: The most equations recomputed for one scalar: an index such as ``u[i - 1]`` (the
#: position NumPy's negative indices wrap to) is a handful; longer chains are pushed.
_SCALAR_CHAIN = 12

#: A loop reads a known array's elements again in its backward, instead of pushing what
#: it made of them, when it runs at least 1 / _READ_RATIO times the array's size.
_READ_RATIO = 8


def _cheap(eqn: Eqn, scalar: bool = False) -> bool:
    """Whether ``eqn`` makes an array (or, with ``scalar``, a 0-d value) worth
    recomputing: cheap element-wise arithmetic, or for arrays moving data (a reshape,
    slice, broadcast...: a copy at most, where the tape would copy twice)."""
    if len(eqn.outputs) != 1 or (eqn.outputs[0].type.shape == ()) != scalar:
        return False
    kind = eqn.op.fusion
    return (not scalar and (kind in ("reshape", "broadcast") or
                            eqn.op.name == "dynamic_slice")) or \
        (kind == "elementwise" and eqn.op.name in _CHEAP)


def _recomputed(fwd: Block, residuals: list[Var], known: dict[int, Atom],
                trips: int | None = None) -> tuple[list[Var], list[Eqn]]:
    """Split what the backward reads into the values to push and the equations it
    recomputes (in forward order).  Recomputed: a scalar made by a few cheap steps from
    known values and constants alone (a loop's index arithmetic: ``i - 1`` wrapped as
    NumPy wraps negative indices), which costs less than a push and a pop per
    iteration; then, in a loop of ``trips`` iterations, a scalar made by cheap steps
    from such indices and elements of arrays the loop only reads (a stencil's
    ``u[i - 1] - 2 * u[i] + u[i + 1]``), which the backward reads again: no tape in the
    loop at all, and the array is pushed at most once around the loop; and an array
    made by a chain of cheap element-wise steps from pushed, known or scalar values
    (other scalars are pushed: that costs next to nothing), which is cheaper to compute
    again than to move through the tape twice."""
    made = {id(o): e for e in fwd.eqns for o in e.outputs}
    params = {id(p) for p in fwd.params}
    again: dict[int, Eqn] = {}

    def outside(a: Atom) -> bool:
        return not isinstance(a, Var) or id(a) in known or \
            (id(a) not in made and id(a) not in params)

    def readable(eqn: Eqn) -> Eqn | None:
        """The ``dynamic_slice`` of one element that ``eqn`` (its reshape to a 0-d
        value) reads, when the array is known around a loop that runs at least
        1 / ``_READ_RATIO`` times its size (so pushing it there costs less than a
        push and a pop per iteration)."""
        src = eqn.inputs[0] if eqn.op.name == "reshape" and \
            eqn.outputs[0].type.shape == () else None
        window = made.get(id(src)) if isinstance(src, Var) else None
        if window is None or window.op.name != "dynamic_slice" or trips is None:
            return None
        arr = window.inputs[0]
        return window if outside(arr) and arr.type.size <= _READ_RATIO * trips else None

    def derived(a: Atom, eqns: dict[int, Eqn], reads: bool = False) -> bool:
        """Whether the scalar ``a`` follows from known values and constants by cheap
        steps (with ``reads``, and elements of known arrays), noting them in ``eqns``
        (at most ``_SCALAR_CHAIN`` of them, twice that with ``reads``)."""
        if any(id(a) in d for d in (again, eqns)) or outside(a):
            return True
        eqn = made.get(id(a))
        window = readable(eqn) if reads and eqn is not None else None
        if eqn is None or not (window or _cheap(eqn, scalar=True)) or \
                len(eqns) >= _SCALAR_CHAIN * (1 + reads):
            return False
        eqns[id(a)] = eqn
        if window is not None:
            eqns[id(window.outputs[0])] = window
            return all(derived(x, eqns) for x in window.inputs[1:])
        return all(derived(x, eqns, reads) for x in eqn.inputs)

    def recompute(r: Var, eqns: dict[int, Eqn]) -> None:
        again.update(eqns)
        pushed.discard(id(r))

    pushed = {id(r) for r in residuals}
    for reads in (False, True):  # index arithmetic first: element reads share it
        for r in residuals:
            eqns: dict[int, Eqn] = {}
            if id(r) in pushed and r.type.shape == () and derived(r, eqns, reads):
                recompute(r, eqns)

    def plan(a: Atom, eqns: dict[int, Eqn], scalars: dict[int, Var],
             bases: dict[int, Var] | None = None) -> bool:
        """Whether the array ``a`` can be had in the backward, noting the equations to
        recompute and the scalars to push that it takes; with ``bases``, arrays that
        no cheap step makes (the block's parameters) are noted there, to push."""
        if not isinstance(a, Var) or any(id(a) in d for d in (known, again, eqns)) or \
                id(a) in pushed or outside(a):
            return True
        if a.type.shape == ():
            chain: dict[int, Eqn] = {}
            if derived(a, chain):
                eqns.update(chain)
            else:
                scalars[id(a)] = a
            return True
        eqn = made.get(id(a))
        if not cheap(eqn, bases):
            if bases is None:
                return False
            bases[id(a)] = a
            return True
        if not all(plan(x, eqns, scalars, bases) for x in eqn.inputs):
            return False
        eqns[id(a)] = eqn
        return True

    def cheap(eqn: Eqn | None, bases: dict[int, Var] | None) -> bool:
        """Whether an array ``eqn`` makes is recomputed; from pushed bases, divisions
        too (a Runge-Kutta stage's ``h * k / 2``)."""
        return eqn is not None and (_cheap(eqn) or (
            bases is not None and eqn.op.name == "div" and eqn.outputs[0].type.shape != ()))

    def planned(r: Var, bases: dict[int, Var] | None = None
                ) -> tuple[dict[int, Eqn], dict[int, Var]] | None:
        """The equations recomputing the array ``r`` and the scalars to push for it."""
        eqn = made.get(id(r))
        eqns: dict[int, Eqn] = {}
        scalars: dict[int, Var] = {}
        if not cheap(eqn, bases) or not all(plan(x, eqns, scalars, bases)
                                            for x in eqn.inputs):
            return None
        return {**eqns, id(r): eqn}, scalars

    extra = []

    def push(values: dict[int, Var]) -> None:
        for k, v in values.items():
            if k not in pushed:
                pushed.add(k)
                extra.append(v)

    for r in residuals:
        if id(r) in pushed and r.type.shape != () and (found := planned(r)) is not None:
            recompute(r, found[0])
            push(found[1])
    for r, (eqns, scalars) in _rebased(
            [r for r in residuals if id(r) in pushed and r.type.shape != ()],
            planned, push, trips):
        recompute(r, eqns)
        push(scalars)
    order = {id(e): k for k, e in enumerate(fwd.eqns)}
    eqns = sorted({id(e): e for e in again.values()}.values(), key=lambda e: order[id(e)])
    return [*[r for r in residuals if id(r) in pushed], *extra], eqns


Plan = tuple[dict[int, Eqn], dict[int, Var]]  # equations to recompute, scalars to push

#: Arrays are recomputed from bases pushed in their place when that saves at least
#: REBASE_STEP bytes of tape per iteration or REBASE_TAPE in all.  Measured on GradBench's
#: ode gradient (AMD EPYC Zen 5, 1 thread, CPU time): n = 100000 (2.4 MB less per step)
#: s = 1 0.68 -> 0.53 ms, s = 10 9.1 -> 4.7, s = 100 129 -> 53; n = 10000, s = 100 (24 MB
#: in all) 3.40 -> 2.10 ms; but with a smaller tape, in cache, the recomputed stages
#: cost more than they save (n = 1000, s = 100: 0.17 -> 0.21 ms; n = 10000, s = 1:
#: 0.019 -> 0.023).
REBASE_STEP = 1 << 20
REBASE_TAPE = 16 << 20


def _rebased(candidates: Sequence[Var],
             planned: Callable[[Var, dict[int, Var]], Plan | None],
             push: Callable[[dict[int, Var]], None], trips: int | None
             ) -> list[tuple[Var, Plan]]:
    """The arrays among ``candidates`` (residuals still to push) that the backward
    recomputes from other arrays pushed in their place, their bases (a loop's carried
    state, from which each stage of a Runge-Kutta step follows by cheap steps), with
    their plans; the bases are pushed.  Chosen while the bases take fewer bytes than
    the arrays they replace, by enough to leave the caches: less tape, and the forward
    stores none of those arrays (its kernels compute them where read), but the backward
    computes them again, often at shifted indices (``trips``: the loop's, if known)."""
    plans: dict[int, tuple[Var, Plan, dict[int, Var]]] = {}
    for r in candidates:
        bases: dict[int, Var] = {}
        found = planned(r, bases)
        if found is not None:
            plans[id(r)] = r, found, bases

    def saved(chosen: set[int]) -> int:
        union = {k: v for c in chosen for k, v in plans[c][2].items()}
        return sum(_nbytes(plans[c][0]) for c in chosen) - sum(map(_nbytes, union.values()))

    chosen = set(plans)
    while (worse := next((c for c in chosen if saved(chosen - {c}) >= saved(chosen)),
                         None)) is not None:
        chosen.discard(worse)
    gain = saved(chosen)
    if gain < REBASE_STEP and gain * (trips or 1) < REBASE_TAPE:
        chosen = set()
    push({k: v for c in chosen for k, v in plans[c][2].items()})
    return [(plans[id(r)][0], plans[id(r)][1]) for r in candidates if id(r) in chosen]


def _nbytes(v: Var) -> int:
    return v.type.size * v.type.dtype.np.itemsize


def _pop_residuals(bwd: Block, residuals: list[Var], known: dict[int, Atom],
                   again: Sequence[Eqn] = (), head: Sequence[Eqn] = ()) -> None:
    """Start ``bwd`` by popping ``residuals`` (pushed in this order) off its tape
    parameter, computing the ``known`` values (``head``) and copies of ``again``, and
    make it read them there."""
    mapping = dict(known)
    pops = []
    if residuals:
        start = bwd.params[-1]
        tape = Var(StackType())
        bwd.params[-1] = tape
        for r in reversed(residuals):
            nxt, x = Var(StackType()), Var(r.type, r.hint)
            pops.append(Eqn(St.stack_pop, [tape], [nxt, x], {"elem": r.type}))
            mapping[id(r)] = x
            tape = nxt
        pops[-1].outputs[0] = start
    copies = []
    for eqn in again:
        outs = [Var(o.type, o.hint) for o in eqn.outputs]
        copies.append(Eqn(eqn.op, list(eqn.inputs), outs, dict(eqn.params), eqn.loc))
        mapping.update((id(o), n) for o, n in zip(eqn.outputs, outs, strict=True))
    bwd.eqns[:0] = [*pops, *head, *copies]
    substitute(bwd, mapping)


_CONTROL = {
    "cond": ReverseMode.cond,
    "while_loop": ReverseMode.loop,
    "for_loop": ReverseMode.loop,
    "call": ReverseMode.call,
    "checkpoint": ReverseMode.checkpoint,
    "custom_vjp": ReverseMode.custom_vjp,
    "custom_jvp": ReverseMode.custom_jvp,
}


def vjp_emit(func: Func, primals: Sequence[Atom], varied: Sequence[bool]
             ) -> tuple[list[Atom], Callable[[Sequence[Atom | None]], list[Atom | None]]]:
    """Emit ``func``'s forward pass into the current builder.  Returns its results and
    ``backward(cts) -> cotangents of the primals``, which emits the backward pass
    (once) wherever it is called."""
    closed = close_func(func)
    primals = _distinct(primals, varied)
    rev = ReverseMode()
    ctx = Context(None)
    outs = rev.forward(ctx, closed.block, primals, varied)
    home = current().frame
    done = []

    def backward(cts: Sequence[Atom | None]) -> list[Atom | None]:
        if ctx.tape is not None and done:
            raise UnsupportedError(
                "the backward pass of this vjp was already emitted and its residual tape "
                "consumed", hint="call pb.vjp again for a second backward pass")
        if ctx.tape is not None and current().frame is not home:
            raise UnsupportedError(
                "the backward pass of a vjp through loops must run where pb.vjp was called, "
                "not inside a loop or branch (it consumes the residual tape once)",
                hint="call vjp_fn next to pb.vjp, or call pb.vjp inside the loop")
        done.append(True)
        env = Cotangents(ctx)
        ctx.btape = ctx.tape
        _add_all(env, outs, cts)
        for step in reversed(ctx.steps):
            step(ctx, env)
        return [env.get(p) for p in primals]

    return outs, backward


def _distinct(primals: Sequence[Atom], varied: Sequence[bool]) -> list[Atom]:
    """The varied primals as values of their own, so each gets its own cotangent even
    when the caller passes one value for several parameters."""
    uses = collections.Counter(id(a) for a in primals)
    return [E.convert(a, dtype=a.type.dtype, weak=a.type.weak)
            if v and (not isinstance(a, Var) or uses[id(a)] > 1) else a
            for a, v in zip(primals, varied, strict=True)]


def vjp_func(func: Func, wrt: Sequence[bool] | None = None) -> Func:
    """``f(*primals, *cts) -> (*outs, *cotangents)``: cotangents of every floating-point
    result in, cotangents of the ``wrt`` floating-point parameters (default: all of them)
    out, zeros where they do not matter."""
    wrt = [differentiable(t) and (wrt is None or w)
           for t, w in zip(func.in_types, wrt or func.in_types, strict=True)]
    with Builder() as b:
        primals = [b.param(t) for t in func.in_types]
        cts = [b.param(t) for t in func.out_types if differentiable(t)]
        outs, backward = vjp_emit(func, primals, wrt)
        it = iter(cts)
        cins = backward([next(it) if differentiable(o.type) else None for o in outs])
        res = [c if c is not None else zeros(p.type)
               for c, p, w in zip(cins, primals, wrt, strict=True) if w]
        return b.finish(f"{func.name}_vjp", [*outs, *res])
