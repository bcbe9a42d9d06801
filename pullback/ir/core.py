"""The graph IR: typed SSA values, equations, blocks with structured control flow.

* ``Var`` — an SSA value, identified by object identity; it has a type.
* ``Lit`` — a constant (a NumPy value of exactly its type).
* ``Eqn`` — ``outputs = op(inputs) {params}`` with the user's source location.  Control
  flow ops keep their ``Block`` bodies in ``params`` (see ``Op.blocks``).
* ``Block`` — parameters, equations, results.  A block may read values of the blocks
  that enclose it (lexical scoping, as MLIR regions); nothing outside reads its values.
* ``Func`` — a named block with a declared signature, so recursive ``call``s can be
  typed before the body exists.  ``Module`` — the functions one program needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import Loc
from .types import StackType, TensorType, Type, type_of_value

if TYPE_CHECKING:
    from .op import Op


class Var:
    """An SSA value.  ``hint`` is a name for humans (debugging only; never printed)."""

    __slots__ = ("type", "hint")

    def __init__(self, type: Type, hint: str | None = None):
        self.type = type
        self.hint = hint

    def __repr__(self) -> str:
        name = self.hint or f"v{id(self) % 10000}"
        return f"Var({name}:{self.type})"


class Lit:
    """A constant operand.  ``value`` is a NumPy array of exactly ``type``."""

    __slots__ = ("value", "type")

    def __init__(self, value: Any, type: TensorType | None = None):
        if type is None:
            type = type_of_value(value)
        arr = np.asarray(value)
        if arr.dtype != type.dtype.np:
            cast = arr.astype(type.dtype.np)
            if not np.array_equal(cast, arr, equal_nan=arr.dtype.kind == "f"):
                raise OverflowError(f"{value!r} does not fit in {type.dtype.name}")
            arr = cast
        if arr.shape != type.shape:
            raise ValueError(f"literal of shape {arr.shape} given type {type}")
        arr = arr.copy()
        arr.flags.writeable = False
        self.value = arr
        self.type = type

    def __repr__(self) -> str:
        return f"Lit({self.value.tolist()!r}:{self.type})"

    def key(self) -> tuple:
        """A hashable identity of the constant (for CSE and caches)."""
        return (str(self.type), self.value.tobytes())


Atom = Var | Lit


class Eqn:
    """``outputs = op(*inputs) {params}`` at ``loc``."""

    __slots__ = ("op", "inputs", "outputs", "params", "loc")

    def __init__(
        self,
        op: Op,
        inputs: Sequence[Atom],
        outputs: Sequence[Var],
        params: dict[str, Any] | None = None,
        loc: Loc | None = None,
    ):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.params = dict(params or {})
        self.loc = loc

    def blocks(self) -> Iterator[Block]:
        """The blocks this equation owns (the bodies of control flow)."""
        for name in self.op.blocks:
            if name in self.params:  # a missing region is the verifier's to report
                yield self.params[name]

    def __repr__(self) -> str:
        return f"Eqn({self.op.name}, {len(self.inputs)} in, {len(self.outputs)} out)"


class Block:
    """A region: parameters, equations in order, results."""

    __slots__ = ("params", "eqns", "results")

    def __init__(
        self,
        params: Sequence[Var] = (),
        eqns: Sequence[Eqn] = (),
        results: Sequence[Atom] = (),
    ):
        self.params = list(params)
        self.eqns = list(eqns)
        self.results = list(results)

    @property
    def in_types(self) -> list[Type]:
        return [p.type for p in self.params]

    @property
    def out_types(self) -> list[Type]:
        return [r.type for r in self.results]

    def walk(self) -> Iterator[Eqn]:
        """Every equation, nested blocks included, in program order."""
        for eqn in self.eqns:
            yield eqn
            for blk in eqn.blocks():
                yield from blk.walk()


class Func:
    """A named function.  ``out_types`` is declared (it may precede the body)."""

    __slots__ = ("name", "block", "out_types")

    def __init__(self, name: str, block: Block | None = None, out_types=None):
        self.name = name
        self.block = block if block is not None else Block()
        self.out_types = list(out_types) if out_types is not None else self.block.out_types

    @property
    def in_types(self) -> list[Type]:
        return self.block.in_types

    def callees(self) -> list[Func]:
        """Functions reached through ``call`` equations, transitively, self excluded."""
        seen: dict[int, Func] = {id(self): self}
        todo = [self]
        while todo:
            for eqn in todo.pop().block.walk():
                callee = eqn.params.get("callee")
                if isinstance(callee, Func) and id(callee) not in seen:
                    seen[id(callee)] = callee
                    todo.append(callee)
        return [f for k, f in seen.items() if k != id(self)]

    def __str__(self) -> str:
        return str(Module.of(self))

    def __repr__(self) -> str:
        sig = ", ".join(str(t) for t in self.in_types)
        res = ", ".join(str(t) for t in self.out_types)
        return f"Func(@{self.name}({sig}) -> ({res}))"


class Module:
    """An entry function and every function it calls."""

    __slots__ = ("funcs", "entry")

    def __init__(self, funcs: Sequence[Func], entry: str | None = None):
        self.funcs = {f.name: f for f in funcs}
        if len(self.funcs) != len(funcs):
            raise ValueError("duplicate function names in module")
        self.entry = entry if entry is not None else funcs[0].name

    @classmethod
    def of(cls, func: Func) -> Module:
        return cls([func, *func.callees()], func.name)

    @property
    def main(self) -> Func:
        return self.funcs[self.entry]

    def __str__(self) -> str:
        return _format_module(self)


_format_module: Callable[[Module], str]


def set_formatter(format_module: Callable[[Module], str]) -> None:
    """What ``str`` of a Module (and of a Func, heading one) gives; ``printer.py`` sets
    its textual form as it loads (it imports this module, so this one cannot import it)."""
    global _format_module
    _format_module = format_module


__all__ = [
    "Atom", "Block", "Eqn", "Func", "Lit", "Loc", "Module", "StackType", "TensorType", "Var",
]
