"""N-d convolution (cross-correlation) with strides, padding and dilations.

``conv(lhs, rhs)`` has ``lax.conv_general_dilated``'s semantics in NCHW/OIHW layout:
``lhs`` is [N, C, *spatial], ``rhs`` is [O, C, *window], the result is
[N, O, *spatial'].  Per spatial dim, ``lhs`` is dilated (``lhs_dilation - 1`` zeros
between elements), padded by ``(lo, hi)`` (negative crops), and correlated with the
window dilated by ``rhs_dilation`` at every ``stride``-th position.  Like ``dot_general``
it sums products in the operands' dtype (booleans: or of ands).

Derivatives: ``conv`` is bilinear, and each operand's cotangent is again a ``conv``
(of the result's cotangent with the flipped kernel, or of the input with the result's
cotangent as the window), with strides and dilations trading places.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import ShapeError
from ..ir.core import Atom
from ..ir.op import Op
from ..ir.types import TensorType
from . import batching as B
from . import shape as S
from .linalg import bilinear_jvp


def dilated(size: int, dilation: int) -> int:
    """The extent of ``size`` elements spread ``dilation`` apart (the C backend's conv
    loops bound their reads by it too)."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def _out_size(padded: int, window: int, stride: int) -> int:
    return max(0, (padded - window) // stride + 1)


def _check_conv_params(shown, nsp, strides, padding, lhs_dilation, rhs_dilation) -> None:
    per_dim = (strides, padding, lhs_dilation, rhs_dilation)
    if any(len(p) != nsp for p in per_dim) or any(len(p) != 2 for p in padding):
        raise ShapeError(f"conv: give strides, (lo, hi) paddings and dilations for each of "
                         f"the {nsp} spatial dims ({shown})")
    if any(v < 1 for v in (*strides, *lhs_dilation, *rhs_dilation)):
        raise ShapeError(f"conv: strides and dilations must be >= 1 ({shown})")


def _conv_infer(ts, strides, padding, lhs_dilation, rhs_dilation):
    lhs, rhs = ts
    shown = f"lhs {lhs}, rhs {rhs}"
    if lhs.dtype != rhs.dtype:
        raise ShapeError(f"conv needs operands of one dtype, got {shown}")
    if lhs.ndim < 2 or rhs.ndim != lhs.ndim or lhs.shape[1] != rhs.shape[1]:
        raise ShapeError(f"conv needs lhs [N, C, *spatial] and rhs [O, C, *window] of one "
                         f"rank and channel count, got {shown}")
    nsp = lhs.ndim - 2
    _check_conv_params(shown, nsp, strides, padding, lhs_dilation, rhs_dilation)
    spatial = []
    for i in range(nsp):
        padded = sum(padding[i]) + dilated(lhs.shape[2 + i], lhs_dilation[i])
        if padded < 0:
            raise ShapeError(f"conv: padding {padding[i]} crops more than spatial dim {i} "
                             f"holds ({shown})")
        window = dilated(rhs.shape[2 + i], rhs_dilation[i])
        spatial.append(_out_size(padded, window, strides[i]))
    return TensorType((lhs.shape[0], rhs.shape[0], *spatial), lhs.dtype)


def _dilate(x: np.ndarray, dilation) -> np.ndarray:
    """``x`` with ``dilation - 1`` zeros between neighbours along each spatial dim."""
    shape = x.shape[:2] + tuple(dilated(n, d) for n, d in zip(x.shape[2:], dilation, strict=True))
    out = np.zeros(shape, x.dtype)
    out[(slice(None), slice(None), *(slice(None, None, d) for d in dilation))] = x
    return out


def _pad(x: np.ndarray, padding) -> np.ndarray:
    """Zero-pad the spatial dims by ``(lo, hi)``; negative amounts crop."""
    x = np.pad(x, [(0, 0), (0, 0), *((max(lo, 0), max(hi, 0)) for lo, hi in padding)])
    sizes = zip(x.shape[2:], padding, strict=True)
    crop = (slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in sizes)
    return x[(slice(None), slice(None), *crop)]


def _conv_impl(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation):
    x = _pad(_dilate(lhs, lhs_dilation), padding)
    w = _dilate(rhs, rhs_dilation)
    window = w.shape[2:]
    if any(n < k for n, k in zip(x.shape[2:], window, strict=True)):
        spatial = (_out_size(*dims) for dims in zip(x.shape[2:], window, strides, strict=True))
        return np.zeros((lhs.shape[0], rhs.shape[0], *spatial), lhs.dtype)
    nsp = len(window)
    views = sliding_window_view(x, window, axis=tuple(range(2, 2 + nsp)))
    views = views[(slice(None), slice(None), *(slice(None, None, s) for s in strides))]
    summed = ([1, *range(2 + nsp, 2 + 2 * nsp)], [1, *range(2, 2 + nsp)])
    return np.moveaxis(np.tensordot(views, w, axes=summed), -1, 1)


def _swap_leading(x: Atom) -> Atom:
    """``x`` with its first two axes swapped ([N, C, ...] <-> [C, N, ...])."""
    return S.transpose(x, perm=(1, 0, *range(2, x.type.ndim)))


def _transposed_paddings(lhs, rhs, ct, strides, padding, lhs_dilation, rhs_dilation):
    """Per spatial dim, the paddings of the convs that give the lhs and the rhs
    cotangents: sized so that they produce exactly the operand's extent (as in XLA)."""
    for_lhs, for_rhs = [], []
    for i, (lo, _) in enumerate(padding):
        extent = dilated(lhs.shape[2 + i], lhs_dilation[i])
        window = dilated(rhs.shape[2 + i], rhs_dilation[i])
        out = dilated(ct.shape[2 + i], strides[i])
        for_lhs.append((window - 1 - lo, extent + lo - out))
        for_rhs.append((lo, window - 1 + out - lo - extent))
    return tuple(for_lhs), tuple(for_rhs)


def _conv_vjp(primals, outs, cts, strides, padding, lhs_dilation, rhs_dilation):
    """lhs: the cotangent correlated with the flipped, in/out-swapped kernel, dilated by
    the strides and strided by the lhs dilation.  rhs: the input correlated with the
    cotangent as window over the batch, the strides becoming the window's dilation.  An
    empty operand or result means the result is identically zero."""
    lhs, rhs = primals
    (ct,) = cts
    if 0 in (lhs.type.size, rhs.type.size, ct.type.size):
        return [None, None]
    for_lhs, for_rhs = _transposed_paddings(lhs.type, rhs.type, ct.type, strides, padding,
                                            lhs_dilation, rhs_dilation)
    kernel = _swap_leading(S.rev(rhs, dims=tuple(range(2, rhs.type.ndim))))
    ct_lhs = conv(ct, kernel, strides=lhs_dilation, padding=for_lhs, lhs_dilation=strides,
                  rhs_dilation=rhs_dilation)
    ct_rhs = conv(_swap_leading(lhs), _swap_leading(ct), strides=rhs_dilation, padding=for_rhs,
                  lhs_dilation=lhs_dilation, rhs_dilation=strides)
    return [ct_lhs, _swap_leading(ct_rhs)]


def _conv_batch(args, dims, size, **params):
    """Lanes of the input alone are more images, lanes of the kernel alone more output
    features: one conv either way.  With both batched each lane is a conv of its own
    (folding them into one would need feature groups, which ``conv`` has not)."""
    (lhs, rhs), (dl, dr) = args, dims
    if dl is not None and dr is not None:
        return B.by_lanes("conv")(args, dims, size, **params)
    if dr is None:
        return [B.unfold_lanes(conv(B.fold_lanes(lhs, dl, size, 0), rhs, **params), size, 0)], [0]
    return [B.unfold_lanes(conv(lhs, B.fold_lanes(rhs, dr, size, 0), **params), size, 1)], [1]


conv = Op(
    "conv",
    infer=_conv_infer,
    arity=2,
    impl=_conv_impl,
    params={"strides": "ints", "padding": "pairs", "lhs_dilation": "ints",
            "rhs_dilation": "ints"},
    fusion="opaque",
    jvp=bilinear_jvp("conv"),
    vjp=_conv_vjp,
    batch=_conv_batch,
)
