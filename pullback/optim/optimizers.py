"""The common optimisers, each a ``chain`` of building blocks with Optax's semantics
(where PyTorch differs, docs/optim.md says how to match it)."""

from __future__ import annotations

from .base import GradientTransformation, chain
from .schedules import Schedule
from .transforms import (
    Mask,
    add_decayed_weights,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_lion,
    scale_by_rms,
    scale_by_rss,
    scale_by_stddev,
    scale_by_trust_ratio,
    trace,
)

__all__ = ["adagrad", "adam", "adamw", "lamb", "lion", "rmsprop", "sgd"]

LearningRate = float | Schedule


def sgd(learning_rate: LearningRate, momentum: float = 0.0,
        nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with heavy-ball or Nesterov momentum (``trace``)."""
    if nesterov and not momentum:
        raise ValueError("sgd: Nesterov momentum needs momentum > 0")
    if not momentum:
        return scale_by_learning_rate(learning_rate)
    return chain(trace(momentum, nesterov), scale_by_learning_rate(learning_rate))


def adam(learning_rate: LearningRate, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> GradientTransformation:
    """Adam (Kingma & Ba): bias-corrected first and second moment estimates."""
    return chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamw(learning_rate: LearningRate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4, mask: Mask = None) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``weight_decay * param``
    joins the Adam direction before the learning rate scales both."""
    return chain(scale_by_adam(b1, b2, eps), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate: LearningRate, decay: float = 0.9, eps: float = 1e-8,
            momentum: float = 0.0, centered: bool = False, *,
            eps_in_sqrt: bool = True) -> GradientTransformation:
    """RMSProp: gradients over the root of their moving mean square (``centered``: of
    their moving variance), then momentum on the scaled step."""
    scaling = (scale_by_stddev if centered else scale_by_rms)(decay, eps,
                                                               eps_in_sqrt=eps_in_sqrt)
    steps = [scaling, scale_by_learning_rate(learning_rate)]
    return chain(*steps, trace(momentum)) if momentum else chain(*steps)


def adagrad(learning_rate: LearningRate, initial_accumulator_value: float = 0.1,
            eps: float = 1e-7) -> GradientTransformation:
    """Adagrad: gradients over the root of the running sum of their squares."""
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


def lamb(learning_rate: LearningRate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         weight_decay: float = 0.0, mask: Mask = None) -> GradientTransformation:
    """LAMB (You et al.): the AdamW direction rescaled per leaf by the trust ratio
    ``|param| / |update|``."""
    return chain(scale_by_adam(b1, b2, eps), add_decayed_weights(weight_decay, mask),
                 scale_by_trust_ratio(), scale_by_learning_rate(learning_rate))


def lion(learning_rate: LearningRate, b1: float = 0.9, b2: float = 0.99,
         weight_decay: float = 1e-3, mask: Mask = None) -> GradientTransformation:
    """Lion (Chen et al.): the sign of an interpolation of gradient and momentum, plus
    decoupled weight decay."""
    return chain(scale_by_lion(b1, b2), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))
