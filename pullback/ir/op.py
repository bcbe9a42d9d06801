"""The declaration of a primitive, and the registry of all of them.

The declarations themselves live in ``pullback/ops/``, one module per family.

One op, one place: an ``Op`` carries its params schema, its arity, its shape/dtype rule
(``infer``), its NumPy reference semantics (``impl``), and the slots that the
transforms and backends fill — ``jvp``, ``vjp``, ``batch`` and the fusion kind.  A
backend derives its sets of ops (unary, binary ...) from fusion kinds and arities.

Conventions every op follows:

* ``infer(in_types, **params)`` returns one type, or a list of types when
  ``multiple_results``; it raises ``ShapeError`` with the offending shapes.
* ``impl(*arrays, **params)`` returns one NumPy array (or a list) of exactly the
  inferred types.  It runs with NumPy's floating-point warnings silenced: inf and nan
  are values here, as in plain NumPy code.  Ops that own blocks receive ``run=`` as well, a callable
  ``run(block, *arrays) -> list[arrays]`` that evaluates a block.
* Calling an op (``add(x, y)``) emits it into the current builder; Python and NumPy
  constants become ``Lit`` operands.  The builder imports this module, so it is the
  builder that tells ops where to emit (``set_emitter``), not ops that import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ShapeError
from .core import Block, Func
from .types import DType, TensorType

#: Fusion kinds the native backend understands.
FUSION_KINDS = ("elementwise", "broadcast", "reshape", "reduction", "opaque", "control", "effect")

#: Kinds of param values, for the params schema (validated by the verifier).
PARAM_KINDS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "float": lambda v: isinstance(v, float),
    "str": lambda v: isinstance(v, str),
    "dtype": lambda v: isinstance(v, DType),
    "type": lambda v: isinstance(v, TensorType),
    "ints": lambda v: isinstance(v, tuple)
    and all(isinstance(i, int) and not isinstance(i, bool) for i in v),
    "ints?": lambda v: v is None or PARAM_KINDS["ints"](v),
    "pairs": lambda v: isinstance(v, tuple) and all(PARAM_KINDS["ints"](p) for p in v),
    "block": lambda v: isinstance(v, Block),
    "func": lambda v: isinstance(v, Func),
}


@dataclass(eq=False)
class Op:
    name: str
    infer: Callable[..., Any]
    impl: Callable[..., Any]
    params: Mapping[str, str] = field(default_factory=dict)
    multiple_results: bool = False
    fusion: str = "opaque"
    effect: bool = False
    jvp: Callable | None = None
    vjp: Callable | None = None
    batch: Callable | None = None
    optional: tuple[str, ...] = ()  # params that may be left out
    arity: int | None = None  # how many operands it takes (None: any number)

    def __post_init__(self):
        if self.fusion not in FUSION_KINDS:
            raise ValueError(f"{self.name}: unknown fusion kind {self.fusion!r}")
        for kind in self.params.values():
            if kind not in PARAM_KINDS:
                raise ValueError(f"{self.name}: unknown param kind {kind!r}")
        if self.name in OPS:
            raise ValueError(f"op {self.name!r} declared twice")
        self._owns_code = any(v in ("block", "func") for v in self.params.values())
        self._blocks = tuple(k for k, v in self.params.items() if v == "block")
        OPS[self.name] = self

    @property
    def blocks(self) -> tuple[str, ...]:
        """Names of the params that hold blocks (the regions this op owns)."""
        return self._blocks

    @property
    def owns_code(self) -> bool:
        """Whether ``impl`` needs ``run=`` (the op holds blocks or calls a function)."""
        return self._owns_code

    def infer_types(self, in_types, params: Mapping[str, Any]) -> list:
        in_types = list(in_types)
        if self.arity is not None and len(in_types) != self.arity:
            raise ShapeError(f"{self.name} takes {self.arity} operands, got {len(in_types)}")
        out = self.infer(in_types, **params)
        return list(out) if self.multiple_results else [out]

    def __call__(self, *inputs, **params):
        """Emit this op into the current builder; returns a Var or a tuple of Vars."""
        outs = _emit(self, inputs, params)
        return tuple(outs) if self.multiple_results else outs[0]

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, Op] = {}

#: ``emit(op, inputs, params) -> outputs``: how calling an op adds it to the IR.
Emitter = Callable[[Op, Sequence[Any], dict[str, Any]], list]

_emit: Emitter


def set_emitter(emit: Emitter) -> None:
    """Where calling an op emits it; ``builder.py`` sets this as it loads."""
    global _emit
    _emit = emit


def get_op(name: str) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}") from None
