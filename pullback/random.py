"""Random numbers from explicit keys, as in JAX: ``pb.random`` (docs/random.md).

A key is a 0-d int64 array. Every function here is a pure function of its key: the same
key gives the same numbers, eagerly (these are plain NumPy functions, usable anywhere)
and compiled (pullback stages their source like a user's, on both backends, bit for bit
the same). Nothing is hidden or advanced, so a compiled function draws fresh numbers
only when it is given a fresh key: pass a key as an argument and split it per use.

Everything is built on one primitive, ``bits`` (the counter-based ``random_bits`` op:
SplitMix64 of the key and each element's position), and ordinary NumPy operations.
Samples carry no derivative with respect to their key, so ``mu + sigma * normal(key)``
differentiates in ``mu`` and ``sigma`` (the reparameterisation trick).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .ir.builder import as_atom
from .ir.types import int64
from .numpy_api.core import convert, register
from .numpy_api.manip import static_ints
from .ops import random as R

__all__ = ["bernoulli", "bits", "choice", "fold_in", "key", "normal", "permutation",
           "randint", "split", "uniform"]

# Domain tags, so that the keys ``split`` and ``fold_in`` derive are not the bits the
# parent key's own samples use (a key's bits and its children's keys never coincide).
_SPLIT_TAG = 0x3C6EF372FE94F82B
_FOLD_TAG = 0x1F83D9ABFB41BD6B

_LOW53 = (1 << 53) - 1
_LOW24 = (1 << 24) - 1
_LOW63 = (1 << 63) - 1


def _shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as NumPy takes it: an int or a sequence of ints, known at compile time
    (compiled code maps this function onto itself, which refuses run-time values)."""
    return static_ints(shape, "the shape of a random draw")


register(_shape)(_shape)


def key(seed: Any) -> np.ndarray:
    """A key made from an integer seed (a Python int or a 0-d integer array)."""
    seed = np.asarray(seed)
    if seed.shape != () or not np.issubdtype(seed.dtype, np.integer):
        raise TypeError(f"a random key is made from an integer, not {seed.dtype} of shape "
                        f"{seed.shape}")
    return seed.astype(np.int64)


def bits(key: Any, shape: Any = ()) -> np.ndarray:
    """Uniformly random 64-bit patterns, as int64, of the given shape."""
    k = np.asarray(key)
    if k.shape != () or k.dtype != np.int64:
        raise TypeError(f"a random key is a 0-d int64 array (pb.random.key(seed)), not "
                        f"{k.dtype} of shape {k.shape}")
    return R.random_bits.impl(k, _shape(shape))


@register(bits)
def _staged_bits(key: Any, shape: Any = ()) -> Any:
    """``bits`` in compiled code: the ``random_bits`` primitive."""
    t = as_atom(key).type
    if t.shape != () or t.dtype != int64:
        raise TypeError(f"a random key is a 0-d int64 array (pb.random.key(seed)), not "
                        f"{t.dtype.name} of shape {t.shape}")
    return R.random_bits(convert(key, int64), shape=_shape(shape))


def split(key: Any, num: int = 2) -> np.ndarray:
    """``num`` new keys, as an int64 array of shape ``(num,)``; ``key, sub = split(key)``.
    Use the new keys, not ``key`` again."""
    return bits(key ^ _SPLIT_TAG, (num,))


def fold_in(key: Any, data: Any) -> np.ndarray:
    """A new key from ``key`` and an integer (a step or an index); different data give
    different keys."""
    return bits(bits(key ^ _FOLD_TAG) ^ np.asarray(data, np.int64))


