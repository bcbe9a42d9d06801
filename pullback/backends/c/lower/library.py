"""Handlers of ops whose loops are runtime or library routines: ``sort`` and the
factorizations.

Sorting calls the runtime's loop (``pb_sort_*``) once per lane; it ports the reference
implementation step by step, so sorting gives the same permutation as the interpreter.
``cholesky`` and ``lu`` call LAPACK (``pb_lapack_*`` of the runtime library
``lapack.c``: ``?potrf``, ``?getrf``) once per batch, triangular solves BLAS's ``?trsm``
once per matrix; ``eigh``, ``svd`` and ``qr`` are one call of ``lapack.c`` for the whole
batch, which asks LAPACK for its workspace once and calls the routines NumPy calls
(``?syevd``, ``?gesdd``, ``?geqrf`` + ``?orgqr``); a failure raises what NumPy raises,
naming the equation's line.  ``cholesky_adjoint`` is one call of ``lapack.c`` too: the
blocked reverse of Cholesky, in BLAS-3 calls.

Operand pointers are taken (``buf``) before any loop opens: a fused operand is computed
into a buffer where ``buf`` is called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ....ir.core import Atom, Eqn
from ....ir.types import float32
from ..build.compiler import BLAS_PREFIX
from ..loops.ir import (
    Copy,
    Decl,
    Expr,
    Int,
    Load,
    Runtime,
    Set,
    Stmt,
    Sym,
    ctype,
    linear,
    strides,
)
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering

#: The jobz argument of ?gesdd: all the singular vectors, the first min(m, n), none.
_JOBZ = {(True, True): "A", (False, True): "S", (True, False): "N", (False, False): "N"}



def _per_matrix(lw: Lowering, x: Atom, stmt: Callable[[Sym], Stmt]) -> None:
    """``stmt(q)`` once per matrix ``q`` of ``x`` (its last two axes)."""
    q = lw.fresh("mat")
    with lw.loop(q, math.prod(x.type.shape[:-2])):
        lw.add(stmt(Sym(q)))


@handles("sort")
def op_sort(lw: Lowering, eqn: Eqn) -> None:
    """Per lane along ``axis``: a permutation sorted stably by each key from the
    least significant one (as the reference does), then every operand gathered."""
    axis, num_keys = eqn.params["axis"], eqn.params["num_keys"]
    desc = int(eqn.params["descending"])
    shape = eqn.inputs[0].type.shape
    srcs = [lw.buf(x) for x in eqn.inputs]
    dests = [Sym(lw.define(v)) for v in eqn.outputs]
    if math.prod(shape) == 0:
        return
    n, stride = shape[axis], strides(shape)[axis]
    perm, tmp = lw.scratch("int64_t", n), lw.scratch("int64_t", n)
    keys = list(zip(eqn.inputs[:num_keys], srcs, strict=False))

    def lane(idx: list[Expr]) -> None:
        base = Sym(lw.fresh("b"))
        lw.add(Decl(base.name, "int64_t", linear(shape, [*idx[:axis], Int(0),
                                                         *idx[axis:]])))
        j = Sym("j")
        with lw.loop("j", n):
            lw.add(Set(Load(perm, j), j))
        for x, src in reversed(keys):
            lw.add(Runtime(f"pb_sort_{x.type.dtype.name}", (
                src + base, Int(stride), perm, tmp, Int(n), Int(desc))))
        for src, dest in zip(srcs, dests, strict=True):
            with lw.loop("j", n):
                lw.add(Set(Load(dest, base + j * stride),
                           Load(src, base + Load(perm, j) * stride)))

    lw.nd_loop([d for k, d in enumerate(shape) if k != axis], lane)


@handles("cholesky")
def op_cholesky(lw: Lowering, eqn: Eqn) -> None:
    (a,) = eqn.inputs
    src = lw.buf(a)
    dest = Sym(lw.define(eqn.outputs[0]))
    lw.add(Runtime(f"pb_lapack_cholesky_{a.type.dtype.name}", (
        Int(math.prod(a.type.shape[:-2])), Int(a.type.shape[-1]), src, dest),
                   ("LinAlgError", "Matrix is not positive definite"), lw.mod.site(eqn)))


@handles("cholesky_adjoint")
def op_cholesky_adjoint(lw: Lowering, eqn: Eqn) -> None:
    """The blocked reverse of Cholesky in ``lapack.c`` (BLAS-3 calls), once per batch."""
    low, ct = eqn.inputs
    srcs = [lw.buf(x) for x in (low, ct)]
    _lapack(lw, eqn, "cholesky_adjoint", Int(low.type.shape[-1]), *srcs,
            Sym(lw.define(eqn.outputs[0])))


@handles("triangular_solve")
def op_triangular_solve(lw: Lowering, eqn: Eqn) -> None:
    """``b`` copied into the result, solved there in place by ``?trsm`` (row-major:
    ``a`` on the left of an m x k result, or on the right of a k x m one)."""
    a, b = eqn.inputs
    p = eqn.params
    mat, rhs = lw.buf(a), lw.buf(b)
    dest = Sym(lw.define(eqn.outputs[0]))
    if b.type.size == 0:
        return
    dt = a.type.dtype
    lw.add(Copy(dest.name, rhs, ctype(dt), b.type.size, fresh=False))
    m = a.type.shape[-1]
    rows, cols = b.type.shape[-2:]
    flags = [Sym(f"Cblas{word}") for word in (
        "RowMajor", "Left" if p["left_side"] else "Right", "Lower" if p["lower"] else "Upper",
        "Trans" if p["transpose_a"] else "NoTrans",
        "Unit" if p["unit_diagonal"] else "NonUnit")]
    trsm = f"{BLAS_PREFIX}cblas_{'s' if dt == float32 else 'd'}trsm"
    _per_matrix(lw, a, lambda q: Runtime(trsm, (
        *flags, Int(rows), Int(cols), Int(1), mat + q * (m * m), Int(m),
        dest + q * (rows * cols), Int(cols))))


@handles("lu")
def op_lu(lw: Lowering, eqn: Eqn) -> None:
    (a,) = eqn.inputs
    src = lw.buf(a)
    packed, pivots, perm = (Sym(lw.define(v)) for v in eqn.outputs)
    lw.add(Copy(packed.name, src, ctype(a.type.dtype), a.type.size, fresh=False))
    lw.add(Runtime(f"pb_lapack_lu_{a.type.dtype.name}", (
        Int(math.prod(a.type.shape[:-2])), Int(a.type.shape[-1]), packed, pivots, perm)))


def _lapack(lw: Lowering, eqn: Eqn, routine: str, *args: Expr) -> None:
    """Call ``pb_lapack_<routine>_<dtype>(ctx, count, *args)`` for ``eqn``'s batch."""
    a = eqn.inputs[0]
    count = math.prod(a.type.shape[:-2])
    lw.add(Runtime(f"pb_lapack_{routine}_{a.type.dtype.name}",
                   (Sym("ctx"), Int(count), *args), ("", ""), lw.mod.site(eqn)))


