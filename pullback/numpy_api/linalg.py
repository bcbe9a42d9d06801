"""Products, contractions, diagonals, norms, factorization-based solvers and 1-d
convolution: ``np.matmul``/``@``, ``np.dot``, ``np.einsum``, ``np.linalg.*`` ...

Everything here is a composition of ``dot_general``, ``lu``, ``triangular_solve``,
``cholesky``, ``conv`` and the shape, elementwise and reduction primitives.  NumPy's
products treat Python scalars as arrays (``np.dot(x32, 2.0)`` is float64), and
``np.linalg`` computes in float64 unless every operand is float32.
"""

from __future__ import annotations

import functools
import operator
import string
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConcretizationError, ShapeError, UnsupportedError
from ..ir.core import Atom, Lit
from ..ir.types import (
    DType,
    broadcast_shapes,
    float32,
    float64,
    int32,
    int64,
    promote_types,
)
from ..ir.types import dtype as to_dtype
from ..ops import control as K
from ..ops import conv as C
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import reduce as R
from ..ops import shape as S
from ..ops import spectral as Sp
from .core import (
    broadcast_args,
    broadcast_to,
    convert,
    is_dynamic,
    method,
    normalize_axis,
    operator_,
    promote,
    register,
    shape_of,
    strong,
    typeof,
)

_LinAlgError = np.linalg.LinAlgError
_SlogdetResult = type(np.linalg.slogdet(np.eye(1)))


# -- small compositions ---------------------------------------------------------------


def _arrays(*xs: Any) -> tuple[list[Atom], DType]:
    """Operands as NumPy would see them after ``asarray``, promoted to one dtype."""
    atoms, rt = promote(*(strong(x) for x in xs))
    return atoms, rt.dtype


def _no_out(out: Any) -> None:
    if out is not None:
        raise UnsupportedError("out= is not supported", hint="assign the result instead")


def _const(value: Any, dt: DType) -> Lit:
    return Lit(np.asarray(value, dt.np))


def _zeros(shape: Sequence[int], dt: DType) -> Atom:
    return broadcast_to(_const(0, dt), shape)


def _reshape(x: Atom, shape: Sequence[int]) -> Atom:
    shape = tuple(shape)
    return x if shape_of(x) == shape else S.reshape(x, shape=shape)


def _transpose(x: Atom, perm: Sequence[int]) -> Atom:
    perm = tuple(perm)
    return x if perm == tuple(range(len(perm))) else S.transpose(x, perm=perm)


def _swap_last(x: Atom) -> Atom:
    nd = len(shape_of(x))
    return _transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def _times(a: Atom, b: Atom) -> Atom:
    """Elementwise product of same-dtype operands, broadcast (booleans: and)."""
    a, b = broadcast_args(a, b)
    return E.and_(a, b) if typeof(a).dtype.is_bool else E.mul(a, b)


def _max_from_zero(x: Atom, axes: tuple[int, ...]) -> Atom:
    """The maximum of values >= 0 (or False), 0 over an empty extent (``initial=0``)."""
    t = typeof(x)
    if any(t.shape[i] == 0 for i in axes):
        return _zeros([d for i, d in enumerate(t.shape) if i not in axes], t.dtype)
    return R.reduce_max(x, axes=axes)


def _total(x: Atom, axes: Sequence[int]) -> Atom:
    """Sum over ``axes`` in ``x``'s dtype; booleans sum as 'or', as in their products."""
    axes = tuple(sorted(axes))
    if not axes:
        return x
    if typeof(x).dtype.is_bool:
        return _max_from_zero(x, axes)
    return R.reduce_sum(x, axes=axes)


def _sum_dtype(dt: DType) -> DType:
    """``np.sum``'s default accumulator: booleans and small ints widen to int64."""
    return int64 if dt.kind in "bi" else dt


def _iota(shape: Sequence[int], dim: int, dt: DType = int64) -> Atom:
    return S.iota(shape=tuple(shape), dim=dim, dtype=dt)


def _offset_mask(shape: Sequence[int], k: Any, cmp) -> Atom:
    """``cmp(col - row, k)`` over a [rows, cols] grid (``tri``'s mask and friends)."""
    diff = E.sub(_iota(shape, 1), _iota(shape, 0))
    return cmp(diff, convert(k, int64))


# -- matmul, dot and friends ----------------------------------------------------------


def _matmul(a: Atom, b: Atom) -> Atom:
    """``a @ b`` for same-dtype operands, with NumPy's 1-d and batch broadcasting rules."""
    sa, sb = shape_of(a), shape_of(b)
    for i, s in enumerate((sa, sb)):
        if not s:
            raise ShapeError(f"matmul: Input operand {i} does not have enough dimensions (has "
                             f"0, gufunc core with signature (n?,k),(k,m?)->(n?,m?) requires 1)")
    ka, kb = sa[-1], sb[-2 if len(sb) > 1 else 0]
    if ka != kb:
        raise ShapeError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with "
                         f"gufunc signature (n?,k),(k,m?)->(n?,m?) (size {kb} is different "
                         f"from {ka}) for shapes {sa} and {sb}")
    if len(sb) <= 2 or len(sa) == 1:
        return L.dot_general(a, b, contract=((len(sa) - 1,), (max(len(sb) - 2, 0),)),
                             batch=((), ()))
    if len(sa) == 2:
        out = L.dot_general(a, b, contract=((1,), (len(sb) - 2,)), batch=((), ()))
        nd = len(sb)
        return _transpose(out, (*range(1, nd - 1), 0, nd - 1))
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    a, b = broadcast_to(a, batch + sa[-2:]), broadcast_to(b, batch + sb[-2:])
    nb = len(batch)
    return L.dot_general(a, b, contract=((nb + 1,), (nb,)),
                         batch=(tuple(range(nb)), tuple(range(nb))))


