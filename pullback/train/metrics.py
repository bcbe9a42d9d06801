"""Metrics a training loop reports: ``accuracy`` is plain NumPy (eager or staged inside the
compiled step); ``RunningMean`` is an eager accumulator for the loop around it."""

from __future__ import annotations

from typing import Any

import numpy as np


def accuracy(logits_or_preds: Any, labels: Any) -> Any:
    """The fraction of examples whose prediction equals its integer label.

    ``logits_or_preds`` holds scores with one more (last) axis than ``labels`` — the
    prediction is their argmax, the first on ties as in NumPy — or predicted labels of
    ``labels``' shape.  Returns a float64 0-d value.
    """
    labels = np.asarray(labels)
    scores = np.asarray(logits_or_preds)
    preds = scores.argmax(axis=-1) if scores.ndim == labels.ndim + 1 else scores
    if preds.shape != labels.shape:
        raise ValueError(f"accuracy: predictions of shape {scores.shape} do not match labels "
                         f"of shape {labels.shape} (pass logits [..., classes] or labels)")
    return np.mean(preds == labels)


class RunningMean:
    """A weighted mean of the values seen so far, e.g. the loss over an epoch: update with
    each batch's mean and its size as the weight to get the mean over examples."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every value (start of an epoch)."""
        self.total = 0.0
        self.weight = 0.0

    def update(self, value: Any, weight: float = 1) -> None:
        """Add a scalar ``value`` (a Python number or a one-element array) ``weight`` times."""
        if weight < 0:
            raise ValueError(f"RunningMean.update: weight must be >= 0, got {weight!r}")
        self.total += float(np.asarray(value).item()) * weight
        self.weight += weight

    @property
    def value(self) -> float:
        """The mean so far; NaN before any weight has been added."""
        return self.total / self.weight if self.weight else float("nan")
