"""Convolution and pooling layers over NCHW (or NCL) arrays, in torch's weight layout."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .. import random
from ..tree import field
from . import functional, init

__all__ = ["AvgPool2d", "Conv1d", "Conv2d", "MaxPool2d"]


@dataclasses.dataclass
class _Conv:
    """weight [out, in / groups, *window], bias [out] or None; the rest is configuration."""

    spatial: ClassVar[int]

    weight: Any
    bias: Any = None
    stride: int | tuple = field(static=True, default=1)
    padding: int | str | tuple = field(static=True, default=0)
    dilation: int | tuple = field(static=True, default=1)
    groups: int = field(static=True, default=1)

    @classmethod
    def init(cls, key: Any, in_channels: int, out_channels: int, kernel_size: int | tuple, *,
             stride: int | tuple = 1, padding: int | str | tuple = 0,
             dilation: int | tuple = 1, groups: int = 1, bias: bool = True,
             dtype: Any = np.float32) -> Any:
        """torch's default: weight and bias uniform on +-1/sqrt(fan_in), fan_in = the
        inputs one output sees (in_channels / groups times the window)."""
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{in_channels} in and {out_channels} out channels do not "
                             f"split into {groups} groups")
        window = functional.per_dim(kernel_size, cls.spatial, "kernel_size")
        shape = (out_channels, in_channels // groups, *window)
        bound = 1.0 / math.sqrt(init.fans(shape)[0])
        wkey, bkey = random.split(key)
        weight = init.uniform(wkey, shape, bound, dtype)
        b = init.uniform(bkey, (out_channels,), bound, dtype) if bias else None
        return cls(weight, b, stride, padding, dilation, groups)

    def __call__(self, x: Any) -> Any:
        y = functional.conv(x, self.weight, self.stride, self.padding, self.dilation,
                            self.groups)
        if self.bias is None:
            return y
        return y + self.bias.reshape((-1,) + (1,) * self.spatial)


@dataclasses.dataclass
class Conv1d(_Conv):
    """Convolution over [N, C, L]."""

    spatial: ClassVar[int] = 1


@dataclasses.dataclass
class Conv2d(_Conv):
    """Convolution over [N, C, H, W]."""

    spatial: ClassVar[int] = 2


@dataclasses.dataclass
class _Pool2d:
    """A pooling window over H and W; ``stride`` defaults to the window."""

    pool: ClassVar[Callable[..., Any]]

    kernel_size: int | tuple = field(static=True)
    stride: int | tuple | None = field(static=True, default=None)
    padding: int | tuple = field(static=True, default=0)

    def __call__(self, x: Any) -> Any:
        window = functional.per_dim(self.kernel_size, 2, "kernel_size")
        return self.pool(x, window, self.stride, self.padding)


@dataclasses.dataclass
class MaxPool2d(_Pool2d):
    """Maximum over each window (padding is -inf)."""

    pool = staticmethod(functional.max_pool)


@dataclasses.dataclass
class AvgPool2d(_Pool2d):
    """Mean over each window, zero padding counted in (torch's count_include_pad)."""

    pool = staticmethod(functional.avg_pool)