@register(np.matmul)
def matmul(x1: Any, x2: Any, /, out: Any = None, *, dtype: Any = None) -> Atom:
    _no_out(out)
    (a, b), _ = _arrays(x1, x2)
    if dtype is not None:
        a, b = (convert(x, _cast_to(x, dtype, "same_kind")) for x in (a, b))
    return _matmul(a, b)


@register(np.linalg.matmul)
def linalg_matmul(x1: Any, x2: Any, /) -> Atom:
    return matmul(x1, x2)


@operator_("matmul")
def matmul_operator(a: Any, b: Any) -> Atom:
    return matmul(a, b)


def _cast_to(x: Atom, to: Any, casting: str) -> DType:
    """``to`` as a DType, if NumPy's ``casting`` rule lets ``x`` become one."""
    dt, src = to_dtype(to), typeof(x).dtype
    if not np.can_cast(src.np, dt.np, casting):
        raise TypeError(f"Cannot cast array data from dtype('{src.np}') to dtype('{dt.np}') "
                        f"according to the rule '{casting}'")
    return dt


def _not_aligned(sa, sb, axa: int, axb: int) -> ShapeError:
    return ShapeError(f"shapes {sa} and {sb} not aligned: {sa[axa]} (dim {axa}) != "
                      f"{sb[axb]} (dim {axb})")


def _contract_last(a: Atom, b: Atom, axb: int) -> Atom:
    """``a``'s last axis against ``b``'s axis ``axb``; 0-d operands multiply."""
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return _times(a, b)
    if sa[-1] != sb[axb]:
        raise _not_aligned(sa, sb, len(sa) - 1, axb % len(sb))
    return L.dot_general(a, b, contract=((len(sa) - 1,), (axb % len(sb),)), batch=((), ()))


@register(np.dot)
def dot(a: Any, b: Any, out: Any = None) -> Atom:
    _no_out(out)
    (a, b), _ = _arrays(a, b)
    return _contract_last(a, b, -2 if len(shape_of(b)) > 1 else 0)


@method("dot")
def dot_method(self: Any, b: Any, out: Any = None) -> Atom:
    return dot(self, b, out)


@register(np.inner)
def inner(a: Any, b: Any, /) -> Atom:
    (a, b), _ = _arrays(a, b)
    return _contract_last(a, b, -1)


@register(np.vdot)
def vdot(a: Any, b: Any, /) -> Atom:
    (a, b), _ = _arrays(a, b)
    na, nb = typeof(a).size, typeof(b).size
    if na != nb:
        raise ShapeError(f"vdot: vectors have different lengths ({na} and {nb})")
    return L.dot_general(_reshape(a, (na,)), _reshape(b, (nb,)), contract=((0,), (0,)),
                         batch=((), ()))


def _outer(a: Atom, b: Atom) -> Atom:
    na, nb = typeof(a).size, typeof(b).size
    return _times(_reshape(a, (na, 1)), _reshape(b, (1, nb)))


@register(np.outer)
def outer(a: Any, b: Any, out: Any = None) -> Atom:
    _no_out(out)
    (a, b), _ = _arrays(a, b)
    return _outer(a, b)


@register(np.linalg.outer)
def linalg_outer(x1: Any, x2: Any, /) -> Atom:
    (a, b), _ = _arrays(x1, x2)
    for i, x in enumerate((a, b)):
        if len(shape_of(x)) != 1:
            raise ShapeError(f"Input arrays must be one-dimensional, but x{i + 1} has shape "
                             f"{shape_of(x)}")
    return _outer(a, b)


def _tensordot_axes(axes: Any, nda: int, ndb: int) -> tuple[list[int], list[int]]:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        return ([normalize_axis(ax, nda) for ax in range(-n, 0)],
                [normalize_axis(ax, ndb) for ax in range(n)])
    axa, axb = axes
    axa = [axa] if isinstance(axa, (int, np.integer)) else list(axa)
    axb = [axb] if isinstance(axb, (int, np.integer)) else list(axb)
    return ([normalize_axis(ax, nda) for ax in axa], [normalize_axis(ax, ndb) for ax in axb])


@register(np.tensordot)
def tensordot(a: Any, b: Any, axes: Any = 2) -> Atom:
    (a, b), _ = _arrays(a, b)
    sa, sb = shape_of(a), shape_of(b)
    axa, axb = _tensordot_axes(axes, len(sa), len(sb))
    if len(axa) != len(axb) or any(sa[i] != sb[j] for i, j in zip(axa, axb, strict=True)):
        raise ShapeError(f"shape-mismatch for sum: axes {axa} of {sa} against {axb} of {sb}")
    return L.dot_general(a, b, contract=(tuple(axa), tuple(axb)), batch=((), ()))


