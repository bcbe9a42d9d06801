"""The building blocks optimisers are chained from: scalings, moment estimates, momentum,
weight decay and clipping.  Each update is a leafwise NumPy expression, so inside
``pb.jit`` a whole chain fuses into a few element-wise kernels per parameter.

Scalars that change with the step (bias corrections, scheduled rates) are cast to each
leaf's dtype before they meet it: a float32 parameter gets float32 updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..tree import tree_leaves
from .base import (
    EmptyState,
    GradientTransformation,
    Params,
    Updates,
    map_updates,
    safe_increment,
    trainable,
)
from .schedules import Schedule

__all__ = [
    "ScaleByAdamState",
    "ScaleByLionState",
    "ScaleByRmsState",
    "ScaleByRssState",
    "ScaleByScheduleState",
    "ScaleByStddevState",
    "TraceState",
    "add_decayed_weights",
    "clip_by_global_norm",
    "global_norm",
    "scale",
    "scale_by_adam",
    "scale_by_learning_rate",
    "scale_by_lion",
    "scale_by_rms",
    "scale_by_rss",
    "scale_by_schedule",
    "scale_by_stddev",
    "scale_by_trust_ratio",
    "trace",
]

Mask = Any  # a pytree of bools like the parameters, or a function params -> such a tree


def _like(value: Any, leaf: Any) -> Any:
    """A scalar in ``leaf``'s dtype, so that it does not promote the leaf."""
    return np.asarray(value, dtype=leaf.dtype)


def _zeros(params: Params) -> Updates:
    return map_updates(np.zeros_like, trainable(params))


def _full(params: Params, value: float) -> Updates:
    return map_updates(lambda p: np.full_like(p, value), trainable(params))


def _moment(updates: Updates, moments: Updates, decay: float, order: int) -> Updates:
    """The exponential moving average ``decay * m + (1 - decay) * g**order``."""
    return map_updates(lambda g, m: decay * m + (1 - decay) * g**order, updates, moments)


def _bias_corrected(moments: Updates, decay: float, count: Any) -> Updates:
    correction = 1 - decay**count
    return map_updates(lambda m: m / _like(correction, m), moments)


def _scaled(updates: Updates, factor: Any) -> Updates:
    return map_updates(lambda g: g * _like(factor, g), updates)


def _stateless(update: Callable[[Updates, Params], Updates]) -> GradientTransformation:
    return GradientTransformation(lambda params: EmptyState(),
                                  lambda updates, state, params=None:
                                  (update(updates, params), state))


# --- scaling --------------------------------------------------------------------------


def scale(factor: float) -> GradientTransformation:
    """Multiply every update by the constant ``factor``."""
    return _stateless(lambda updates, params: _scaled(updates, factor))


class ScaleByScheduleState(NamedTuple):
    """The number of updates made so far (0-d int32), the argument of the schedule."""

    count: Any


def scale_by_schedule(schedule: Schedule) -> GradientTransformation:
    """Multiply the updates of step ``n`` (counted from 0) by ``schedule(n)``."""

    def init(params: Params) -> ScaleByScheduleState:
        return ScaleByScheduleState(np.zeros((), np.int32))

    def update(updates: Updates, state: ScaleByScheduleState, params: Params = None):
        updates = _scaled(updates, schedule(state.count))
        return updates, ScaleByScheduleState(safe_increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate: float | Schedule, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """Multiply by ``-learning_rate`` (descent; ``flip_sign=False``: ascent); a schedule
    is evaluated at the step count."""
    sign = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: sign * learning_rate(count))
    return scale(sign * learning_rate)


# --- momentum and moment estimates ----------------------------------------------------