def _unit(raw: Any, dtype: np.dtype) -> Any:
    """Floats uniform on [0, 1) from random bits: the top 53 bits (24 for float32), each
    value a multiple of 2**-53 (2**-24), so 1 is never reached."""
    if dtype == np.float32:
        return ((raw // (1 << 40)) & _LOW24).astype(np.float32) * np.float32(2.0 ** -24)
    return ((raw // (1 << 11)) & _LOW53).astype(np.float64) * (2.0 ** -53)


def _float_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"pb.random draws float32 or float64, not {dt}")
    return dt


def uniform(key: Any, shape: Any = (), dtype: Any = np.float64, minval: Any = 0.0,
            maxval: Any = 1.0) -> np.ndarray:
    """Floats uniform on [minval, maxval) (rounding may reach maxval, as in NumPy)."""
    dt = _float_dtype(dtype)
    unit = _unit(bits(key, shape), dt)
    return (minval + (maxval - minval) * unit).astype(dt)


def normal(key: Any, shape: Any = (), dtype: Any = np.float64) -> np.ndarray:
    """Standard normal samples (Box-Muller in float64: finite everywhere, |z| < 8.6)."""
    dt = _float_dtype(dtype)
    pair = bits(key, (2, *_shape(shape)))
    radius = np.sqrt(-2.0 * np.log(1.0 - _unit(pair[0], np.dtype(np.float64))))
    return (radius * np.cos(2.0 * np.pi * _unit(pair[1], np.dtype(np.float64)))).astype(dt)


def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = np.int64
            ) -> np.ndarray:
    """Integers uniform on [minval, maxval) (bounds broadcast against ``shape``). The bias
    of reducing 63 random bits modulo the range is below range / 2**63."""
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.integer):
        raise ValueError(f"randint draws integers, not {dt}")
    low = np.asarray(minval, np.int64)
    high = np.asarray(maxval, np.int64)
    if np.any(high <= low):
        raise ValueError("randint: maxval must be greater than minval")
    return (low + (bits(key, shape) & _LOW63) % (high - low)).astype(dt)


def bernoulli(key: Any, p: Any = 0.5, shape: Any = None) -> np.ndarray:
    """Booleans that are True with probability ``p`` (shape: ``p``'s by default)."""
    return uniform(key, np.shape(p) if shape is None else shape) < p


def permutation(key: Any, x: Any) -> np.ndarray:
    """A random permutation of ``range(x)`` for an integer ``x``, else of ``x``'s rows."""
    if isinstance(x, (int, np.integer)):
        return np.argsort(bits(key, x))
    x = np.asarray(x)
    return x[np.argsort(bits(key, len(x)))]


def choice(key: Any, a: Any, shape: Any = (), replace: bool = True, p: Any = None
           ) -> np.ndarray:
    """Items of ``a`` (or of ``range(a)`` for an integer) drawn with probabilities ``p``
    (uniform by default), with or without replacement."""
    items = np.arange(a) if isinstance(a, (int, np.integer)) else np.asarray(a)
    n = len(items)
    if replace and p is None:
        return items[randint(key, shape, 0, n)]
    if replace:
        cdf = np.cumsum(_weights(p, n))
        picks = np.searchsorted(cdf, uniform(key, shape) * cdf[-1], side="right")
        return items[np.minimum(picks, n - 1)]
    size = math.prod(_shape(shape))
    if size > n:
        raise ValueError("choice: cannot take a larger sample than the population when "
                         "replace=False")
    if p is None:
        order = np.argsort(bits(key, n))
    else:  # an exponential race: item i arrives at wait_i / p_i, the first `size` win
        weight = _weights(p, n)
        if np.count_nonzero(weight) < size:
            raise ValueError("choice: fewer non-zero entries in p than the sample's size")
        wait = -np.log(1.0 - uniform(key, n))
        given = weight > 0
        order = np.argsort(np.where(given, wait / np.where(given, weight, 1.0), np.inf))
    return items[order[:size].reshape(_shape(shape))]


def _weights(p: Any, n: int) -> Any:
    """``choice``'s probabilities, checked as NumPy checks them; None: all equal."""
    if p is None:
        return np.full(n, 1.0 / n)
    weight = np.asarray(p, np.float64)
    if weight.shape != (n,):
        raise ValueError("choice: p must be 1-dimensional, one probability per item")
    if np.any(weight < 0) | (np.abs(np.sum(weight) - 1.0) > 1e-8):
        raise ValueError("choice: probabilities must be non-negative and sum to 1")
    return weight