@handles("eigh")
def op_eigh(lw: Lowering, eqn: Eqn) -> None:
    (a,) = eqn.inputs
    src = lw.buf(a)
    outs = [Sym(lw.define(v)) for v in eqn.outputs]
    vectors = eqn.params["vectors"]
    _lapack(lw, eqn, "eigh", Int(a.type.shape[-1]), src, outs[0],
           outs[1] if vectors else Sym("NULL"), Int(int(eqn.params["lower"])),
           Int(int(vectors)))


@handles("svd")
def op_svd(lw: Lowering, eqn: Eqn) -> None:
    (a,) = eqn.inputs
    src = lw.buf(a)
    outs = [Sym(lw.define(v)) for v in eqn.outputs]
    full, uv = eqn.params["full_matrices"], eqn.params["compute_uv"]
    u, s, vh = outs if uv else (Sym("NULL"), outs[0], Sym("NULL"))
    m, n = a.type.shape[-2:]
    _lapack(lw, eqn, "svd", Int(m), Int(n), src, u, s, vh, Int(ord(_JOBZ[full, uv])))


@handles("qr")
def op_qr(lw: Lowering, eqn: Eqn) -> None:
    (a,) = eqn.inputs
    src = lw.buf(a)
    q, r = (Sym(lw.define(v)) for v in eqn.outputs)
    m, n = a.type.shape[-2:]
    _lapack(lw, eqn, "qr", Int(m), Int(n), src, q, r, Int(int(eqn.params["complete"])))