@register(np.linalg.tensordot)
def linalg_tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Atom:
    return tensordot(x1, x2, axes)


@register(np.vecdot, np.linalg.vecdot)
def vecdot(x1: Any, x2: Any, /, out: Any = None, *, axis: int = -1) -> Atom:
    """Each operand's ``axis`` is the core dim (equal sizes); the rest broadcast."""
    _no_out(out)
    (a, b), _ = _arrays(x1, x2)
    cores = []
    for i, x in enumerate((a, b)):
        nd = len(shape_of(x))
        if not nd:
            raise ShapeError(f"vecdot: Input operand {i} does not have enough dimensions (has "
                             f"0, gufunc core with signature (n),(n)->() requires 1)")
        cores.append(_transpose(x, _move_to_end(normalize_axis(axis, nd), nd)))
    if shape_of(cores[0])[-1] != shape_of(cores[1])[-1]:
        raise ShapeError(f"vecdot: core dimensions differ for shapes {shape_of(a)} and "
                         f"{shape_of(b)} along axis {axis}")
    a, b = cores
    prod = _times(a, b)
    return _total(prod, (len(shape_of(prod)) - 1,))


@register(np.kron)
def kron(a: Any, b: Any) -> Atom:
    (a, b), _ = _arrays(a, b)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return _times(a, b)
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a = _reshape(a, [d for n in sa for d in (n, 1)])
    b = _reshape(b, [d for n in sb for d in (1, n)])
    return _reshape(_times(a, b), [m * n for m, n in zip(sa, sb, strict=True)])


# -- einsum ---------------------------------------------------------------------------


def _einsum_term(spec: str, where: str) -> tuple[list[str], list[str] | None]:
    """Letters before and after ``...`` (None when there is no ellipsis)."""
    head, sep, tail = spec.partition("...")
    for part in (head, tail):
        bad = next((c for c in part if c not in string.ascii_letters), None)
        if bad == ".":
            raise ValueError(f"einstein sum subscripts string contains a '.' that is not part "
                             f"of an ellipsis ('...') in {where}")
        if bad is not None:
            raise ValueError(f"invalid subscript '{bad}' in einstein sum subscripts string, "
                             f"subscripts must be letters")
    return list(head), (list(tail) if sep else None)


def _einsum_input_labels(specs: list[str], shapes: list[tuple]) -> tuple[list[list[str]], int]:
    """Each operand's axis labels; broadcast (ellipsis) axes get labels '.0', '.1' ...
    right-aligned so that they line up across operands."""
    terms = []
    for i, (spec, shape) in enumerate(zip(specs, shapes, strict=True)):
        head, tail = _einsum_term(spec, f"operand {i}")
        n_ell = len(shape) - len(head) - len(tail or [])
        if n_ell < 0:
            raise ValueError(f"einstein sum subscripts string contains too many subscripts for "
                             f"operand {i} of shape {shape}")
        if tail is None and n_ell:
            raise ValueError(f"operand {i} of shape {shape} has more dimensions than subscripts "
                             f"given in einstein sum, but no '...' ellipsis provided to "
                             f"broadcast the extra dimensions.")
        terms.append((head, n_ell, tail or []))
    n_bcast = max((n for _, n, _ in terms), default=0)
    labels = [head + [f".{n_bcast - n + j}" for j in range(n)] + tail
              for head, n, tail in terms]
    return labels, n_bcast


def _einsum_output_labels(out: str | None, labels: list[list[str]], n_bcast: int) -> list[str]:
    bcast = [f".{j}" for j in range(n_bcast)]
    if out is None:
        counts = Counter(c for term in labels for c in term if not c.startswith("."))
        return bcast + sorted(c for c, n in counts.items() if n == 1)
    head, tail = _einsum_term(out, "the output")
    if tail is None and n_bcast:
        raise ValueError("output has more dimensions than subscripts given in einstein sum, "
                         "but no '...' ellipsis provided to broadcast the extra dimensions.")
    letters = head + (tail or [])
    seen = {c for term in labels for c in term}
    for c in letters:
        if letters.count(c) > 1:
            raise ValueError(f"einstein sum subscripts string includes output subscript '{c}' "
                             f"multiple times")
        if c not in seen:
            raise ValueError(f"einstein sum subscripts string included output subscript '{c}' "
                             f"which never appeared in an input")
    return head + (bcast if tail is not None else []) + (tail or [])


def _sublist_subscripts(first: Any, rest: tuple) -> tuple[str, tuple]:
    """einsum's ``(operand, sublist, ..., [sublistout])`` form as a subscripts string and
    the operands: label ``k`` is ``A``-``Z`` then ``a``-``z``, as NumPy spells it, so an
    implicit output is ordered by label number."""
    args = (first, *rest)
    out = args[-1] if len(args) % 2 else None
    pairs = args[:-1] if out is not None else args

    def spelled(sublist: Any) -> str:
        labels = []
        for k in sublist:
            if k is Ellipsis:
                labels.append("...")
            elif isinstance(k, (int, np.integer)) and 0 <= k < 52:
                labels.append(chr(ord("A") + k) if k < 26 else chr(ord("a") + k - 26))
            else:
                raise ValueError("subscript is not within the valid range [0, 52)")
        return "".join(labels)

    subscripts = ",".join(spelled(s) for s in pairs[1::2])
    if out is not None:
        subscripts += "->" + spelled(out)
    return subscripts, pairs[0::2]


