"""Products that are multiplies.

Outer products: a ``dot_general`` that contracts nothing, or only axes of size 1, is one
multiply per element of its result.  As a product it would be a library call per matrix
with an inner size of 1 (per-example gradients make one per lane); as a multiply of two
broadcasts it is a pointwise kernel that fuses with its readers and runs on every thread
and vector lane.

Products with a diagonal matrix: ``A @ I`` and ``A @ diag(v)`` (the identity being the
comparison of two counting axes, as ``np.eye`` and ``jacrev``'s and ``jacfwd``'s seeds
make it; ``diag(v)`` the identity times ``v``, or ``np.diag(v)``) are ``A``, transposed
as the product's axes say, times ``v`` along one axis: n^2 multiplies where a matrix
product would make n^3 (a Jacobian of a chain of layers then costs the products between
the layers alone, as the chain rule by hand).

A matrix times a batch of matrices whose batch axis was moved to the middle (``A @ X``
under ``vmap`` or ``jacfwd``, X batched first: ``X`` transposed to ``(k, B, n)``, the
``(m, B, n)`` product transposed back) is a batched product of ``A``, broadcast, with
each of ``X``'s matrices where they lie: a transpose moved to the result (where it meets
the one back, both go) instead of two copies of the whole batch around one product
(GradBench ht's Jacobian: 28 tangents of (3, 10000) positions rotated).
"""

from __future__ import annotations

from ....ir.builder import Builder
from ....ir.core import Atom, Block, Eqn, Lit, Module
from ....ops import elementwise as E
from ....ops import linalg as LA
from ....ops import shape as S
from ....passes.dce import dce
from ....passes.walk import Forward, FunctionPass

#: The fewest columns each of X's matrices has for ``A @ X`` batched in the middle to run
#: as a batch of products: narrower ones stay one product of the transposed batch, their
#: columns side by side, which keeps the kernel's tiles full (``vmap`` of ``x @ w`` with
#: eight columns a lane), at the price of the two copies.
BATCHED_MIN_COLUMNS = 64


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


