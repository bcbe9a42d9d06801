"""Learning-rate schedules: functions of the step count (a 0-d int array, or a Python
int) written with NumPy, so that they run eagerly and inside compiled code alike, where
the count is a run-time value and no branch may depend on it (``np.where`` and
``np.minimum`` take the place of ``if``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "Schedule",
    "constant_schedule",
    "cosine_decay",
    "exponential_decay",
    "join_schedules",
    "linear_warmup",
    "step_decay",
    "warmup_cosine_decay",
]

Schedule = Callable[[Any], Any]


def constant_schedule(value: float) -> Schedule:
    """``value`` at every step."""
    return lambda count: value


def step_decay(init: float, step_size: int, gamma: float) -> Schedule:
    """``init * gamma ** (count // step_size)``: torch's ``StepLR`` (with one step per
    count)."""
    return lambda count: init * gamma ** (count // step_size)


def exponential_decay(init: float, transition_steps: int, decay_rate: float,
                      staircase: bool = False) -> Schedule:
    """``init * decay_rate ** (count / transition_steps)``; ``staircase``: the exponent
    rounded down, so the rate drops every ``transition_steps``."""

    def schedule(count: Any) -> Any:
        exponent = count / transition_steps
        return init * decay_rate ** (np.floor(exponent) if staircase else exponent)

    return schedule


def cosine_decay(init: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Half a cosine from ``init`` down to ``alpha * init`` over ``decay_steps``, then
    constant."""

    def schedule(count: Any) -> Any:
        done = np.minimum(count, decay_steps) / decay_steps
        return init * ((1 - alpha) * 0.5 * (1 + np.cos(np.pi * done)) + alpha)

    return schedule


def linear_warmup(peak: float, warmup_steps: int, init: float = 0.0) -> Schedule:
    """A straight line from ``init`` at step 0 to ``peak`` at ``warmup_steps``, then
    ``peak``."""
    return lambda count: init + (peak - init) * np.minimum(count, warmup_steps) / warmup_steps


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """``schedules[0]`` until ``boundaries[0]``, then ``schedules[1]`` (its count
    restarting from 0 at the boundary), and so on; one boundary fewer than schedules."""
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(f"join_schedules: {len(schedules)} schedules need "
                         f"{len(schedules) - 1} boundaries, got {len(boundaries)}")

    def schedule(count: Any) -> Any:
        value = schedules[0](count)
        for later, start in zip(schedules[1:], boundaries, strict=True):
            value = np.where(count < start, value, later(count - start))
        return value

    return schedule


def warmup_cosine_decay(peak: float, warmup_steps: int, decay_steps: int,
                        end: float = 0.0) -> Schedule:
    """A linear warm-up from 0 to ``peak`` over ``warmup_steps``, then a cosine decay to
    ``end`` reached at step ``decay_steps`` (counted from the start, warm-up included,
    as Optax counts it)."""
    return join_schedules([linear_warmup(peak, warmup_steps),
                           cosine_decay(peak, decay_steps - warmup_steps, end / peak)],
                          [warmup_steps])
