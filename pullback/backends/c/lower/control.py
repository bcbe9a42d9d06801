"""Handlers of control flow and effects: ``cond``, ``while_loop`` and ``for_loop``,
``call``, the regions of ``checkpoint`` and custom rules (their primal computation),
``debug_print``, ``check``, and the tapes of ``stack_*``.

A cond's branches and a loop's carried variables take over operands that die there
(``Lowering.hand_over``), so a loop body updates its carried arrays in place; a call
hands a dying buffer to a callee that takes it over (``plan.donation``) and copies any
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ....ir.core import Atom, Block, Eqn, Lit, Var
from ....ir.types import StackType, TensorType
from ..loops.ir import (
    Addr,
    Bin,
    Break,
    Call,
    Copy,
    Decl,
    Expr,
    Failed,
    Fn,
    Forever,
    If,
    Int,
    Move,
    Pointer,
    Print,
    Raise,
    Range,
    Runtime,
    Scope,
    Set,
    Stmt,
    Sym,
    Unsupported,
    ctype,
)
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering


def _sub_block(lw: Lowering, blk: Block, names: Sequence[str], dests: Sequence[Expr],
              owns: Sequence[bool], adopt: Sequence[tuple[str, Var]] = ()) -> list[Stmt]:
    """The statements of ``blk`` with its parameters bound to ``names`` (owning those
    marked in ``owns``, and the outer buffers in ``adopt``), its results moved into
    ``dests``, and its own buffers freed."""
    with lw.into([]) as body:
        lw.open_block(blk, names, owns, adopt)
        lw.block_body(blk)
        lw.results_out(blk.results, dests)
        lw.close_block()
    return body


def _declare_outputs(lw: Lowering, eqn: Eqn) -> list[Expr]:
    """Variables for a control op's results, owned by the enclosing block."""
    return [Sym(lw.define(v, allocate=False)) for v in eqn.outputs]


@handles("cond")
def op_cond(lw: Lowering, eqn: Eqn) -> None:
    """Each branch owns the buffers it reads that die at the cond."""
    pred, *xs = eqn.inputs
    outs = _declare_outputs(lw, eqn)
    args = [_value_name(lw, x) for x in xs]
    owns, adopt = lw.hand_over(eqn, xs), lw.hand_over_reads(eqn)
    then = _sub_block(lw, eqn.params["then"], args, outs, owns, adopt)
    orelse = _sub_block(lw, eqn.params["orelse"], args, outs, owns, adopt)
    lw.add(If(lw.scalar(pred), then, orelse))


def _value_name(lw: Lowering, a: Atom) -> str:
    """A name to bind a block parameter to (literals get a local; a value computed
    where it is read gets its buffer here)."""
    if isinstance(a, Var):
        if id(a) not in lw.vars:
            lw.buf(a)
        return lw.vars[id(a)]
    name = lw.fresh("c")
    if a.type.shape == ():
        lw.add(Decl(name, ctype(a.type.dtype), lw.scalar(a)))
    else:
        lw.add(Pointer(name, ctype(a.type.dtype), Sym(lw.mod.constant(a)), const=True))
    return name


def _carry_init(lw: Lowering, eqn: Eqn, xs: Sequence[Atom]) -> list[str]:
    """The loop's carried variables, which become its results: a carry the body
    passes through is a view of its operand, an operand dying here moves in, others
    are copied."""
    views = lw.scope.plan.views
    moves = lw.hand_over(eqn, [None if id(o) in views else x
                               for o, x in zip(eqn.outputs, xs, strict=True)])
    names = []
    for x, out, move in zip(xs, eqn.outputs, moves, strict=True):
        t = x.type
        if id(out) in views or move:
            name = lw.vars[id(out)] = lw.vars[id(x)]
            if move:
                lw.own(name, out)
        else:
            name = lw.define(out, allocate=False)
            if isinstance(t, StackType):
                lw.add(Move(Sym(name), Sym(lw.vars[id(x)])))
            elif t.shape == ():
                lw.add(Set(Sym(name), lw.scalar(x)))
            else:
                lw.add(Copy(name, lw.buf(x), ctype(t.dtype), t.size))
        names.append(name)
    return names


