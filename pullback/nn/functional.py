"""Convolution and pooling on batch-first, channels-first arrays ([N, C, *spatial]).

``conv`` is the ``conv`` primitive (pullback/ops/conv.py) behind a plain NumPy function:
eagerly it runs the primitive's NumPy implementation, staged it emits the op, whose
derivatives are again convolutions.  Groups split the channels and concatenate the
groups' results.  Pools are compositions, so their derivatives need no rule of their
own: windows that tile the axes are one reduction of a reshape; others, per spatial
axis, the window's shifted strided slices combined by ``np.maximum`` or summed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..numpy_api.core import promote, register, strong
from ..ops import conv as C

__all__ = ["avg_pool", "conv", "max_pool"]

Padding = int | str | tuple


def per_dim(value: int | tuple, n: int, what: str) -> tuple[int, ...]:
    """An int for every spatial dim, or one per dim."""
    values = (value,) * n if isinstance(value, int) else tuple(value)
    if len(values) != n:
        raise ValueError(f"{what}: give an int or {n} of them, not {value!r}")
    return values


def _paddings(padding: Padding, window: tuple[int, ...], stride: tuple[int, ...],
              dilation: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """(lo, hi) per spatial dim from an int, a tuple of ints or of pairs, "valid" (none)
    or "same" (stride 1 only; an odd total puts the extra element last, as torch does)."""
    n = len(window)
    if padding == "valid":
        return ((0, 0),) * n
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError("padding='same' needs stride 1")
        totals = [d * (k - 1) for k, d in zip(window, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ValueError(f"padding is an int, a tuple, 'same' or 'valid', not {padding!r}")
    pads = per_dim(padding, n, "padding")
    return tuple((p, p) if isinstance(p, int) else (p[0], p[1]) for p in pads)


def _conv_group(x: Any, w: Any, strides: tuple[int, ...], padding: tuple[tuple[int, int], ...],
                 dilation: tuple[int, ...]) -> np.ndarray:
    """Cross-correlation of [N, C, *spatial] with [O, C, *window] (one group), operands
    promoted to one dtype: the ``conv`` primitive's NumPy implementation."""
    x, w = np.asarray(x), np.asarray(w)
    dt = np.result_type(x, w)
    return C.conv.impl(x.astype(dt), w.astype(dt), strides, padding, (1,) * len(strides),
                       dilation)


@register(_conv_group)
def _staged_conv_group(x: Any, w: Any, strides: tuple[int, ...],
                         padding: tuple[tuple[int, int], ...],
                         dilation: tuple[int, ...]) -> Any:
    """``_conv_group`` in compiled code: the ``conv`` primitive."""
    (x, w), _ = promote(x, w)
    return C.conv(strong(x), strong(w), strides=strides, padding=padding,
                  lhs_dilation=(1,) * len(strides), rhs_dilation=dilation)


def conv(x: Any, w: Any, stride: int | tuple = 1, padding: Padding = 0,
         dilation: int | tuple = 1, groups: int = 1) -> Any:
    """N-d convolution (cross-correlation, as torch's ``conv2d``): ``x`` [N, C, *spatial],
    ``w`` [O, C / groups, *window]; stride, padding and dilation an int or one per
    spatial dim; padding also (lo, hi) pairs, "same" or "valid"."""
    n = np.ndim(w) - 2
    if n < 1 or np.ndim(x) != n + 2:
        raise ValueError(f"conv: x [N, C, *spatial] and w [O, C/groups, *window] of one rank, "
                         f"not {np.shape(x)} and {np.shape(w)}")
    channels, features = np.shape(x)[1], np.shape(w)[0]
    if channels % groups or features % groups or np.shape(w)[1] * groups != channels:
        raise ValueError(f"conv: {channels} input channels and {features} filters of "
                         f"{np.shape(w)[1]} channels do not make {groups} groups")
    strides = per_dim(stride, n, "stride")
    dilations = per_dim(dilation, n, "dilation")
    pads = _paddings(padding, np.shape(w)[2:], strides, dilations)
    if groups == 1:
        return _conv_group(x, w, strides, pads, dilations)
    cin, cout = channels // groups, features // groups
    parts = []
    for g in range(groups):
        parts.append(_conv_group(x[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout],
                                  strides, pads, dilations))
    return np.concatenate(parts, axis=1)


def _window(x: Any, window: int | tuple) -> tuple[int, ...]:
    """The window per pooled axis: a tuple's length says how many trailing axes; an int
    pools every axis after N and C."""
    return tuple(window) if isinstance(window, tuple) else (window,) * (np.ndim(x) - 2)


def _pool(x: Any, window: int | tuple, stride: int | tuple | None, padding: int | tuple,
          fill: float, combine: Callable[[Any, Any], Any]) -> Any:
    """Combine each window's elements, one trailing spatial axis at a time (max and sum
    are separable): the window's k shifted, strided slices of the padded axis."""
    window = _window(x, window)
    n = len(window)
    strides = window if stride is None else per_dim(stride, n, "stride")
    pads = per_dim(padding, n, "padding")
    if strides == window and not any(pads):
        return _tiled_pool(x, window, combine)
    for d in range(n):
        axis = np.ndim(x) - n + d
        k, s, p = window[d], strides[d], pads[d]
        if p:
            widths = [(0, 0)] * np.ndim(x)
            widths[axis] = (p, p)
            x = np.pad(x, widths, constant_values=fill)
        count = (np.shape(x)[axis] - k) // s + 1
        if count < 1:
            raise ValueError(f"pool: window {k} larger than the padded axis "
                             f"{np.shape(x)[axis]}")
        span = s * (count - 1) + 1
        lead = (slice(None),) * axis
        out = x[lead + (slice(0, span, s),)]
        for i in range(1, k):
            out = combine(out, x[lead + (slice(i, i + span, s),)])
        x = out
    return x


def _tiled_pool(x: Any, window: tuple[int, ...], combine: Callable[[Any, Any], Any]) -> Any:
    """Windows that tile the axes (stride = window, no padding): each axis split in two,
    the window's elements reduced at once (one pass instead of a slice per element)."""
    lead = np.ndim(x) - len(window)
    shape, split, crop = list(np.shape(x)[:lead]), [], [slice(None)] * lead
    for d, k in enumerate(window):
        count = np.shape(x)[lead + d] // k
        if count < 1:
            raise ValueError(f"pool: window {k} larger than the axis {np.shape(x)[lead + d]}")
        shape += [count, k]
        split.append(lead + 2 * d + 1)
        crop.append(slice(0, count * k))
    tiles = x[tuple(crop)].reshape(shape)
    reduce = np.max if combine is np.maximum else np.sum
    return reduce(tiles, axis=tuple(split))


def max_pool(x: Any, window: int | tuple, stride: int | tuple | None = None,
             padding: int | tuple = 0) -> Any:
    """Maximum over each window of the trailing spatial axes (all but N and C for an int
    window; a float input: padding is -inf).  ``stride`` defaults to the window."""
    return _pool(x, window, stride, padding, -np.inf, np.maximum)


def avg_pool(x: Any, window: int | tuple, stride: int | tuple | None = None,
             padding: int | tuple = 0) -> Any:
    """Mean over each window, the zero padding counted in (torch's count_include_pad)."""
    return _pool(x, window, stride, padding, 0, np.add) / math.prod(_window(x, window))
