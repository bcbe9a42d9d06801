"""Dense layers, embeddings and the two combinators (``Lambda``, ``Sequential``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import random
from ..tree import field
from . import init

__all__ = ["Embedding", "Lambda", "Linear", "Sequential"]


@dataclasses.dataclass
class Linear:
    """``y = x @ weight + bias``, weight [in, out] (torch's transposed, so no transpose
    is needed at run time); ``bias`` None for none."""

    weight: Any
    bias: Any = None

    @classmethod
    def init(cls, key: Any, in_features: int, out_features: int, *, bias: bool = True,
             dtype: Any = np.float32) -> Linear:
        """torch's default: weight and bias uniform on +-1/sqrt(in_features)."""
        wkey, bkey = random.split(key)
        bound = 1.0 / math.sqrt(in_features)
        weight = init.uniform(wkey, (in_features, out_features), bound, dtype)
        return cls(weight, init.uniform(bkey, (out_features,), bound, dtype) if bias else None)

    def __call__(self, x: Any) -> Any:
        if self.bias is None:
            return x @ self.weight
        return x @ self.weight + self.bias


@dataclasses.dataclass
class Embedding:
    """A lookup table: row ``i`` of ``weight`` [num, dim] for each integer id."""

    weight: Any

    @classmethod
    def init(cls, key: Any, num: int, dim: int, dtype: Any = np.float32) -> Embedding:
        """Rows drawn from N(0, 1), as torch does."""
        return cls(init.normal(key, (num, dim), 1.0, dtype))

    def __call__(self, ids: Any) -> Any:
        return self.weight[ids]


@dataclasses.dataclass
class Lambda:
    """A function without parameters as a layer (an activation in a ``Sequential``)."""

    fn: Callable[[Any], Any] = field(static=True)

    def __call__(self, x: Any) -> Any:
        return self.fn(x)


@dataclasses.dataclass
class Sequential:
    """Layers called in order, each on the previous one's output."""

    layers: tuple

    def __call__(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x
