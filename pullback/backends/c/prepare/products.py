"""Outer products as multiplies: a ``dot_general`` that contracts nothing, or only axes
of size 1, is one multiply per element of its result.  As a product it would be a
library call per matrix with an inner size of 1 (per-example gradients make one per
lane); as a multiply of two broadcasts it is a pointwise kernel that fuses with its
readers and runs on every thread and vector lane."""

from __future__ import annotations

from ....ir.builder import Builder
from ....ir.core import Atom, Eqn, Module
from ....ops import elementwise as E
from ....ops import shape as S
from ....passes.walk import Forward, FunctionPass


def _spread(x: Atom, kept: list[int], ones: tuple[int, ...], shape: tuple[int, ...],
            dims: tuple[int, ...]) -> Atom:
    """``x`` with its axes ``kept`` in that order (its size-1 axes ``ones`` dropped),
    broadcast to ``shape`` at ``dims``."""
    if kept != sorted(kept):
        x = S.transpose(x, perm=(*kept, *ones))
        kept = list(range(len(kept)))
    if ones:
        x = S.reshape(x, shape=tuple(x.type.shape[k] for k in kept))
    return S.broadcast_in_dim(x, shape=shape, dims=dims)


class _Outer(Forward):
    def visit(self, eqn: Eqn) -> list[Atom] | None:
        if eqn.op.name != "dot_general":
            return None
        a, b = eqn.inputs
        (lc, rc), (lb, rb) = eqn.params["contract"], eqn.params["batch"]
        if any(a.type.shape[k] != 1 for k in lc) or a.type.dtype.is_bool:
            return None
        lf = [k for k in range(a.type.ndim) if k not in lc and k not in lb]
        rf = [k for k in range(b.type.ndim) if k not in rc and k not in rb]
        shape, nb, nl = eqn.outputs[0].type.shape, len(lb), len(lf)
        with Builder(eqn.loc) as build:
            x = _spread(a, [*lb, *lf], lc, shape, tuple(range(nb + nl)))
            y = _spread(b, [*rb, *rf], rc, shape, (*range(nb), *range(nb + nl, len(shape))))
            product = E.mul(x, y)
        self.out.extend(build.frame.eqns)
        return [product]


_PASS = FunctionPass(lambda block, rw: _Outer().block(block))


def outer_products(module: Module) -> Module:
    """A copy of ``module`` whose outer products are multiplies of broadcasts."""
    return Module.of(_PASS(module.main))
