"""Optimisers as pure functions of pytrees (``pb.optim``), in the style of Optax: a
``GradientTransformation`` is a pair ``init(params) -> state`` and
``update(updates, state, params) -> (updates, state)``; ``apply_updates`` adds them to
the parameters.  Leaves without a gradient (None: integer, static or frozen ones) are
left as they are."""

from .base import EmptyState, GradientTransformation, apply_updates, chain
from .optimizers import adagrad, adam, adamw, lamb, lion, rmsprop, sgd
from .schedules import (
    constant_schedule,
    cosine_decay,
    exponential_decay,
    join_schedules,
    linear_warmup,
    step_decay,
    warmup_cosine_decay,
)
from .transforms import (
    ScaleByAdamState,
    ScaleByLionState,
    ScaleByRmsState,
    ScaleByRssState,
    ScaleByScheduleState,
    ScaleByStddevState,
    TraceState,
    add_decayed_weights,
    clip_by_global_norm,
    global_norm,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_lion,
    scale_by_rms,
    scale_by_rss,
    scale_by_schedule,
    scale_by_stddev,
    scale_by_trust_ratio,
    trace,
)

__all__ = [
    "EmptyState", "GradientTransformation", "ScaleByAdamState", "ScaleByLionState",
    "ScaleByRmsState", "ScaleByRssState", "ScaleByScheduleState", "ScaleByStddevState",
    "TraceState", "adagrad", "adam", "adamw", "add_decayed_weights", "apply_updates", "chain",
    "clip_by_global_norm", "constant_schedule", "cosine_decay", "exponential_decay",
    "global_norm", "join_schedules", "lamb", "linear_warmup", "lion", "rmsprop", "scale",
    "scale_by_adam", "scale_by_learning_rate", "scale_by_lion", "scale_by_rms",
    "scale_by_rss", "scale_by_schedule", "scale_by_stddev", "scale_by_trust_ratio", "sgd",
    "step_decay", "trace", "warmup_cosine_decay",
]