def _einsum_parse(subscripts: str, shapes: list[tuple]) -> tuple[list[list[str]], list[str]]:
    text = subscripts.replace(" ", "")
    ins, arrow, out = text.partition("->")
    specs = ins.split(",")
    if len(specs) != len(shapes):
        more = "more" if len(shapes) > len(specs) else "fewer"
        raise ValueError(f"{more} operands provided to einstein sum function than specified in "
                         f"the subscripts string")
    labels, n_bcast = _einsum_input_labels(specs, shapes)
    return labels, _einsum_output_labels(out if arrow else None, labels, n_bcast)


def _take_diagonals(x: Atom, labels: list[str]) -> tuple[Atom, list[str]]:
    """Collapse each label repeated within one operand onto its diagonal."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        si, sj = shape_of(x)[i], shape_of(x)[j]
        if si != sj:
            raise ShapeError(f"dimensions in operand for collapsing index '{c}' don't match "
                             f"({si} != {sj})")
        x = _diagonal(x, 0, i, j)
        labels = [lb for k, lb in enumerate(labels) if k not in (i, j)] + [c]
    return x, labels


def _label_sizes(xs: list[Atom], labels: list[list[str]]) -> dict[str, int]:
    """Each label's size; size-1 axes broadcast against the others."""
    sizes: dict[str, int] = {}
    for i, (x, term) in enumerate(zip(xs, labels, strict=True)):
        for c, n in zip(term, shape_of(x), strict=True):
            have = sizes.setdefault(c, n)
            if n != 1 and have not in (1, n):
                raise ShapeError(f"einsum: operand {i} has size {n} for label '{c}' where "
                                 f"an earlier operand has {have}")
            if n != 1:
                sizes[c] = n
    return sizes


def _drop_broadcast_axes(x: Atom, labels: list[str], sizes: dict[str, int]):
    """Remove size-1 axes whose label is larger elsewhere (they broadcast)."""
    keep = [k for k, c in enumerate(labels) if shape_of(x)[k] == sizes[c]]
    return _reshape(x, [shape_of(x)[k] for k in keep]), [labels[k] for k in keep]


def _sum_unshared(x: Atom, labels: list[str], needed: set[str]):
    """Sum out the axes no other operand and not the output needs."""
    axes = [k for k, c in enumerate(labels) if c not in needed]
    return _total(x, axes), [c for c in labels if c in needed]


def _contract_pair(a, la, b, lb, needed: set[str]):
    """``a`` and ``b`` multiplied, summing the labels they share that are not needed."""
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in needed]
    summed = [c for c in shared if c not in needed]
    out = L.dot_general(
        a, b,
        contract=(tuple(la.index(c) for c in summed), tuple(lb.index(c) for c in summed)),
        batch=(tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)),
    )
    return out, batch + [c for c in la if c not in shared] + [c for c in lb if c not in shared]


def _einsum(xs: list[Atom], labels: list[list[str]], out: list[str]) -> Atom:
    """Diagonals, then sums of private labels, then left-to-right pairwise contractions."""
    terms = [_take_diagonals(x, term) for x, term in zip(xs, labels, strict=True)]
    sizes = _label_sizes([x for x, _ in terms], [term for _, term in terms])
    terms = [_drop_broadcast_axes(x, term, sizes) for x, term in terms]
    reduced = []
    for i, (x, term) in enumerate(terms):
        others = {c for j, (_, t) in enumerate(terms) if j != i for c in t}
        reduced.append(_sum_unshared(x, term, others | set(out)))
    acc, acc_labels = reduced[0]
    for i, (x, term) in enumerate(reduced[1:], start=1):
        later = {c for _, t in reduced[i + 1 :] for c in t}
        acc, acc_labels = _contract_pair(acc, acc_labels, x, term, later | set(out))
    return _transpose(acc, [acc_labels.index(c) for c in out])


@register(np.einsum)
def einsum(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
           order: str = "K", casting: str = "safe", optimize: Any = False) -> Atom:
    _no_out(out)
    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_subscripts(subscripts, operands)
    if not operands:
        raise ValueError("must specify the einstein sum subscripts string and at least one "
                         "operand")
    xs, _ = _arrays(*operands)
    if dtype is not None:
        xs = [convert(x, _cast_to(x, dtype, casting)) for x in xs]
    labels, out_labels = _einsum_parse(subscripts, [shape_of(x) for x in xs])
    return _einsum(xs, labels, out_labels)


# -- diagonals and triangles ----------------------------------------------------------


