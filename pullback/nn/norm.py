"""Normalisation layers: ``LayerNorm`` (per example) and ``BatchNorm`` (per channel, over
the batch, with running statistics carried as an explicit state)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ..tree import field
from . import init

__all__ = ["BatchNorm", "BatchNormState", "LayerNorm"]


@dataclasses.dataclass
class LayerNorm:
    """Normalise over the last ``weight.ndim`` axes (mean 0, variance 1, the biased
    variance as torch uses), then scale by ``weight`` and shift by ``bias``."""

    weight: Any
    bias: Any
    eps: float = field(static=True, default=1e-5)

    @classmethod
    def init(cls, shape: int | tuple, *, eps: float = 1e-5, dtype: Any = np.float32
             ) -> LayerNorm:
        """Weight ones, bias zeros, of the normalised shape."""
        return cls(init.ones(shape, dtype), init.zeros(shape, dtype), eps)

    def __call__(self, x: Any) -> Any:
        axes = tuple(range(-np.ndim(self.weight), 0))
        mean = np.mean(x, axis=axes, keepdims=True)
        centred = x - mean
        var = np.mean(centred * centred, axis=axes, keepdims=True)
        return centred / np.sqrt(var + self.eps) * self.weight + self.bias


class BatchNormState(NamedTuple):
    """Running statistics per channel, updated by each training call."""

    mean: Any
    var: Any


@dataclasses.dataclass
class BatchNorm:
    """Normalise each channel (axis 1 of [N, C, ...]) over the batch and the other axes.

    Training normalises by the batch's statistics and moves the running ones towards them
    (``running = (1 - momentum) * running + momentum * batch``, the variance the unbiased
    one, as torch does); evaluation normalises by the running statistics.  The state goes
    in and comes out: ``y, state = bn(x, state, train=True)``.
    """

    weight: Any
    bias: Any
    momentum: float = field(static=True, default=0.1)
    eps: float = field(static=True, default=1e-5)

    @classmethod
    def init(cls, num_features: int, *, momentum: float = 0.1, eps: float = 1e-5,
             dtype: Any = np.float32) -> BatchNorm:
        """Weight ones, bias zeros."""
        return cls(init.ones(num_features, dtype), init.zeros(num_features, dtype),
                   momentum, eps)

    def initial_state(self) -> BatchNormState:
        """Running mean 0 and variance 1, in the parameters' dtype."""
        dtype = np.asarray(self.weight).dtype
        return BatchNormState(np.zeros(np.shape(self.weight), dtype),
                              np.ones(np.shape(self.weight), dtype))

    def __call__(self, x: Any, state: BatchNormState, train: bool = True
                 ) -> tuple[Any, BatchNormState]:
        axes = (0, *range(2, np.ndim(x)))
        per_channel = (-1,) + (1,) * (np.ndim(x) - 2)
        if train:
            mean = np.mean(x, axis=axes)
            centred = x - mean.reshape(per_channel)
            var = np.mean(centred * centred, axis=axes)
            count = np.size(x) // np.shape(x)[1]
            if count < 2:
                raise ValueError("BatchNorm in training needs more than one value per channel")
            m = self.momentum
            state = BatchNormState((1 - m) * state.mean + m * mean,
                                   (1 - m) * state.var + m * var * (count / (count - 1)))
        else:
            mean, var = state.mean, state.var
            centred = x - mean.reshape(per_channel)
        scale = self.weight / np.sqrt(var + self.eps)
        return centred * scale.reshape(per_channel) + self.bias.reshape(per_channel), state
