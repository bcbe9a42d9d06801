"""Sums of zero-padded pieces as concatenations.

The gradient of an array read in slices (an LSTM's four gates cut from one product,
attention's query, key and value from one projection) is each slice's gradient padded
with zeros to the whole array, then the pads added up: every pad a pass that zeroes the
array and writes its piece, every add a pass reading two arrays.  When the pieces lie
side by side along one axis without overlapping, the sum is their concatenation (zeros
between them where they leave gaps), which the plan builds in place: each piece is
computed straight into its part of the array, and nothing is zeroed or added.
"""

from __future__ import annotations

from ....ir.builder import Builder
from ....ir.core import Atom, Eqn, Lit, Module
from ....ops import shape as S
from ....passes.dce import dce
from ....passes.walk import Forward, FunctionPass

#: Pieces of a sum along an axis: the axis, the padding value (a 0-d zero literal) and
#: each piece's start along the axis with its value, in no particular order.
Pieces = tuple[int, Lit, list[tuple[int, Atom]]]


def _is_zero(a: Atom) -> bool:
    return isinstance(a, Lit) and a.type.shape == () and not a.value.any()


class _Concatenate(Forward):
    def __init__(self):
        super().__init__()
        self.pieces: dict[int, Pieces] = {}  # the concatenations this pass made

    def visit(self, eqn: Eqn) -> list[Atom] | None:
        if eqn.op.name != "add" or eqn.outputs[0].type.shape == ():
            return None
        parts = [self.of(a) for a in eqn.inputs]
        if parts[0] is None or parts[1] is None or parts[0][0] != parts[1][0]:
            return None
        (axis, zero, left), (_, _, right) = parts
        spans = sorted([*left, *right], key=lambda p: p[0])
        ends = [start + x.type.shape[axis] for start, x in spans]
        if any(ends[k] > spans[k + 1][0] for k in range(len(spans) - 1)):
            return None  # pieces overlap: a sum indeed
        out = eqn.outputs[0].type
        with Builder(eqn.loc) as build:
            row, at = [], 0
            for (start, x), end in zip(spans, ends, strict=True):
                if start > at:
                    row.append(self.zeros(zero, out.shape, axis, start - at))
                row.append(x)
                at = end
            if at < out.shape[axis]:
                row.append(self.zeros(zero, out.shape, axis, out.shape[axis] - at))
            joined = S.concatenate(*row, axis=axis)
        self.out.extend(build.frame.eqns)
        self.pieces[id(joined)] = axis, zero, spans
        return [joined]

    @staticmethod
    def zeros(zero: Lit, shape: tuple[int, ...], axis: int, width: int) -> Atom:
        gap = (*shape[:axis], width, *shape[axis + 1:])
        return S.broadcast_in_dim(zero, shape=gap, dims=())

    def of(self, a: Atom) -> Pieces | None:
        """``a`` as pieces along one axis: a pad by zeros along one axis (not interior),
        or a concatenation this pass made."""
        if id(a) in self.pieces:
            return self.pieces[id(a)]
        eqn = self.definition(a)
        if eqn is None or eqn.op.name != "pad" or not _is_zero(eqn.inputs[1]):
            return None
        p = eqn.params
        axes = [k for k in range(a.type.ndim) if p["lo"][k] or p["hi"][k]]
        if any(p["interior"]) or len(axes) != 1 or p["lo"][axes[0]] < 0 or \
                p["hi"][axes[0]] < 0 or eqn.inputs[0].type.dtype != a.type.dtype:
            return None
        return axes[0], eqn.inputs[1], [(p["lo"][axes[0]], eqn.inputs[0])]


def _rewrite(block, rw: object) -> None:
    _Concatenate().block(block)


_PASS = FunctionPass(_rewrite)


def concatenate_pieces(module: Module) -> Module:
    """A copy of ``module`` whose sums of zero-padded pieces lying side by side along
    one axis are concatenations (the pads and partial sums left unread dropped)."""
    main = _PASS(module.main)
    dce.in_place(main)
    return Module.of(main)
