"""The textual form of graph IR (the parser in ``parser.py`` reads it back).

    func @f(%0:f32[3], %1:~f64[]) -> (f32[3]) {
      %2:f32[3] = mul %0, 2.5:f32[]   # model.py:12:4
      return %2
    }

Values are renumbered ``%0, %1, ...`` in definition order (function parameters, then
each equation's outputs, then the parameters of the blocks it owns), so equal IR prints
equal text.  Literals print as ``value:type`` with NumPy's shortest round-tripping
``str`` of each element, so a parse gives back the same bits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import numpy as np

from .core import Atom, Block, Eqn, Func, Lit, Module, Var, set_formatter
from .types import DType, StackType, TensorType

INDENT = "  "
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.]+")


def format_func(func: Func) -> str:
    """``func`` and every function it calls, ``func`` first (so recursion round-trips)."""
    return format_module(Module.of(func))


def format_module(module: Module) -> str:
    """Every function of ``module``, the entry first, separated by blank lines."""
    funcs = [module.main, *(f for n, f in module.funcs.items() if n != module.entry)]
    return "\n".join(_format_one(f) for f in funcs)


set_formatter(format_module)


def func_ref(name: str) -> str:
    """``@name``, quoted when the name has characters the parser's bare names lack."""
    return f"@{name}" if _PLAIN_NAME.fullmatch(name) else f"@{json.dumps(name)}"


def var_names(func: Func) -> dict[int, str]:
    """The printed name of every Var ``func`` defines, keyed by ``id``."""
    names: dict[int, str] = {}
    for _, v in definitions(func.block):
        names.setdefault(id(v), f"%{len(names)}")
    return names


def definitions(block: Block) -> Iterator[tuple[Block, Var]]:
    """``(defining block, Var)`` in print order: the block's parameters, then each
    equation's outputs followed by what its regions define."""
    for v in block.params:
        yield block, v
    for eqn in block.eqns:
        for v in eqn.outputs:
            yield block, v
        for name in eqn.op.blocks:
            if isinstance(eqn.params.get(name), Block):
                yield from definitions(eqn.params[name])


class _Printer:
    def __init__(self, func: Func):
        self.names = var_names(func)
        self.lines: list[str] = []

    def ref(self, v: Var) -> str:
        """A Var's name; one the function never defines gets a visibly foreign name."""
        if id(v) not in self.names:
            self.names[id(v)] = f"%undef.{len(self.names)}"
        return self.names[id(v)]

    def decl(self, v: Var) -> str:
        return f"{self.ref(v)}:{v.type}"

    def atom(self, a: Atom) -> str:
        if isinstance(a, Lit):
            return format_lit(a)
        return self.ref(a)

    def atoms(self, atoms) -> str:
        return ", ".join(self.atom(a) for a in atoms)

    def block_body(self, block: Block, depth: int, terminator: str) -> None:
        for eqn in block.eqns:
            self.eqn(eqn, depth)
        results = self.atoms(block.results)
        self.lines.append(f"{INDENT * depth}{terminator}{' ' if results else ''}{results}")

    def eqn(self, eqn: Eqn, depth: int) -> None:
        pad = INDENT * depth
        line = eqn.op.name
        if eqn.outputs:
            line = f"{', '.join(self.decl(v) for v in eqn.outputs)} = {line}"
        if eqn.inputs:
            line += f" {self.atoms(eqn.inputs)}"
        regions = [k for k in eqn.op.blocks if isinstance(eqn.params.get(k), Block)]
        attrs = [k for k in _param_order(eqn) if k not in regions]
        if attrs:
            line += " {" + ", ".join(f"{k}={format_param(eqn.params[k])}" for k in attrs) + "}"
        if regions:
            line += " {"
        if eqn.loc is not None:
            line += f"   # {eqn.loc.file}:{eqn.loc.line}:{eqn.loc.col}"
        self.lines.append(pad + line)
        if regions:
            for name in regions:
                blk = eqn.params[name]
                params = ", ".join(self.decl(p) for p in blk.params)
                self.lines.append(f"{pad}{INDENT}{name}({params}) {{")
                self.block_body(blk, depth + 2, "yield")
                self.lines.append(f"{pad}{INDENT}}}")
            self.lines.append(pad + "}")


def _param_order(eqn: Eqn) -> list[str]:
    """Declared params in declared order, then any undeclared ones (malformed IR)."""
    declared = [k for k in eqn.op.params if k in eqn.params]
    return declared + [k for k in eqn.params if k not in eqn.op.params]


def _format_one(func: Func) -> str:
    p = _Printer(func)
    params = ", ".join(p.decl(v) for v in func.block.params)
    outs = ", ".join(str(t) for t in func.out_types)
    p.lines.append(f"func {func_ref(func.name)}({params}) -> ({outs}) {{")
    p.block_body(func.block, 1, "return")
    p.lines.append("}")
    return "\n".join(p.lines) + "\n"


def format_lit(lit: Lit) -> str:
    """``value:type``; arrays as nested lists (``[[], []]:f32[2,0]``)."""
    return f"{_format_array(lit.value)}:{lit.type}"


def _format_array(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return str(arr[()])
    return "[" + ", ".join(_format_array(x) for x in arr) + "]"


def format_param(v) -> str:
    """A param value as the parser reads it back (``repr`` for what it cannot read)."""
    if v is None or isinstance(v, (bool, int)):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple):
        inner = ", ".join(format_param(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, (DType, TensorType, StackType)):
        return str(v)
    if isinstance(v, Func):
        return func_ref(v.name)
    return repr(v)