def _loop_body(lw: Lowering, body: Block, carry: Sequence[str],
               prefix: Sequence[str] = ()) -> Scope:
    """One iteration: the body on the carried variables, owning the arrays it does
    not pass through (it updates them in place or frees them); then its results
    replace them (buffers it owns move in, others are copied)."""
    with lw.into([]) as stmts:
        params = body.params[len(prefix):]
        passthrough = [r is p for r, p in zip(body.results, params, strict=True)]
        owns = [isinstance(p.type, TensorType) and p.type.shape != () and not s
                for p, s in zip(params, passthrough, strict=True)]
        lw.open_block(body, [*prefix, *carry], [False] * len(prefix) + owns)
        lw.block_body(body)
        news = [lw.fresh("n") for _ in carry]
        for n, r in zip(news, body.results, strict=True):
            t = r.type
            if isinstance(t, StackType):
                lw.add(Decl(n, "pb_tape *"))
            elif t.shape == ():
                lw.add(Decl(n, ctype(t.dtype)))
            else:
                lw.add(Pointer(n, ctype(t.dtype)))
        changed = [not s for s in passthrough]
        lw.results_out([r for r, c in zip(body.results, changed, strict=True) if c],
                       [Sym(n) for n, c in zip(news, changed, strict=True) if c])
        lw.close_block()
        for c, n, ch in zip(carry, news, changed, strict=True):
            if ch:
                lw.add(Move(Sym(c), Sym(n)))
    return Scope(stmts)


@handles("while_loop")
def op_while_loop(lw: Lowering, eqn: Eqn) -> None:
    carry = _carry_init(lw, eqn, eqn.inputs)
    go = lw.fresh("go")
    with lw.into([]) as body:
        lw.add(Decl(go, "uint8_t"))
        lw.add(Scope(_sub_block(lw, eqn.params["cond"], carry, [Sym(go)],
                               [False] * len(carry))))
        lw.add(Break(Sym(go)))
        lw.add(_loop_body(lw, eqn.params["body"], carry))
    lw.add(Forever(body))


@handles("for_loop")
def op_for_loop(lw: Lowering, eqn: Eqn) -> None:
    lo, hi, step, *xs = eqn.inputs
    carry = _carry_init(lw, eqn, xs)
    it = ctype(lo.type.dtype)
    i, h, s = lw.fresh("it"), lw.fresh("hi"), lw.fresh("st")
    lw.add(Decl(h, it, lw.scalar(hi)))
    lw.add(Decl(s, it, lw.scalar(step)))
    lw.add(If(Bin("==", Sym(s), Int(0)), [Raise(
        "ValueError", "range() arg 3 must not be zero", site=lw.mod.site(eqn))]))
    lw.add(Range(i, it, lw.scalar(lo), Sym(h), Sym(s),
                 [_loop_body(lw, eqn.params["body"], carry, prefix=[i])],
                 adjoint=eqn.params.get("adjoint", False)))


@handles("call")
def op_call(lw: Lowering, eqn: Eqn) -> None:
    callee = eqn.params["callee"]
    outs = _declare_outputs(lw, eqn)
    args: list[Expr] = []
    for x in eqn.inputs:
        t = x.type
        if isinstance(t, StackType):
            args.append(Sym(lw.vars[id(x)]))
        elif t.shape == ():
            args.append(lw.scalar(x))
        else:
            args.append(lw.buf(x))
    donated = lw.mod.plan.donated.get(id(callee), {})
    if donated:
        names = [lw.vars.get(id(x)) if isinstance(x, Var) else None for x in eqn.inputs]
        for k in donated:  # hand the buffer over if it dies here, else a copy
            if names[k] is not None and names.count(names[k]) == 1 and \
                    lw.dying(names[k]):
                lw.take(names[k])
            else:
                t = eqn.inputs[k].type
                tmp = lw.fresh("m")
                lw.add(Copy(tmp, args[k], ctype(t.dtype), t.size, declare=True))
                args[k] = Sym(tmp)
    boxes = []  # an array result comes back through a local of its own (op_stack_push)
    for o, v in zip(outs, eqn.outputs, strict=True):
        if isinstance(v.type, StackType) or v.type.shape == ():
            args.append(Addr(o))
            continue
        box = lw.fresh("box")
        lw.add(Decl(box, f"{ctype(v.type.dtype)} *"))
        args.append(Addr(Sym(box)))
        boxes.append(Move(o, Sym(box)))
    lw.add(Call(lw.mod.names[id(callee)], tuple(args)))
    for move in boxes:
        lw.add(move)


def _inline_region(lw: Lowering, eqn: Eqn, region: str) -> None:
    outs = _declare_outputs(lw, eqn)
    args = [_value_name(lw, x) for x in eqn.inputs]
    lw.add(Scope(_sub_block(lw, eqn.params[region], args, outs,
                           lw.hand_over(eqn, eqn.inputs),
                           lw.hand_over_reads(eqn))))


@handles("checkpoint")
def op_checkpoint(lw: Lowering, eqn: Eqn) -> None:
    _inline_region(lw, eqn, "body")


