"""Activation functions: NumPy compositions written to stay finite where the textbook
formula overflows (no branch of a ``np.where`` computes an ``exp`` of a large positive
number, so gradients stay finite too), with the input's float dtype kept."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..numpy_api.core import convert, register, typeof
from ..ops import elementwise as E

__all__ = ["elu", "gelu", "leaky_relu", "log_softmax", "logsumexp", "relu", "sigmoid",
           "silu", "softmax", "softplus", "tanh"]


def relu(x: Any) -> Any:
    """max(x, 0), whose gradient at 0 is 0 (as torch's and JAX's; ``np.maximum`` splits a
    tie)."""
    return np.where(x > 0, x, 0)


def leaky_relu(x: Any, slope: float = 0.01) -> Any:
    return np.where(x >= 0, x, slope * x)


def elu(x: Any, alpha: float = 1.0) -> Any:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _erf(x: Any) -> Any:
    """The error function of a float array, elementwise (the ``erf`` primitive; NumPy has
    none, and SciPy is optional)."""
    x = np.asarray(x)
    return E.erf.impl(x)


@register(_erf)
def _staged_erf(x: Any) -> Any:
    dt = typeof(x).dtype
    if not dt.is_float:
        raise TypeError(f"erf takes a float array, not {dt.name}")
    return E.erf(convert(x, dt))


def gelu(x: Any, approximate: bool = True) -> Any:
    """x Phi(x); ``approximate`` uses the tanh form (GPT-2's, torch's approximate='tanh')."""
    if approximate:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + np.tanh(inner))
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


def sigmoid(x: Any) -> Any:
    """1 / (1 + exp(-x)) from exp(-|x|), which never overflows."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(x: Any) -> Any:
    return x * sigmoid(x)


def tanh(x: Any) -> Any:
    return np.tanh(x)


def softplus(x: Any) -> Any:
    """log(1 + exp(x)), without overflow."""
    return np.logaddexp(x, 0.0)


def logsumexp(x: Any, axis: Any = -1, keepdims: bool = False) -> Any:
    """log(sum(exp(x))) over ``axis``, shifted by the maximum (a slice of all -inf gives
    -inf, not NaN)."""
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(x: Any, axis: Any = -1) -> Any:
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x: Any, axis: Any = -1) -> Any:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
