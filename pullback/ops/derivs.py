"""What derivative rules share: zeros, constants of an operand's dtype, sums back to an
operand's shape, and the rules of ops whose derivative is zero.

Rule conventions (every op's ``jvp``/``vjp`` follows them):

* ``jvp(primals, tangents, outs, **params) -> tangents of outs``
* ``vjp(primals, outs, cts, **params) -> cotangents of primals``

All arguments are lists of IR atoms; a tangent or cotangent ``None`` is a symbolic zero,
and a rule returns ``None`` for an output (input) whose derivative is zero.  Rules emit
into the current builder with ops only, and the ops they use have rules themselves, so
derivatives of derivatives work.  A returned (co)tangent has the primal's shape and
dtype; the transforms fix the weak flag of 0-d values.
"""

from __future__ import annotations

import numpy as np

from ..ir.builder import current
from ..ir.core import Atom, Lit
from ..ir.types import TensorType


def const(value, like: TensorType) -> Lit:
    """A 0-d constant of ``like``'s dtype (weak, so it never changes a result's type)."""
    return Lit(np.asarray(value, like.dtype.np), TensorType((), like.dtype, weak=True))


def zeros(t: TensorType) -> Atom:
    """An all-zero value of type ``t``."""
    zero = Lit(np.zeros((), t.dtype.np), TensorType((), t.dtype, weak=t.weak))
    if t.shape == ():
        return zero
    return current().emit("broadcast_in_dim", [zero.value[()]],
                          {"shape": t.shape, "dims": ()})[0]


def sum_to(x: Atom, t: TensorType) -> Atom:
    """``x`` summed down to ``t``'s shape: all of it for a 0-d operand that an
    elementwise op broadcast, unchanged otherwise."""
    if x.type.shape == t.shape:
        return x
    if t.shape != ():
        raise ValueError(f"internal: cannot sum {x.type} down to {t}")
    axes = tuple(range(x.type.ndim))
    return current().emit("reduce_sum", [x], {"axes": axes})[0]


def zero_jvp(primals, tangents, outs, **params):
    """The derivative of a piecewise-constant op (floor, sign, ...): zero."""
    return [None] * len(outs)


def zero_vjp(primals, outs, cts, **params):
    return [None] * len(primals)
