"""Forward mode with one lane per input scalar: a gradient or every column of a Jacobian
from one pass, where ``grad`` and ``jacfwd`` find that cheaper."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..frontend.subfunction import SubFunction
from ..ir.core import Atom, Lit
from ..ir.types import TensorType
from ..ops import shape as S
from ..ops.derivs import zeros
from ..transforms.jvp import jvp_emit


def lane_count(sub: SubFunction, ins: Sequence[int]) -> int:
    """How many scalars the operands ``ins`` hold: one lane each."""
    return sum(sub.operands[q].type.size for q in ins)


def unit_lanes(sub: SubFunction, ins: Sequence[int]) -> tuple[list[Atom], list]:
    """``sub`` by forward mode with one lane per element of the operands ``ins``, each
    lane's tangent a unit vector: its results and their tangent bundles."""
    n = lane_count(sub, ins)
    bundles: list[tuple | None] = [None] * len(sub.operands)
    j = 0
    for q in ins:
        t = sub.operands[q].type
        lanes: list[Atom | None] = [None] * n
        for e in range(t.size):
            hot = np.zeros(t.size, t.dtype.np)
            hot[e] = 1
            lanes[j + e] = Lit(hot.reshape(t.shape), t)
        j += t.size
        bundles[q] = tuple(lanes) if t.size else None
    return jvp_emit(sub.func, sub.operands, bundles, lanes=n)


def lane_rows(sub: SubFunction, ins: Sequence[int], bundle: tuple | None,
              t: TensorType) -> list[Atom]:
    """Per operand of ``ins``, its lanes of ``bundle`` (tangents of type ``t``) stacked:
    ``[size of the operand, *t.shape]``."""
    rows, j = [], 0
    for q in ins:
        size = sub.operands[q].type.size
        lanes = [bundle[k] if bundle is not None and bundle[k] is not None else zeros(t)
                 for k in range(j, j + size)]
        j += size
        if not lanes:
            rows.append(zeros(TensorType((0, *t.shape), t.dtype)))
            continue
        rows.append(S.concatenate(*[S.reshape(x, shape=(1, *t.shape)) for x in lanes], axis=0))
    return rows
