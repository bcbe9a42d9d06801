"""Building IR: emit equations into nested blocks, with types inferred as you go.

    with Builder() as b:
        x = b.param(TensorType((3,), float32))
        y = ops.mul(x, 2.0)             # ops emit into the current builder
        f = b.finish("double", [y])

``Builder.block`` opens a nested region (the body of a ``cond`` or a loop): the function
given builds it from the region's parameters and returns its results.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..errors import CompileError, Loc, array_subclass
from .core import Atom, Block, Eqn, Func, Lit, Var
from .op import OPS, Op, set_emitter
from .types import Type

_CURRENT: ContextVar[Builder | None] = ContextVar("pullback_builder", default=None)


def current() -> Builder:
    """The builder that ops emit into; raises outside a ``with Builder()``."""
    b = _CURRENT.get()
    if b is None:
        raise RuntimeError("no active pullback Builder: use `with Builder() as b:`")
    return b


set_emitter(lambda op, inputs, params: current().emit(op, inputs, params))


def as_atom(x: Any) -> Atom:
    """An IR operand: Vars and Lits as they are, Python and NumPy constants as Lits."""
    if isinstance(x, (Var, Lit)):
        return x
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        raise array_subclass(x)
    if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)):
        return Lit(x)  # a complex one is refused by its type
    raise TypeError(f"cannot use {type(x).__name__} {x!r} as an IR operand")


class Builder:
    def __init__(self, loc: Loc | None = None):
        self._frames: list[Block] = [Block()]
        self.loc = loc
        self._token = None

    def __enter__(self) -> Builder:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)

    @contextlib.contextmanager
    def at(self, loc: Loc | None) -> Iterator[None]:
        """Equations emitted inside carry ``loc``."""
        saved, self.loc = self.loc, loc
        try:
            yield
        finally:
            self.loc = saved

    @property
    def frame(self) -> Block:
        return self._frames[-1]

    def param(self, type: Type, hint: str | None = None) -> Var:
        """A new parameter of the block being built."""
        v = Var(type, hint)
        self.frame.params.append(v)
        return v

    def outer_param(self, var: Var) -> None:
        """``var`` becomes a parameter of the outermost block (its inner blocks, being
        built, may read it)."""
        self._frames[0].params.append(var)

    def emit(
        self,
        op: Op | str,
        inputs: Sequence[Any],
        params: dict[str, Any] | None = None,
        loc: Loc | None = None,
    ) -> list[Var]:
        """Append ``op(*inputs) {params}`` to the current block; return its outputs."""
        op = OPS[op] if isinstance(op, str) else op
        atoms = [as_atom(x) for x in inputs]
        params = dict(params or {})
        loc = loc or self.loc
        try:
            out_types = op.infer_types([a.type for a in atoms], params)
        except CompileError as e:
            raise e.with_loc(loc) from None
        outs = [Var(t) for t in out_types]
        self.frame.eqns.append(Eqn(op, atoms, outs, params, loc))
        return outs

    @contextlib.contextmanager
    def into(self, block: Block) -> Iterator[None]:
        """Emit into an existing ``block`` (appending to its equations) for a while."""
        self._frames.append(block)
        try:
            yield
        finally:
            self._frames.pop()

    def block(self, param_types: Sequence[Type], body: Callable[..., Any]) -> Block:
        """A nested block: ``body(*params)`` emits its equations and returns its results."""
        blk = Block([Var(t) for t in param_types])
        self._frames.append(blk)
        try:
            res = body(*blk.params)
        finally:
            self._frames.pop()
        blk.results = [as_atom(r) for r in _as_list(res)]
        return blk

    def finish(self, name: str, results: Any) -> Func:
        """Close the outermost block as a function returning ``results``."""
        if len(self._frames) != 1:
            raise RuntimeError("finish() inside a nested block")
        blk = self._frames[0]
        blk.results = [as_atom(r) for r in _as_list(results)]
        return Func(name, blk)


def _as_list(res: Any) -> list:
    return list(res) if isinstance(res, (list, tuple)) else [res]


def build_func(name: str, in_types: Sequence[Type], body: Callable[..., Any]) -> Func:
    """A function whose parameters have ``in_types`` and whose body ``body`` builds."""
    with Builder() as b:
        params = [b.param(t) for t in in_types]
        return b.finish(name, body(*params))


def declare_func(name: str, in_types: Sequence[Type], out_types: Sequence[Type]) -> Func:
    """A function with a signature and no body yet, so that its body can ``call`` it."""
    return Func(name, Block([Var(t) for t in in_types]), out_types)


def define_func(func: Func, body: Callable[..., Any]) -> Func:
    """Give a declared function its body: ``body(*params)`` emits it, returns the results."""
    with Builder() as b:
        b.frame.params = list(func.block.params)
        func.block = b.finish(func.name, body(*func.block.params)).block
    return func