def _diagonal(x: Atom, offset: int, axis1: int, axis2: int) -> Atom:
    """The ``offset`` diagonal of axes (axis1, axis2), appended as the last axis: the two
    axes are flattened and read with a stride of one row plus one."""
    shape = shape_of(x)
    n1, n2 = shape[axis1], shape[axis2]
    rest = [ax for ax in range(len(shape)) if ax not in (axis1, axis2)]
    kept = [shape[ax] for ax in rest]
    flat = _reshape(_transpose(x, (*rest, axis1, axis2)), (*kept, n1 * n2))
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = (offset if offset >= 0 else -offset * n2) if length else 0
    limit = start + (length - 1) * (n2 + 1) + 1 if length else 0
    return S.slice_(flat, start=(0,) * len(kept) + (start,), limit=(*kept, limit),
                    stride=(1,) * len(kept) + (n2 + 1,))


def _diagonal_axes(shape: tuple, axis1: int, axis2: int) -> tuple[int, int]:
    if len(shape) < 2:
        raise ShapeError(f"diag requires an array of at least two dimensions, got shape {shape}")
    a1, a2 = normalize_axis(axis1, len(shape)), normalize_axis(axis2, len(shape))
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    return a1, a2


@register(np.diagonal)
def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Atom:
    a = strong(a)
    return _diagonal(a, operator.index(offset), *_diagonal_axes(shape_of(a), axis1, axis2))


@method("diagonal")
def diagonal_method(self: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Atom:
    return diagonal(self, offset, axis1, axis2)


@register(np.linalg.diagonal)
def linalg_diagonal(x: Any, /, *, offset: int = 0) -> Atom:
    return diagonal(x, offset, -2, -1)


@register(np.trace)
def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: Any = None) -> Atom:
    _no_out(out)
    d = diagonal(a, offset, axis1, axis2)
    acc = _sum_dtype(typeof(d).dtype) if dtype is None else to_dtype(dtype)
    return _total(convert(d, acc), (len(shape_of(d)) - 1,))


@method("trace")
def trace_method(self: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
                 out: Any = None) -> Atom:
    return trace(self, offset, axis1, axis2, dtype, out)


@register(np.linalg.trace)
def linalg_trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Atom:
    return trace(x, offset, -2, -1, dtype)


def _diag_matrix(v: Atom, k: int) -> Atom:
    """A square matrix with ``v`` on diagonal ``k``: ``v`` spread out by interior padding
    of one row plus one, shifted to the diagonal's first element, reshaped."""
    (n,) = shape_of(v)
    size = n + abs(k)
    first = k if k >= 0 else -k * size
    body = n + max(n - 1, 0) * size
    flat = S.pad(v, _const(0, typeof(v).dtype), lo=(first,), hi=(size * size - first - body,),
                 interior=(size,))
    return _reshape(flat, (size, size))


@register(np.diag)
def diag(v: Any, k: int = 0) -> Atom:
    v = strong(v)
    k = operator.index(k)
    nd = len(shape_of(v))
    if nd == 1:
        return _diag_matrix(v, k)
    if nd == 2:
        return _diagonal(v, k, 0, 1)
    raise ShapeError(f"Input must be 1- or 2-d, got shape {shape_of(v)}")


def _triangle(m: Any, k: Any, cmp) -> Atom:
    m = strong(m)
    shape = shape_of(m)
    if not shape:
        raise TypeError("tri() missing 1 required positional argument: 'N'")
    grid = shape[-2:] if len(shape) > 1 else (shape[0], shape[0])
    mask = _offset_mask(grid, k, cmp)
    full = broadcast_shapes(shape, grid)
    return E.select(broadcast_to(mask, full), broadcast_to(m, full), _const(0, typeof(m).dtype))


@register(np.triu)
def triu(m: Any, k: Any = 0) -> Atom:
    return _triangle(m, k, E.ge)


@register(np.tril)
def tril(m: Any, k: Any = 0) -> Atom:
    return _triangle(m, k, E.le)


@register(np.linalg.matrix_transpose, np.matrix_transpose)
def matrix_transpose(x: Any, /) -> Atom:
    x = strong(x)
    if len(shape_of(x)) < 2:
        raise ShapeError(f"Input array must be at least 2-dimensional, got shape {shape_of(x)}")
    return _swap_last(x)


# -- norms ----------------------------------------------------------------------------


def _sqrt_sum_squares(x: Atom, axes: Sequence[int]) -> Atom:
    return E.norm_root(_total(E.mul(x, x), axes))  # derivative 0 at 0, as abs


def _vector_norm(x: Atom, ord: Any, axis: int) -> Atom:
    dt = typeof(x).dtype
    if ord is None or ord == 2:
        return _sqrt_sum_squares(x, (axis,))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord == np.inf:
        return _max_from_zero(E.abs_(x), (axis,))
    if ord == -np.inf:
        return R.reduce_min(E.abs_(x), axes=(axis,))
    if ord == 0:
        return _total(convert(E.ne(x, _const(0, dt)), dt), (axis,))
    if ord == 1:
        return _total(E.abs_(x), (axis,))
    powered = _total(E.pow_(E.abs_(x), _const(ord, dt)), (axis,))
    return E.norm_root(powered, Lit(np.reciprocal(np.asarray(ord, dt.np))))


def _singular_values(a: Atom) -> Atom:
    """The singular values of each matrix of ``a`` (its last two axes), descending."""
    (s,) = Sp.svd(a, full_matrices=False, compute_uv=False)
    return s


