"""What lowering decides while it emits a function, as opposed to the plan it reads.

The plan (``plan.module``) is fixed before lowering starts; these objects change with
every statement: the blocks open and the buffers each owns, values whose code waits for
their readers, and the kernel body being filled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ....ir.core import Atom, Var
from ..loops.ir import Alloc, Expr
from ..plan.memory import BlockMemory


@dataclass
class Owned:
    """A buffer a block frees: the position of its last read, its dtype and size (a
    scratch buffer of one equation has none).  ``kept``: a buffer the caller handed over
    (``pb.jit(..., donate_argnums=)``), never freed here; ``only``: the id of the one
    value that may be computed into it (the result it was handed over for; 0: any)."""

    last: int
    dtype: str = ""
    size: int = -1
    kept: bool = False
    only: int = 0

    def takes(self, v: Var) -> bool:
        """Whether ``v`` may be computed into this buffer as it dies."""
        return self.only in (0, id(v))


@dataclass
class OpenBlock:
    """A block being lowered: its memory plan, the buffers it owns (by C name), the
    position being emitted, and the gathers' indices it has tested."""

    plan: BlockMemory
    owned: dict[str, Owned] = field(default_factory=dict)
    at: int = -1
    checked: set[tuple[int, int]] = field(default_factory=set)


@dataclass
class Buffers:
    """The function's buffers beyond one block's: the open blocks (innermost last),
    those that may go on the arena, those read at other elements' positions (through a
    slice, gather, concatenation or pad read where used: no kernel writes its output over
    them), per concatenation the buffers of operands computed in place in it, and the
    values (and their reshapes) a kernel stored straight into a concatenation's column."""

    scopes: list[OpenBlock] = field(default_factory=list)
    arena: dict[str, Alloc] = field(default_factory=dict)
    shifted: set[str] = field(default_factory=set)
    placed: dict[int, set[str]] = field(default_factory=dict)
    in_columns: set[int] = field(default_factory=set)


@dataclass
class Fused:
    """Values computed where they are read: their element expressions (``exprs``),
    slices and their reshapes as the buffer they read and the map from their linear
    index to its (``remaps``), those among them that read a kernel's axis indices
    (``by_axes``: broadcasts, iotas, slices across rows), transposes products read through,
    and equations already computed with another (an epilogue by its product, a 0-d
    reshape by its one-element read)."""

    exprs: dict[int, Callable[[Expr], Expr]] = field(default_factory=dict)
    remaps: dict[int, tuple[Atom, Callable[[Expr], Expr]]] = field(default_factory=dict)
    by_axes: set[int] = field(default_factory=set)
    transposed: dict[int, tuple[Atom, tuple[int, ...]]] = field(default_factory=dict)
    absorbed: set[int] = field(default_factory=set)


@dataclass
class KernelBody:
    """In a kernel's body: its values as locals (None outside one); in a kernel by rows,
    its element's linear index, its axis indices and the shape they index."""

    locals: dict[int, str] | None = None
    axes: tuple[Expr, list[Expr], tuple[int, ...]] | None = None
