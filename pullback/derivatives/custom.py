"""User-written derivative rules: ``custom_vjp`` and ``custom_jvp``.  Each call stages the
function and its rules on the call's arguments and emits one op of ``ops.ad`` that holds
them as blocks; the transforms differentiate that op by its rules."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import CompileError
from ..frontend.stager import Stager
from ..frontend.subfunction import SubFunction
from ..frontend.values import Ref
from ..ir.builder import current
from ..ir.core import Atom, Block, Var
from ..ir.rewrite import inline
from ..ir.types import TensorType
from ..ops import ad
from ..ops.derivs import zeros
from ..transforms.fit import fit
from ..tree import tree_flatten, tree_unflatten
from .arguments import Args, bind
from .transform import Transform


def _stand_ins(sub: SubFunction) -> tuple[Any, dict[int, int]]:
    """``sub``'s result rebuilt from stand-in values (to stage the next rule with), and
    which result each stand-in is (by ``id``)."""
    vs = [Var(t) for t in sub.func.out_types]
    return sub.rebuild(vs), {id(v): k for k, v in enumerate(vs)}


class _Rules:
    """The operands and blocks of a custom-rule op.  Operands: the arguments' run-time
    leaves, then every caller value one of the staged functions reads (constants of the
    derivative).  Each block takes all operands first."""

    def __init__(self, subs: Sequence[SubFunction]):
        first = subs[0]
        self.n_args = first.n_args
        self.atoms = list(first.operands[:first.n_args])
        for sub in subs:
            for a in sub.operands[sub.n_args:]:
                if all(a is not b for b in self.atoms):
                    self.atoms.append(a)

    def block(self, extra: Sequence[TensorType], body: Callable) -> Block:
        """``body(operands, extra, call)`` builds the block; ``call(sub, args)`` inlines a
        staged function on ``args`` plus the operands it captured."""
        n = len(self.atoms)

        def build(*params):
            ops = list(params[:n])

            def call(sub: SubFunction, args: Sequence[Atom]) -> list[Atom]:
                captured = [ops[next(k for k, b in enumerate(self.atoms) if b is a)]
                            for a in sub.operands[sub.n_args:]]
                return inline(sub.func.block, [*args, *captured])

            return body(ops, list(params[n:]), call)

        return current().block([*(a.type for a in self.atoms), *extra], build)

    def float_results(self, found: dict[int, Atom]) -> list[Atom]:
        """One value per float operand: ``found[k]`` for operand k, zeros elsewhere."""
        return [found[k] if k in found else zeros(a.type) for k, a in enumerate(self.atoms)
                if a.type.dtype.is_float]


@contextlib.contextmanager
def _rules_of(st: Stager, fn: Transform) -> Iterator[None]:
    """While ``fn``'s rules are staged, a call to ``fn`` in them means its primal (as in
    ``return f(x), residuals``)."""
    st.in_rules.append(fn)
    try:
        yield
    finally:
        st.in_rules.pop()


def _pair(value: Any, who: str) -> tuple[Any, Any]:
    if not (isinstance(value, tuple) and len(value) == 2):
        raise CompileError(f"{who} must return a pair")
    return value


def _matching(primal: SubFunction, value: Any, index: dict[int, int], who: str) -> list[int]:
    """Where ``value`` (a rule's version of the primal result) has each primal result."""
    leaves, tree = tree_flatten(value)
    if tree != primal.out_spec[0]:
        raise CompileError(f"{who} returns a result of structure {tree}, but the function "
                           f"returns {primal.out_spec[0]}")
    spec = primal.out_spec[1]
    found = [index.get(id(x.raw())) for x, s in zip(leaves, spec, strict=True)
             if s[0] == "dyn" and isinstance(x, Ref)]
    if len(found) != len(primal.func.out_types):
        raise CompileError(f"{who} returns compile-time values where the function returns "
                           "run-time ones")
    return found


def _per_argument(value: Any, index: dict[int, int], got: list[Atom], where: Args,
                  who: str) -> dict[int, Atom]:
    """The values a rule returned for each argument leaf (one pytree per argument, in
    the argument's structure; None for an argument means zero)."""
    n = len(where.sub.arg_trees)
    if not (isinstance(value, (tuple, list)) and len(value) == n):
        raise CompileError(f"{who} must return a tuple of {n} values, one per argument")
    out: dict[int, Atom] = {}
    for k, d in enumerate(value):
        if d is None:
            continue
        leaves, tree = tree_flatten(d)
        if tree != where.sub.arg_trees[k]:
            raise CompileError(f"{who} returns structure {tree} for argument {k}, which has "
                               f"{where.sub.arg_trees[k]}")
        for x, q in zip(leaves, where.positions[k], strict=True):
            if q is not None and isinstance(x, Ref) and id(x.raw()) in index:
                out[q] = fit(got[index[id(x.raw())]], where.sub.operands[q].type)
    return out


class custom_vjp(Transform):  # noqa: N801 (named like the decorator it is)
    """A function with a user-written reverse-mode rule::

        @pb.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, ct): return (ct_x, ct_y)
        f.defvjp(f_fwd, f_bwd)

    Reverse mode runs ``f_fwd`` and, in the backward pass, ``f_bwd`` (``None`` for an
    argument means a zero cotangent); forward mode differentiates ``f`` itself.  Caller
    values the functions read are constants of the derivative."""

    def __init__(self, fn: Callable):
        super().__init__(fn)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> custom_vjp:
        self.fwd, self.bwd = fwd, bwd
        return self

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        if self.fwd is None or self.bwd is None:
            raise CompileError(f"custom_vjp {self.__name__}: call defvjp(fwd, bwd) first")
        if self in st.in_rules:  # f called from its own rule: its primal
            return st.call(self.fn, args, kwargs)
        args, kwargs = bind(self.fn, args, kwargs)
        primal = st.stage_subfunction(self.fn, args, kwargs)
        with _rules_of(st, self):
            fwd = st.stage_subfunction(self.fwd, args, kwargs)
            fwd_value, fwd_index = _stand_ins(fwd)
            out, res = _pair(fwd_value, "the custom_vjp fwd rule")
            outs_at = _matching(primal, out, fwd_index, "the custom_vjp fwd rule")
            res_at = [fwd_index[id(x.raw())] for x in tree_flatten(res)[0]
                      if isinstance(x, Ref)]
            cts_value, _ = _stand_ins(primal)
            bwd = st.stage_subfunction(self.bwd, [res, cts_value], {})
        bwd_value, bwd_index = _stand_ins(bwd)
        rules = _Rules([primal, fwd, bwd])
        where = Args(primal)
        out_types = primal.func.out_types
        res_types = [fwd.func.out_types[k] for k in res_at]
        float_outs = [t for t in out_types if t.dtype.is_float]

        def fwd_block(ops, extra, call):
            got = call(fwd, ops[:rules.n_args])
            return [got[k] for k in outs_at] + [got[k] for k in res_at]

        def bwd_block(ops, extra, call):
            saved, cts = extra[:len(res_types)], iter(extra[len(res_types):])
            ct_all = [next(cts) if t.dtype.is_float else zeros(t) for t in out_types]
            got = call(bwd, [*saved, *ct_all])
            found = _per_argument(bwd_value, bwd_index, got, where, "the custom_vjp bwd rule")
            return rules.float_results(found)

        outs = ad.custom_vjp(
            *rules.atoms,
            primal=rules.block([], lambda ops, extra, call: call(primal, ops[:rules.n_args])),
            fwd=rules.block([], fwd_block),
            bwd=rules.block([*res_types, *float_outs], bwd_block))
        return primal.rebuild(outs)


class custom_jvp(Transform):  # noqa: N801 (named like the decorator it is)
    """A function with a user-written forward-mode rule::

        @pb.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents): return f(*primals), tangent_of_result

    Forward mode runs the rule; reverse mode reverses it (its tangent is linear in the
    input tangents).  Tangents of non-float arguments are given as zeros."""

    def __init__(self, fn: Callable):
        super().__init__(fn)
        self.rule: Callable | None = None

    def defjvp(self, rule: Callable) -> Callable:
        self.rule = rule
        return rule

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        if self.rule is None:
            raise CompileError(f"custom_jvp {self.__name__}: define the rule with defjvp")
        if self in st.in_rules:  # f called from its own rule: its primal
            return st.call(self.fn, args, kwargs)
        args, kwargs = bind(self.fn, args, kwargs)
        primal = st.stage_subfunction(self.fn, args, kwargs)
        where = Args(primal)
        stand = [Var(a.type) for a in primal.operands[:primal.n_args]]
        tangents = tuple(
            tree_unflatten(tree, [x if q is None else Ref(stand[q], x.kind)
                                  for x, q in zip(leaves, pos, strict=True)])
            for leaves, tree, pos in zip(primal.arg_leaves, primal.arg_trees,
                                         where.positions, strict=True))
        with _rules_of(st, self):
            rule = st.stage_subfunction(self.rule, [tuple(args), tangents], {})
        value, index = _stand_ins(rule)
        out, tout = _pair(value, "the custom_jvp rule")
        outs_at = _matching(primal, out, index, "the custom_jvp rule")
        touts = tree_flatten(tout)[0]
        if tree_flatten(tout)[1] != primal.out_spec[0]:
            raise CompileError("the custom_jvp rule's tangent must have the structure of the "
                               "result")
        rules = _Rules([primal, rule])
        out_types = primal.func.out_types
        dyn = [x for x, s in zip(touts, primal.out_spec[1], strict=True) if s[0] == "dyn"]

        def rule_block(ops, extra, call):
            it = iter(extra)
            ts = [next(it) if a.type.dtype.is_float else zeros(a.type)
                  for a in rules.atoms]
            args_ops = ops[:rules.n_args]
            got = call(rule, [*args_ops, *ts[:rules.n_args]])
            tangent_outs = [fit(got[index[id(x.raw())]], t) if isinstance(x, Ref)
                            else zeros(t) for x, t in zip(dyn, out_types, strict=True)]
            return [got[k] for k in outs_at] + [t for t, o in zip(tangent_outs, out_types,
                                                                  strict=True)
                                                if o.dtype.is_float]

        floats = [a.type for a in rules.atoms if a.type.dtype.is_float]
        outs = ad.custom_jvp(
            *rules.atoms,
            primal=rules.block([], lambda ops, extra, call: call(primal, ops[:rules.n_args])),
            rule=rules.block(floats, rule_block))
        return primal.rebuild(outs)