def _singular_value_norm(x: Atom, ord: Any, rows: int, cols: int) -> Atom:
    """ord=2: the largest singular value; -2: the smallest; 'nuc': their sum."""
    nd = len(shape_of(x))
    s = _singular_values(_transpose(x, [*(i for i in range(nd) if i not in (rows, cols)),
                                        rows, cols]))
    last = (nd - 2,)
    if ord == "nuc":
        return R.reduce_sum(s, axes=last)
    return (R.reduce_max if ord == 2 else R.reduce_min)(s, axes=last)


def _matrix_norm(x: Atom, ord: Any, rows: int, cols: int) -> Atom:
    if ord in (2, -2, "nuc"):
        return _singular_value_norm(x, ord, rows, cols)
    if ord is None or ord in ("fro", "f"):
        return _sqrt_sum_squares(x, (rows, cols))
    if ord not in (1, -1, np.inf, -np.inf):
        raise ValueError("Invalid norm order for matrices.")
    summed, other = (rows, cols) if ord in (1, -1) else (cols, rows)
    sums = _total(E.abs_(x), (summed,))
    axes = (other - (other > summed),)
    return _max_from_zero(sums, axes) if ord > 0 else R.reduce_min(sums, axes=axes)


def _norm_axes(axis: Any, nd: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, tuple):
        axes = tuple(normalize_axis(ax, nd) for ax in axis)
    else:
        try:
            axes = (normalize_axis(operator.index(axis), nd),)
        except TypeError:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from None
    if len(axes) == 2 and axes[0] == axes[1]:
        raise ValueError("Duplicate axes given.")
    return axes


def _keep_dims(r: Atom, shape: tuple, axes: tuple[int, ...]) -> Atom:
    return _reshape(r, [1 if i in axes else n for i, n in enumerate(shape)])


@register(np.linalg.norm)
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Atom:
    if is_dynamic(ord):
        raise ConcretizationError("np.linalg.norm: ord must be known at compile time")
    x = strong(x)
    if not typeof(x).dtype.is_float:
        x = convert(x, float64)
    shape = shape_of(x)
    nd = len(shape)
    whole = axis is None and (
        ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1))
    axes = _norm_axes(axis, nd)
    if whole:
        r = _sqrt_sum_squares(x, axes)
    elif len(axes) == 1:
        r = _vector_norm(x, ord, axes[0])
    elif len(axes) == 2:
        r = _matrix_norm(x, ord, *axes)
    else:
        raise ValueError("Improper number of dimensions to norm.")
    return _keep_dims(r, shape, axes) if keepdims else r


@register(np.linalg.vector_norm)
def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Atom:
    x = strong(x)
    shape = shape_of(x)
    axes = _norm_axes(axis, len(shape))
    flat = _transpose(x, [*[i for i in range(len(shape)) if i not in axes], *axes])
    kept = [shape[i] for i in range(len(shape)) if i not in axes]
    flat = _reshape(flat, (*kept, int(np.prod([shape[i] for i in axes], dtype=np.int64))))
    r = norm(flat, ord, -1)
    return _keep_dims(r, shape, axes) if keepdims else r


@register(np.linalg.matrix_norm)
def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Atom:
    return norm(x, ord, (-2, -1), keepdims)


# -- factorizations and solvers -------------------------------------------------------


def _linalg_dtype(*xs: Atom) -> DType:
    """``np.linalg``'s working dtype: float32 only when every operand is float32."""
    return float32 if all(typeof(x).dtype == float32 for x in xs) else float64


def _square(a: Any) -> Atom:
    """``a`` as a stack of square float matrices; LinAlgError as NumPy otherwise."""
    a = strong(a)
    shape = shape_of(a)
    if len(shape) < 2:
        raise _LinAlgError(f"{len(shape)}-dimensional array given. Array must be at least "
                           f"two-dimensional")
    if shape[-1] != shape[-2]:
        raise _LinAlgError("Last 2 dimensions of the array must be square")
    return convert(a, _linalg_dtype(a))


def _pivot_signs(pivots: Atom, dt: DType) -> Atom:
    """-1 where LU swapped a row, else 1: their product is the permutation's sign."""
    shape = shape_of(pivots)
    swapped = E.ne(pivots, _iota(shape, len(shape) - 1, int32))
    return E.select(swapped, _const(-1, dt), _const(1, dt))


def _lu_diagonal(a: Atom) -> tuple[Atom, Atom]:
    """U's diagonal of ``a``'s LU factorization and the sign of the row permutation."""
    lu, pivots, _ = L.lu(a)
    nd = len(shape_of(a))
    return _diagonal(lu, 0, nd - 2, nd - 1), _pivot_signs(pivots, typeof(a).dtype)


@register(np.linalg.det)
def det(a: Any) -> Atom:
    diag_u, signs = _lu_diagonal(_square(a))
    return R.reduce_prod(E.mul(diag_u, signs), axes=(len(shape_of(diag_u)) - 1,))


@register(np.linalg.slogdet)
def slogdet(a: Any) -> Any:
    diag_u, signs = _lu_diagonal(_square(a))
    last = (len(shape_of(diag_u)) - 1,)
    sign = R.reduce_prod(E.mul(E.sign(diag_u), signs), axes=last)
    return _SlogdetResult(sign, R.reduce_sum(E.log(E.abs_(diag_u)), axes=last))


