"""The verifier: the invariants of graph IR, checked after every pass in tests.

* SSA: every Var is defined once, before its uses, in a block that encloses them
  (blocks see the values of enclosing blocks; a called function sees only its params).
* Types: each equation's outputs are what its op's shape rule gives; literals hold
  values of their type; functions return their declared types.
* Ops: each equation's op is the registered one, with exactly its declared params, of
  the declared kinds; effects have no outputs; callees belong to the module.
* Stacks are linear: each stack value is used at most once.

Errors name the function, the equation (op and source location) and the values, by the
names the printer gives them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from ..errors import VerifyError
from .core import Atom, Block, Eqn, Func, Lit, Module, Var
from .op import OPS, PARAM_KINDS, Op
from .printer import definitions, format_param, var_names
from .types import StackType, TensorType


def verify(func_or_module: Func | Module) -> None:
    """Raise ``VerifyError`` at the first broken invariant; recurse into every callee."""
    module = _as_module(func_or_module)
    if module.entry not in module.funcs:
        raise VerifyError(f"module entry @{module.entry} is not one of its functions")
    for name, func in module.funcs.items():
        if func.name != name:
            raise VerifyError(f"@{func.name} is listed in the module as @{name}")
        _FuncChecker(func, module).run()


def param_problem(op: Op, params: Mapping[str, Any], exclude: Collection[str] = ()) -> str | None:
    """What is wrong with ``params`` for ``op`` (None when nothing); ``exclude`` names
    params not given yet."""
    for name, kind in op.params.items():
        if name in exclude:
            continue
        if name not in params:
            if name in op.optional:
                continue
            return f"missing param {name!r}"
        if not PARAM_KINDS[kind](params[name]):
            return f"param {name}={format_param(params[name])} is not of kind {kind!r}"
    extra = [k for k in params if k not in op.params]
    return f"unknown param {extra[0]!r}" if extra else None


def _as_module(x: Func | Module) -> Module:
    if isinstance(x, Module):
        return x
    try:
        return Module.of(x)
    except ValueError:
        raise VerifyError(f"@{x.name} reaches two different functions of one name") from None


class _FuncChecker:
    def __init__(self, func: Func, module: Module):
        self.func = func
        self.module = module
        self.names = var_names(func)
        self.homes = {id(v): blk for blk, v in definitions(func.block)}
        self.defined: set[int] = set()
        self.visible: set[int] = set()
        self.open_blocks: list[Block] = []
        self.stack_uses: dict[int, str] = {}

    def fail(self, message: str, eqn: Eqn | None = None) -> VerifyError:
        where = f"@{self.func.name}"
        if eqn is not None:
            where += f", {eqn.op.name}"
            if eqn.loc is not None:
                where += f" at {eqn.loc}"
        return VerifyError(f"{where}: {message}")

    def show(self, v: Var) -> str:
        return f"{self.names.get(id(v), '%?')}:{v.type}"

    def run(self) -> None:
        blk = self.func.block
        self.block(blk, None, "result")
        declared, got = self.func.out_types, blk.out_types
        if len(got) != len(declared):
            raise self.fail(f"returns {len(got)} values but declares {len(declared)}")
        for i, (t, want) in enumerate(zip(got, declared, strict=True)):
            if t != want:
                raise self.fail(f"result {i} has type {t} but the function declares {want}")

    def block(self, blk: Block, owner: Eqn | None, results: str) -> None:
        """Check ``blk`` with the values of the open blocks visible; ``results`` names its
        results in messages."""
        self.open_blocks.append(blk)
        added: list[int] = []
        for i, p in enumerate(blk.params):
            self.define(p, f"parameter {i}", owner, added)
        for eqn in blk.eqns:
            self.eqn(eqn, added)
        for i, r in enumerate(blk.results):
            self.use(r, f"{results} {i}", owner)
        self.visible.difference_update(added)
        self.open_blocks.pop()

    def eqn(self, eqn: Eqn, added: list[int]) -> None:
        op = eqn.op
        if not isinstance(op, Op) or OPS.get(op.name) is not op:
            raise VerifyError(f"@{self.func.name}: {op!r} is not the registered op of its name")
        for i, a in enumerate(eqn.inputs):
            self.use(a, f"operand {i}", eqn)
        problem = param_problem(op, eqn.params)
        if problem:
            raise self.fail(problem, eqn)
        for name, kind in op.params.items():
            if kind == "func":
                self.callee(eqn.params[name], eqn)
            elif kind == "block":
                self.block(eqn.params[name], eqn, f"result of region '{name}',")
        inferred = self.infer(eqn)
        if op.effect and eqn.outputs:
            raise self.fail(f"an effect declares {len(eqn.outputs)} outputs", eqn)
        if len(inferred) != len(eqn.outputs):
            raise self.fail(f"declares {len(eqn.outputs)} outputs, the op gives "
                            f"{len(inferred)}", eqn)
        for i, (v, t) in enumerate(zip(eqn.outputs, inferred, strict=True)):
            self.define(v, f"output {i}", eqn, added)
            if v.type != t:
                raise self.fail(f"output {i} {self.show(v)} should have type {t}", eqn)

    def infer(self, eqn: Eqn) -> list:
        try:
            return eqn.op.infer_types([a.type for a in eqn.inputs], eqn.params)
        except Exception as e:  # a shape rule given ill-formed operands may fail any way
            raise self.fail(f"type inference failed: {e}", eqn) from None

    def callee(self, callee: Func, eqn: Eqn) -> None:
        if self.module.funcs.get(callee.name) is not callee:
            raise self.fail(f"callee @{callee.name} is not a function of the module", eqn)

    def define(self, v: Any, what: str, eqn: Eqn | None, added: list[int]) -> None:
        if not isinstance(v, Var):
            raise self.fail(f"{what} is a {type(v).__name__}, not a Var", eqn)
        if not isinstance(v.type, (TensorType, StackType)):
            raise self.fail(f"{what} has {v.type!r}, not an IR type", eqn)
        if id(v) in self.defined:
            raise self.fail(f"{what} {self.show(v)} is defined twice", eqn)
        self.defined.add(id(v))
        self.visible.add(id(v))
        added.append(id(v))

    def use(self, a: Atom, what: str, eqn: Eqn | None) -> None:
        if isinstance(a, Lit):
            self.check_lit(a, what, eqn)
            return
        if not isinstance(a, Var):
            raise self.fail(f"{what} is a {type(a).__name__}, not a Var or Lit", eqn)
        if id(a) not in self.visible:
            raise self.fail(f"{what} {self.show(a)} {self.why_invisible(a)}", eqn)
        if isinstance(a.type, StackType):
            here = f"{what} of {eqn.op.name}" if eqn is not None else what
            if id(a) in self.stack_uses:
                raise self.fail(f"stack value {self.show(a)} is used twice: as "
                                f"{self.stack_uses[id(a)]} and as {here} (stacks are linear)",
                                eqn)
            self.stack_uses[id(a)] = here

    def why_invisible(self, v: Var) -> str:
        home = self.homes.get(id(v))
        if home is None:
            return "is never defined in this function"
        if any(home is b for b in self.open_blocks):
            return "is used before its definition"
        return "is used outside the block that defines it"

    def check_lit(self, lit: Lit, what: str, eqn: Eqn | None) -> None:
        t, value = lit.type, lit.value
        if not isinstance(t, TensorType):
            raise self.fail(f"{what} is a literal of type {t}, not a tensor type", eqn)
        if not isinstance(value, np.ndarray) or (value.dtype, value.shape) != (t.dtype.np,
                                                                              t.shape):
            arr = np.asarray(value)
            raise self.fail(f"{what} is a literal of type {t} holding a {arr.dtype} value "
                            f"of shape {arr.shape}", eqn)
