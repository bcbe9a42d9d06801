"""Parameter initialisers: plain functions of a key, a shape and a dtype.

Every draw comes from ``pb.random``, so a model built from the same key is the same
model, eagerly or inside compiled code.  The scaled schemes take the fan-in (and fan-out)
explicitly, defaulting to ``fans(shape)``, because a layer knows its fans better than a
shape does (a grouped convolution, a fused gate matrix).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import random

__all__ = ["fans", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "normal",
           "ones", "uniform", "zeros"]


def zeros(shape: Any, dtype: Any = np.float32) -> np.ndarray:
    return np.zeros(shape, dtype)


def ones(shape: Any, dtype: Any = np.float32) -> np.ndarray:
    return np.ones(shape, dtype)


def uniform(key: Any, shape: Any, bound: float, dtype: Any = np.float32) -> np.ndarray:
    """Uniform on [-bound, bound)."""
    return random.uniform(key, shape, dtype, -bound, bound)


def normal(key: Any, shape: Any, std: float = 1.0, dtype: Any = np.float32) -> np.ndarray:
    """Normal with mean 0 and standard deviation ``std``."""
    return (std * random.normal(key, shape, np.float64)).astype(dtype)


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight: [in, out] for a dense layer (``x @ w``), [out, in,
    *window] for a convolution (each window position is one more input per output)."""
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"fans: a weight has at least 2 dims, not shape {shape}")
    if len(shape) == 2:
        return shape[0], shape[1]
    window = math.prod(shape[2:])
    return shape[1] * window, shape[0] * window


def _fans(shape: Any, fan_in: int | None, fan_out: int | None) -> tuple[int, int]:
    """The fans given, the shape's for those not given."""
    if fan_in is None or fan_out is None:
        shape_in, shape_out = fans(shape)
        fan_in = shape_in if fan_in is None else fan_in
        fan_out = shape_out if fan_out is None else fan_out
    return fan_in, fan_out


def he_normal(key: Any, shape: Any, fan_in: int | None = None,
              dtype: Any = np.float32) -> np.ndarray:
    """He (Kaiming) normal: std sqrt(2 / fan_in), for layers followed by a ReLU."""
    fan_in = fans(shape)[0] if fan_in is None else fan_in
    return normal(key, shape, math.sqrt(2.0 / fan_in), dtype)


def he_uniform(key: Any, shape: Any, fan_in: int | None = None,
               dtype: Any = np.float32) -> np.ndarray:
    """He (Kaiming) uniform: bound sqrt(6 / fan_in), the same variance as ``he_normal``."""
    fan_in = fans(shape)[0] if fan_in is None else fan_in
    return uniform(key, shape, math.sqrt(6.0 / fan_in), dtype)


def glorot_normal(key: Any, shape: Any, fan_in: int | None = None, fan_out: int | None = None,
                  dtype: Any = np.float32) -> np.ndarray:
    """Glorot (Xavier) normal: std sqrt(2 / (fan_in + fan_out))."""
    return normal(key, shape, math.sqrt(2.0 / sum(_fans(shape, fan_in, fan_out))), dtype)


def glorot_uniform(key: Any, shape: Any, fan_in: int | None = None, fan_out: int | None = None,
                   dtype: Any = np.float32) -> np.ndarray:
    """Glorot (Xavier) uniform: bound sqrt(6 / (fan_in + fan_out))."""
    return uniform(key, shape, math.sqrt(6.0 / sum(_fans(shape, fan_in, fan_out))), dtype)