@handles("custom_jvp", "custom_vjp")
def op_custom(lw: Lowering, eqn: Eqn) -> None:
    """The primal computation (the rules are for transforms)."""
    _inline_region(lw, eqn, "primal")


@handles("debug_print")
def op_debug_print(lw: Lowering, eqn: Eqn) -> None:
    """The operands' bytes go to the Python side, which formats and prints them in
    program order."""
    k = len(lw.mod.prints)
    lw.mod.prints.append(eqn)
    lw.add(Print(k, tuple((lw.buf(x), x.type.size, ctype(x.type.dtype))
                          for x in eqn.inputs)))


@handles("check")
def op_check(lw: Lowering, eqn: Eqn) -> None:
    ok, *values = eqn.inputs
    if any(v.type.shape != () for v in values) or len(values) > 8:
        raise Unsupported("a check with array operands")
    k = lw.mod.site(eqn)
    lw.add(If(Bin("==", lw.scalar(ok), Int(0)), [Failed(k, tuple(
        (v.type.dtype.is_float, lw.scalar(v)) for v in values))]))


@handles("stack_new")
def op_stack_new(lw: Lowering, eqn: Eqn) -> None:
    name = Sym(lw.define(eqn.outputs[0]))
    lw.add(Set(name, Fn("pb_tape_new", (Sym("ctx"),))))
    lw.add(If(Bin("==", name, Sym("NULL")), [Raise("MemoryError", "out of memory")]))


#: Arrays of at least so many bytes go on the tape as a pointer to a buffer of their own
#: (``op_stack_push``): a pool buffer's header and the pointer add at most a tenth.
BY_POINTER = 1024


def _tape_bytes(x: Atom) -> int:
    return x.type.size * x.type.dtype.np.itemsize


def _by_pointer(x: Atom) -> bool:
    return x.type.shape != () and _tape_bytes(x) >= BY_POINTER


def _tape_size(x: Atom) -> Expr:
    """The bytes ``x`` takes on the tape."""
    return Fn("sizeof", (Sym("void *"),)) if _by_pointer(x) else Int(_tape_bytes(x))


@handles("stack_push")
def op_stack_push(lw: Lowering, eqn: Eqn) -> None:
    """A scalar's or small array's bytes are copied onto the tape; a larger array goes
    as the pointer of a buffer of its own: the operand's, taken over when it dies here
    (a loop's old state, a time step's saved array: nothing is copied), else a copy.
    The tape owns that buffer until the pop hands it to its block, so no write or free
    reaches it in between.  The pointer goes through a local of its own: a buffer whose
    address is taken is shared with an OpenMP loop by reference, and the loop then reloads
    it every iteration and gathers its elements (an ODE state, pushed each step)."""
    s, x = eqn.inputs
    name = lw.define(eqn.outputs[0])
    tape = Sym(lw.vars[id(s)])
    src = lw.buf(x) if x.type.shape != () or isinstance(x, Lit) else Addr(lw.scalar(x))
    moved = _by_pointer(x)
    if moved:
        held = lw.vars.get(id(x)) if isinstance(x, Var) else None
        if lw.dying(held):
            lw.take(held)
        else:
            held = lw.fresh("m")
            lw.add(Copy(held, src, ctype(x.type.dtype), x.type.size, declare=True))
        box = lw.fresh("box")
        lw.add(Decl(box, "void *", Sym(held)))
        src = Addr(Sym(box))
    lw.add(Runtime("pb_tape_push", (Sym("ctx"), tape, src, _tape_size(x)), ("", ""),
                   cost=1 if moved else x.type.size))
    lw.add(Move(Sym(name), tape))


@handles("stack_pop")
def op_stack_pop(lw: Lowering, eqn: Eqn) -> None:
    """A scalar or small array is copied off the tape; a larger array's buffer (its
    pointer on the tape) passes to the open block, which owns it like a buffer it made
    (``plan.memory`` never computes a popped value in another buffer).  The pointer
    comes off through a local of its own, so the buffer's address is never taken (see
    ``op_stack_push``)."""
    (s,) = eqn.inputs
    tape, x = eqn.outputs
    tname = lw.define(tape)
    moved = _by_pointer(x)
    xname = lw.define(x, allocate=not moved)
    box = lw.fresh("box") if moved else xname
    if moved:
        lw.add(Decl(box, "void *"))
    dst = Sym(xname) if x.type.shape != () and not moved else Addr(Sym(box))
    lw.add(Runtime("pb_tape_pop", (Sym("ctx"), Sym(lw.vars[id(s)]), dst, _tape_size(x)),
                   ("", ""), cost=1 if moved else x.type.size))
    if moved:
        lw.add(Move(Sym(xname), Sym(box)))
    lw.add(Move(Sym(tname), Sym(lw.vars[id(s)])))
