"""Loop IR for ``eigh``, ``svd`` and ``qr``: a mixin of ``lower.Lowering``.

Each is one call of the runtime library ``lapack.c`` for the whole batch of matrices
(``pb_lapack_*``), which asks LAPACK for its workspace once and calls the routines
NumPy calls (``?syevd``, ``?gesdd``, ``?geqrf`` + ``?orgqr``); a failure (LAPACK's
``info != 0``, or no memory for the workspace) raises what NumPy raises, naming the
equation's line.
"""

from __future__ import annotations

import math

from ....ir.core import Eqn
from ..loops.ir import Expr, Int, Runtime, Sym

#: The jobz argument of ?gesdd: all the singular vectors, the first min(m, n), none.
_JOBZ = {(True, True): "A", (False, True): "S", (True, False): "N", (False, False): "N"}


class LapackLowering:
    """``Lowering``'s methods for the factorizations LAPACK computes."""

    def lapack(self, eqn: Eqn, routine: str, *args: Expr) -> None:
        """Call ``pb_lapack_<routine>_<dtype>(ctx, count, *args)`` for ``eqn``'s batch."""
        (a,) = eqn.inputs
        count = math.prod(a.type.shape[:-2])
        self.add(Runtime(f"pb_lapack_{routine}_{a.type.dtype.name}",
                         (Sym("ctx"), Int(count), *args), ("", ""), self.mod.site(eqn)))

    def op_eigh(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        outs = [Sym(self.define(v)) for v in eqn.outputs]
        vectors = eqn.params["vectors"]
        self.lapack(eqn, "eigh", Int(a.type.shape[-1]), src, outs[0],
                    outs[1] if vectors else Sym("NULL"), Int(int(eqn.params["lower"])),
                    Int(int(vectors)))

    def op_svd(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        outs = [Sym(self.define(v)) for v in eqn.outputs]
        full, uv = eqn.params["full_matrices"], eqn.params["compute_uv"]
        u, s, vh = outs if uv else (Sym("NULL"), outs[0], Sym("NULL"))
        m, n = a.type.shape[-2:]
        self.lapack(eqn, "svd", Int(m), Int(n), src, u, s, vh, Int(ord(_JOBZ[full, uv])))

    def op_qr(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        q, r = (Sym(self.define(v)) for v in eqn.outputs)
        m, n = a.type.shape[-2:]
        self.lapack(eqn, "qr", Int(m), Int(n), src, q, r, Int(int(eqn.params["complete"])))
