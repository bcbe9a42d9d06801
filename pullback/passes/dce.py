"""Dead code elimination: equations whose outputs nobody reads and that have no effect
go, inside nested blocks too (``ir.liveness.prune``, which says how stacks and control
flow fare)."""

from __future__ import annotations

from ..ir.liveness import Effects, prune
from .walk import FunctionPass

#: ``dce(func) -> Func``
dce = FunctionPass(lambda block, rw: prune(block, Effects()))
