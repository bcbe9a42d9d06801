"""Counter-based random bits: a pure function of a key and each element's position.

There is no hidden state, so the same key gives the same bits on every backend, any
element can be computed independently (in parallel, in any order), and the whole
generator is a dozen lines of C.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType, int64
from .batching import by_lanes

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _random_bits_infer(ts, shape):
    (key,) = ts
    if key.shape != () or key.dtype != int64:
        raise ShapeError(f"random_bits needs a 0-d int64 key, got {key}")
    if any(d < 0 for d in shape):
        raise ShapeError(f"random_bits: bad shape {shape}")
    return TensorType(tuple(shape), int64)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _random_bits_impl(key, shape):
    """Element ``i`` (C-order linear index) is output ``i`` of SplitMix64 seeded with
    ``key``; in C, with all arithmetic on ``uint64_t`` modulo 2**64::

        z = (uint64_t)key + (i + 1) * 0x9E3779B97F4A7C15;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
        bits[i] = (int64_t)(z ^ (z >> 31));
    """
    count = np.arange(1, int(np.prod(shape, dtype=np.int64)) + 1, dtype=np.uint64)
    z = np.asarray(key).view(np.uint64) + count * _GOLDEN
    return _splitmix64(z).view(np.int64).reshape(shape)


random_bits = Op(
    "random_bits",
    infer=_random_bits_infer,
    arity=1,
    impl=_random_bits_impl,
    params={"shape": "ints"},
    fusion="elementwise",
    # Each lane's bits from its own key.  The impl's formula is elementwise in the key,
    # but needs uint64 shifts and wrapping products that no op here expresses.
    batch=by_lanes("random_bits"),
)