def _eye_rows(perm: Atom, dt: DType) -> Atom:
    """The identity's rows in ``perm`` order (the permutation matrix P with PA = LU)."""
    shape = (*shape_of(perm), shape_of(perm)[-1])
    nd = len(shape)
    cols = _iota(shape, nd - 1, int32)
    picked = E.eq(S.broadcast_in_dim(perm, shape=shape, dims=tuple(range(nd - 1))), cols)
    return convert(picked, dt)


def _check_nonsingular(diag_u: Atom) -> None:
    """LAPACK's gesv raises when U has an exactly zero pivot; so does this, at run time."""
    t = typeof(diag_u)
    if t.size == 0:
        return
    singular = R.reduce_max(E.eq(diag_u, _const(0, t.dtype)), axes=tuple(range(t.ndim)))
    K.check(E.not_(singular), exc="LinAlgError", fmt="Singular matrix")


def _lu_solve(a: Atom, b: Atom, checked: bool = True) -> Atom:
    """Solve ``a x = b`` for [..., n, n] ``a`` and [..., n, k] ``b`` of one batch shape;
    LinAlgError for a singular ``a`` where ``checked``, else infinities and NaNs."""
    lu, _, perm = L.lu(a)
    nd = len(shape_of(a))
    if checked:
        _check_nonsingular(_diagonal(lu, 0, nd - 2, nd - 1))
    pb = _matmul(_eye_rows(perm, typeof(a).dtype), b)
    y = L.triangular_solve(lu, pb, left_side=True, lower=True, transpose_a=False,
                           unit_diagonal=True)
    return L.triangular_solve(lu, y, left_side=True, lower=False, transpose_a=False,
                              unit_diagonal=False)


@register(np.linalg.inv)
def inv(a: Any) -> Atom:
    a = _square(a)
    shape = shape_of(a)
    eye = _offset_mask(shape[-2:], 0, E.eq)
    return _lu_solve(a, broadcast_to(convert(eye, typeof(a).dtype), shape))


@register(np.linalg.solve)
def solve(a: Any, b: Any) -> Atom:
    a, b = _square(a), strong(b)
    dt = _linalg_dtype(a, b)
    a, b = convert(a, dt), convert(b, dt)
    sa, sb = shape_of(a), shape_of(b)
    vector = len(sb) == 1
    core = sb + (1,) if vector else sb[-2:]
    if len(sb) == 0 or core[0] != sa[-1]:
        raise ShapeError(f"solve: Input operand 1 has a mismatch in its core dimension 0 "
                         f"(a has shape {sa}, b has shape {sb})")
    batch = broadcast_shapes(sa[:-2], () if vector else sb[:-2])
    x = _lu_solve(broadcast_to(a, batch + sa[-2:]),
                  broadcast_to(_reshape(b, core) if vector else b, batch + core))
    return _reshape(x, batch + sb) if vector else x


@register(np.linalg.cholesky)
def cholesky(a: Any, /, *, upper: bool = False) -> Atom:
    low = L.cholesky(_square(a))
    return _swap_last(low) if upper else low


def _power_by_squaring(a: Atom, n: int) -> Atom:
    """NumPy's order of products, so rounding matches ``np.linalg.matrix_power``."""
    if n <= 3:
        out = a
        for _ in range(n - 1):
            out = _matmul(out, a)
        return out
    z = result = None
    while n > 0:
        z = a if z is None else _matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _matmul(result, z)
    return result


