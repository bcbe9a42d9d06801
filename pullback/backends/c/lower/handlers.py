"""The table of per-op lowering: each op's handler, filled by the family modules
(``control``, ``elementwise``, ``layout``, ``reductions``, ``products``, ``indexing``,
``library``) as they are imported."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ....ir.core import Eqn

if TYPE_CHECKING:
    from .lowering import Lowering

#: A handler adds the loop IR of one equation to the function being lowered.
Handler = Callable[["Lowering", Eqn], None]

HANDLERS: dict[str, Handler] = {}


def handles(*ops: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``ops``."""

    def register(fn: Handler) -> Handler:
        for op in ops:
            if op in HANDLERS:
                raise ValueError(f"two handlers for {op}")
            HANDLERS[op] = fn
        return fn

    return register