class TraceState(NamedTuple):
    """The momentum buffer, one leaf per parameter with a gradient."""

    trace: Updates


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Heavy-ball momentum as Optax and ``torch.optim.SGD`` define it: ``t = g + decay *
    t`` and the update is ``t`` (Nesterov: ``g + decay * t``, with the new ``t``)."""

    def update(updates: Updates, state: TraceState, params: Params = None):
        new = map_updates(lambda g, t: g + decay * t, updates, state.trace)
        out = map_updates(lambda g, t: g + decay * t, updates, new) if nesterov else new
        return out, TraceState(new)

    return GradientTransformation(lambda params: TraceState(_zeros(params)), update)


class ScaleByAdamState(NamedTuple):
    """The step count and Adam's first and second moment estimates."""

    count: Any
    mu: Updates
    nu: Updates


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adam's direction ``m_hat / (sqrt(v_hat + eps_root) + eps)``, with the moment
    estimates ``m``, ``v`` bias-corrected by ``1 - b**t``."""

    def init(params: Params) -> ScaleByAdamState:
        return ScaleByAdamState(np.zeros((), np.int32), _zeros(params), _zeros(params))

    def update(updates: Updates, state: ScaleByAdamState, params: Params = None):
        mu = _moment(updates, state.mu, b1, 1)
        nu = _moment(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        out = map_updates(lambda m, v: m / (np.sqrt(v + eps_root) + eps),
                          _bias_corrected(mu, b1, count), _bias_corrected(nu, b2, count))
        return out, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def _inverse_root(v: Any, eps: float, eps_in_sqrt: bool) -> Any:
    return 1 / np.sqrt(v + eps) if eps_in_sqrt else 1 / (np.sqrt(v) + eps)


class ScaleByRmsState(NamedTuple):
    """The moving mean of squared gradients."""

    nu: Updates


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                 eps_in_sqrt: bool = True) -> GradientTransformation:
    """RMSProp's scaling ``g / sqrt(v + eps)`` by the moving mean ``v`` of ``g**2``
    (``eps_in_sqrt=False``: ``g / (sqrt(v) + eps)``, as PyTorch has it)."""

    def update(updates: Updates, state: ScaleByRmsState, params: Params = None):
        nu = _moment(updates, state.nu, decay, 2)
        out = map_updates(lambda g, v: g * _inverse_root(v, eps, eps_in_sqrt), updates, nu)
        return out, ScaleByRmsState(nu)

    return GradientTransformation(lambda params: ScaleByRmsState(_full(params, initial_scale)),
                                  update)


class ScaleByStddevState(NamedTuple):
    """The moving means of gradients and of their squares."""

    mu: Updates
    nu: Updates


def scale_by_stddev(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                    eps_in_sqrt: bool = True) -> GradientTransformation:
    """Centred RMSProp: ``g`` over the square root of the moving variance ``v - m**2``."""

    def init(params: Params) -> ScaleByStddevState:
        return ScaleByStddevState(_zeros(params), _full(params, initial_scale))

    def update(updates: Updates, state: ScaleByStddevState, params: Params = None):
        mu = _moment(updates, state.mu, decay, 1)
        nu = _moment(updates, state.nu, decay, 2)
        out = map_updates(lambda g, m, v: g * _inverse_root(v - m * m, eps, eps_in_sqrt),
                          updates, mu, nu)
        return out, ScaleByStddevState(mu, nu)

    return GradientTransformation(init, update)


class ScaleByRssState(NamedTuple):
    """The running sum of squared gradients."""

    sum_of_squares: Updates


def scale_by_rss(initial_accumulator_value: float = 0.1,
                 eps: float = 1e-7) -> GradientTransformation:
    """Adagrad's scaling ``g / sqrt(s + eps)`` by the running sum ``s`` of ``g**2``
    (0 where ``s`` is 0, which only an initial value of 0 allows)."""

    def update(updates: Updates, state: ScaleByRssState, params: Params = None):
        total = map_updates(lambda g, s: s + g * g, updates, state.sum_of_squares)
        out = map_updates(lambda g, s: np.where(s > 0, g / np.sqrt(np.where(s > 0, s, 1.0) + eps),
                                                0.0), updates, total)
        return out, ScaleByRssState(total)

    return GradientTransformation(
        lambda params: ScaleByRssState(_full(params, initial_accumulator_value)), update)


class ScaleByLionState(NamedTuple):
    """Lion's momentum: the moving mean of gradients."""

    mu: Updates


def scale_by_lion(b1: float = 0.9, b2: float = 0.99) -> GradientTransformation:
    """Lion's direction ``sign((1 - b1) g + b1 m)``; the momentum ``m`` then averages
    the gradients with ``b2``."""

    def update(updates: Updates, state: ScaleByLionState, params: Params = None):
        out = map_updates(lambda g, m: np.sign((1 - b1) * g + b1 * m), updates, state.mu)
        return out, ScaleByLionState(_moment(updates, state.mu, b2, 1))

    return GradientTransformation(lambda params: ScaleByLionState(_zeros(params)), update)


def _norm(x: Any) -> Any:
    return np.sqrt(np.sum(x * x))


def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> GradientTransformation:
    """LAMB's layer-wise scaling: each leaf's update times ``trust_coefficient *
    |p| / (|u| + eps)`` (norms at least ``min_norm``), or 1 where either norm is 0."""

    def ratio(u: Any, p: Any) -> Any:
        p_norm = np.maximum(_norm(p), min_norm)
        u_norm = np.maximum(_norm(u), min_norm)
        degenerate = (p_norm == 0) | (u_norm == 0)
        safe = np.where(degenerate, 1.0, u_norm + eps)
        return u * _like(np.where(degenerate, 1.0, trust_coefficient * p_norm / safe), u)

    return _stateless(lambda updates, params: map_updates(ratio, updates, params))


# --- weight decay and clipping --------------------------------------------------------


def add_decayed_weights(weight_decay: float, mask: Mask = None) -> GradientTransformation:
    """Add ``weight_decay * param`` to each update (decoupled weight decay, as AdamW
    has it); with ``mask``, only where the mask is True (a pytree of bools shaped like
    the parameters, or a function of the parameters that returns one)."""

    def update(updates: Updates, state: EmptyState, params: Params = None):
        if params is None:
            raise ValueError("add_decayed_weights needs the parameters: call "
                             "update(updates, state, params)")
        where = mask(params) if callable(mask) else mask
        if where is None:
            return map_updates(lambda g, p: g + weight_decay * p, updates, params), state
        return map_updates(lambda g, p, m: g + weight_decay * p if m else g,
                           updates, params, where), state

    return GradientTransformation(lambda params: EmptyState(), update)


def global_norm(updates: Updates) -> Any:
    """The 2-norm of all the updates together, as if they were one vector."""
    total = 0.0
    for square in tree_leaves(map_updates(lambda g: np.sum(g * g), updates)):
        total = total + square
    return np.sqrt(total)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all updates by ``max_norm / norm`` when their global norm exceeds
    ``max_norm`` (one factor for the whole tree, so directions are kept)."""

    def clip(updates: Updates, params: Params) -> Updates:
        return _scaled(updates, max_norm / np.maximum(global_norm(updates), max_norm))

    return _stateless(clip)