class _Products(Forward):
    def __init__(self) -> None:
        super().__init__()
        #: values this pass made as transposes: their operand and permutation, by id
        self.moved: dict[int, tuple[Atom, tuple[int, ...]]] = {}

    def visit(self, eqn: Eqn) -> list[Atom] | None:
        if eqn.op.name == "transpose":
            return self.transpose_back(eqn)
        if eqn.op.name != "dot_general":
            return None
        return self.outer(eqn) or self.diagonal(eqn) or self.batched(eqn)

    def batched(self, eqn: Eqn) -> list[Atom] | None:
        """``A (m, k)`` contracted with ``X (B, k, n)`` transposed to ``(k, B, n)``, each
        of X's matrices at least BATCHED_MIN_COLUMNS wide: the batched product of ``A``
        broadcast to ``(B, m, k)`` with ``X``, transposed to ``(m, B, n)``."""
        a, t = eqn.inputs
        (lc, rc), batch = eqn.params["contract"], eqn.params["batch"]
        move = self.definition(t)
        if (any(batch) or a.type.ndim != 2 or t.type.ndim != 3 or rc != (0,) or
                move is None or move.op.name != "transpose" or
                move.params["perm"] != (1, 0, 2) or a.type.dtype != t.type.dtype):
            return None
        (x,) = move.inputs
        nb = x.type.shape[0]
        if x.type.shape[2] < BATCHED_MIN_COLUMNS:
            return None
        with Builder(eqn.loc) as build:
            spread = S.broadcast_in_dim(a, shape=(nb, *a.type.shape), dims=(1, 2))
            y = LA.dot_general(spread, x, contract=((1 + lc[0],), (1,)), batch=((0,), (0,)))
            out = S.transpose(y, perm=(1, 0, 2))
        self.out.extend(build.frame.eqns)
        self.moved[id(out)] = (y, (1, 0, 2))
        return [out]

    def transpose_back(self, eqn: Eqn) -> list[Atom] | None:
        """A transpose of one this pass made, composed with it: the operand itself where
        the two undo each other."""
        made = self.moved.get(id(eqn.inputs[0]))
        if made is None:
            return None
        y, first = made
        perm = tuple(first[p] for p in eqn.params["perm"])
        if perm == tuple(range(len(perm))):
            return [y]
        with Builder(eqn.loc) as build:
            out = S.transpose(y, perm=perm)
        self.out.extend(build.frame.eqns)
        return [out]

    def outer(self, eqn: Eqn) -> list[Atom] | None:
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

    def diagonal(self, eqn: Eqn) -> list[Atom] | None:
        """``A`` contracted with a diagonal matrix (no batch axes) as ``A``'s contracted
        axis moved to where the diagonal's free axis goes, times its diagonal there."""
        (lc, rc), batch = eqn.params["contract"], eqn.params["batch"]
        out = eqn.outputs[0].type
        if len(lc) != 1 or any(batch) or any(x.type.dtype != out.dtype for x in eqn.inputs):
            return None
        for d, other, k, last in ((eqn.inputs[1], eqn.inputs[0], lc[0], True),
                                  (eqn.inputs[0], eqn.inputs[1], rc[0], False)):
            scale = self.diag(d)
            if scale is None:
                continue
            free = [i for i in range(other.type.ndim) if i != k]
            perm = (*free, k) if last else (k, *free)
            with Builder(eqn.loc) as build:
                x = other if list(perm) == sorted(perm) else S.transpose(other, perm=perm)
                for v in scale:
                    x = E.mul(x, S.broadcast_in_dim(
                        v, shape=out.shape, dims=(out.ndim - 1 if last else 0,)))
            if x.type != out:
                return None
            self.out.extend(build.frame.eqns)
            return [x]
        return None

    def diag(self, d: Atom) -> list[Atom] | None:
        """``[v]`` where ``d`` is ``diag(v)`` (the identity times ``v`` broadcast along
        either axis), ``[]`` where it is the identity, else None."""
        if d.type.ndim != 2 or d.type.shape[0] != d.type.shape[1]:
            return None
        if self.identity(d):
            return []
        eqn = self.definition(d)
        if eqn is not None and eqn.op.name == "reshape":  # np.diag(v): v spread by zeros
            pad = self.definition(eqn.inputs[0])
            n = d.type.shape[0]
            if (pad is not None and pad.op.name == "pad" and pad.inputs[0].type.shape == (n,)
                    and pad.params["interior"] == (n,) and not any(pad.params["lo"])
                    and not any(pad.params["hi"]) and isinstance(pad.inputs[1], Lit)
                    and not pad.inputs[1].value.any()):
                return [pad.inputs[0]]
            return None
        if eqn is None or eqn.op.name != "mul":
            return None
        for eye, other in (eqn.inputs, eqn.inputs[::-1]):
            spread = self.definition(other)
            if (self.identity(eye) and spread is not None
                    and spread.op.name == "broadcast_in_dim"
                    and spread.inputs[0].type.shape == d.type.shape[:1]
                    and spread.inputs[0].type.dtype == d.type.dtype):
                return [spread.inputs[0]]
        return None

    def identity(self, d: Atom) -> bool:
        """Whether ``d`` is a square identity matrix: ``(i == j)`` of the two counting
        axes converted to numbers."""
        eqn = self.definition(d)
        if eqn is None or eqn.op.name != "convert":
            return False
        eq = self.definition(eqn.inputs[0])
        return (eq is not None and eq.op.name == "eq"
                and {self.counts(x) for x in eq.inputs} == {0, 1})

    def counts(self, x: Atom) -> int | None:
        """The axis along which the 2-d ``x`` counts 0, 1, 2, ... (an iota, or a 1-d one
        broadcast), else None."""
        eqn = self.definition(x)
        if eqn is not None and eqn.op.name == "broadcast_in_dim":
            inner = self.definition(eqn.inputs[0])
            if inner is not None and inner.op.name == "iota" and len(eqn.params["dims"]) == 1:
                return eqn.params["dims"][0]
            return None
        return eqn.params["dim"] if eqn is not None and eqn.op.name == "iota" else None


def _rewrite(block: Block, rw: object) -> None:
    _Products().block(block)


_PASS = FunctionPass(_rewrite)


def outer_products(module: Module) -> Module:
    """A copy of ``module`` whose outer products and products with a diagonal matrix
    are multiplies (the identities and diagonals they leave unread dropped)."""
    main = _PASS(module.main)
    dce.in_place(main)
    return Module.of(main)
