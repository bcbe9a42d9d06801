"""Inverted dropout: in training each element is zeroed with probability ``rate`` and the
survivors scaled by 1 / (1 - rate), so evaluation is the identity."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .. import random
from ..tree import field

__all__ = ["Dropout"]


@dataclasses.dataclass
class Dropout:
    """``drop(x, key, train=True)``; the mask comes from ``key`` (a fresh one per step)."""

    rate: float = field(static=True, default=0.5)

    def __call__(self, x: Any, key: Any = None, *, train: bool = True) -> Any:
        if not 0 <= self.rate <= 1:
            raise ValueError(f"Dropout: rate is a probability, not {self.rate}")
        if not train or self.rate == 0:
            return x
        if key is None:
            raise ValueError("Dropout in training needs a key (pb.random.split one off "
                             "per step), or train=False")
        if self.rate == 1:
            return np.zeros_like(x)
        keep = 1.0 - self.rate
        return np.where(random.bernoulli(key, keep, np.shape(x)), x / keep, 0)