@register(np.linalg.matrix_power)
def matrix_power(a: Any, n: int) -> Atom:
    a = strong(a)
    shape = shape_of(a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("exponent must be an integer") from None
    if len(shape) < 2:
        raise _LinAlgError(f"{len(shape)}-dimensional array given. Array must be at least "
                           f"two-dimensional")
    if shape[-1] != shape[-2]:
        raise _LinAlgError("Last 2 dimensions of the array must be square")
    if n == 0:
        eye = convert(_offset_mask(shape[-2:], 0, E.eq), typeof(a).dtype)
        return broadcast_to(eye, shape)
    if n < 0:
        a, n = inv(a), -n
    return _power_by_squaring(a, n)


# -- 1-d convolution and cross products -----------------------------------------------

_MODES = ("valid", "same", "full")


def _correlate_window(n: int, m: int, mode: str) -> tuple[int, int]:
    """(first index, length) of NumPy's ``mode`` result within the full correlation."""
    if mode not in _MODES:
        raise ValueError("Use one of 'valid', 'same', or 'full' for convolve/correlate mode")
    if mode == "full":
        return 0, n + m - 1
    if mode == "valid":
        return min(n, m) - 1, max(n, m) - min(n, m) + 1
    return ((m - 1) // 2 if n >= m else n // 2), max(n, m)


def _correlate(a: Atom, v: Atom, mode: str) -> Atom:
    """The full correlation ``c[k] = sum_j a[j + k - (m - 1)] v[j]`` cut to ``mode``: a
    conv whose padding starts and ends at the wanted window (negative pads crop)."""
    (n,), (m,) = shape_of(a), shape_of(v)
    first, length = _correlate_window(n, m, mode)
    lo = m - 1 - first
    hi = length + first - n
    out = C.conv(_reshape(a, (1, 1, n)), _reshape(v, (1, 1, m)), strides=(1,),
                 padding=((lo, hi),), lhs_dilation=(1,), rhs_dilation=(1,))
    return _reshape(out, (length,))


def _vectors(a: Any, v: Any, names: tuple[str, str], promote_0d: bool) -> list[Atom]:
    """Two non-empty 1-d operands of one dtype (0-d ones become 1-d if ``promote_0d``)."""
    out, _ = _arrays(a, v)
    for i, name in enumerate(names):
        shape = shape_of(out[i])
        if not shape and promote_0d:
            out[i], shape = _reshape(out[i], (1,)), (1,)
        if len(shape) != 1:
            depth = "too deep" if shape else "of too small depth"
            raise ShapeError(f"object {depth} for desired array ({name} has shape {shape})")
        if shape[0] == 0:
            raise ValueError(f"{name} cannot be empty")
    return out


@register(np.correlate)
def correlate(a: Any, v: Any, mode: str = "valid") -> Atom:
    a, v = _vectors(a, v, ("first array argument", "second array argument"), False)
    return _correlate(a, v, mode)


@register(np.convolve)
def convolve(a: Any, v: Any, mode: str = "full") -> Atom:
    a, v = _vectors(a, v, ("a", "v"), True)
    if shape_of(v)[0] > shape_of(a)[0]:
        a, v = v, a
    return _correlate(a, S.rev(v, dims=(0,)), mode)


def _component(x: Atom, i: int) -> Atom:
    shape = shape_of(x)
    nd = len(shape)
    part = S.slice_(x, start=(0,) * (nd - 1) + (i,), limit=shape[:-1] + (i + 1,),
                    stride=(1,) * nd)
    return _reshape(part, shape[:-1])


def _cross3(a: Atom, b: Atom) -> Atom:
    a0, a1, a2 = (_component(a, i) for i in range(3))
    b0, b1, b2 = (_component(b, i) for i in range(3))

    def minor(p, q, r, s):
        return E.sub(_times(p, q), _times(r, s))

    parts = [minor(a1, b2, a2, b1), minor(a2, b0, a0, b2), minor(a0, b1, a1, b0)]
    shape = shape_of(parts[0])
    return S.concatenate(*(_reshape(p, (*shape, 1)) for p in parts), axis=len(shape))


@functools.cache
def _numpy_refuses_2_vectors() -> str:
    """NumPy's message where the installed NumPy raises ValueError for 2-vectors (as
    2.5 does; 2.0-2.4 only warn), else ``""``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            np.cross(np.zeros(2), np.zeros(3))
        except ValueError as e:
            return str(e)
    return ""


@register(np.cross)
def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: Any = None) -> Atom:
    if axis is not None:
        axisa = axisb = axisc = axis
    (a, b), dt = _arrays(a, b)
    if not shape_of(a) or not shape_of(b):
        raise ShapeError("At least one array has zero dimension")
    vecs = []
    for x, ax in ((a, axisa), (b, axisb)):
        nd = len(shape_of(x))
        vecs.append(_transpose(x, _move_to_end(normalize_axis(ax, nd), nd)))
    dims = {shape_of(v)[-1] for v in vecs}
    if not dims <= {2, 3}:
        raise ShapeError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if dims != {3}:
        refusal = _numpy_refuses_2_vectors()
        if refusal:
            raise ShapeError(refusal)
        raise UnsupportedError("cross products of 2-vectors are deprecated in NumPy 2",
                               hint="append a zero component to make 3-vectors")
    if dt.is_bool:
        raise TypeError("numpy boolean subtract, the `-` operator, is not supported")
    c = _cross3(*vecs)
    nd = len(shape_of(c))
    return _transpose(c, _move_from_end(normalize_axis(axisc, nd), nd))


@register(np.linalg.cross)
def linalg_cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Atom:
    return cross(x1, x2, axis=axis)


def _move_to_end(ax: int, nd: int) -> list[int]:
    return [i for i in range(nd) if i != ax] + [ax]


def _move_from_end(ax: int, nd: int) -> list[int]:
    perm = list(range(nd - 1))
    perm.insert(ax, nd - 1)
    return perm


@register(np.vander)
def vander(x: Any, N: Any = None, increasing: bool = False) -> Atom:
    """Columns 1, x, x*x, ... as running products (NumPy's ``multiply.accumulate``)."""
    x = strong(x)
    if len(shape_of(x)) != 1:
        raise ShapeError(f"x must be a one-dimensional array or sequence (got shape "
                         f"{shape_of(x)})")
    (n,) = shape_of(x)
    cols = n if N is None else operator.index(N)
    if cols < 0:
        raise ValueError("negative dimensions are not allowed")
    dt = promote_types(typeof(x).dtype, int64)
    if cols == 0:
        return _zeros((n, 0), dt)
    parts = [broadcast_to(_const(1, dt), (n, 1))]
    if cols > 1:
        repeated = S.broadcast_in_dim(convert(x, dt), shape=(n, cols - 1), dims=(0,))
        parts.append(R.cumprod(repeated, axis=1, reverse=False))
    out = S.concatenate(*parts, axis=1)
    return out if increasing else S.rev(out, dims=(1,))
