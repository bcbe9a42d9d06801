"""Loss functions.  Classes lie on the last axis (``logits [..., C]``, labels ``[...]``),
as in Optax; each function takes ``reduction="mean" | "sum" | "none"`` over the loss's
elements, as torch does.  Log-probabilities come from a log-sum-exp with the maximum
taken out, so large logits neither overflow nor lose the small differences between them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .activations import log_softmax

__all__ = ["binary_cross_entropy_with_logits", "mse", "nll_loss", "softmax_cross_entropy",
           "softmax_cross_entropy_with_integer_labels"]


def softmax_cross_entropy(logits: Any, targets: Any, *, reduction: str = "mean") -> Any:
    """Cross-entropy of ``softmax(logits)`` against target probabilities ``[..., C]``:
    ``-sum(targets * log_softmax(logits))`` over the classes."""
    return _reduce(-np.sum(targets * log_softmax(logits), axis=-1), reduction)


def softmax_cross_entropy_with_integer_labels(logits: Any, labels: Any, *,
                                              label_smoothing: float = 0.0,
                                              reduction: str = "mean") -> Any:
    """Cross-entropy against integer class labels ``[...]``.  With ``label_smoothing=e``
    the target puts ``1 - e`` on the label and ``e`` spread evenly over all C classes
    (torch's ``F.cross_entropy(label_smoothing=e)``, Optax's ``smooth_labels``)."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1], not {label_smoothing}")
    log_probs = log_softmax(logits)
    loss = _picked(log_probs, labels)
    if label_smoothing:
        spread = -np.mean(log_probs, axis=-1)
        loss = (1.0 - label_smoothing) * loss + label_smoothing * spread
    return _reduce(loss, reduction)


def nll_loss(log_probs: Any, labels: Any, *, reduction: str = "mean") -> Any:
    """Negative log-likelihood of integer labels ``[...]`` under ``log_probs [..., C]``."""
    return _reduce(_picked(log_probs, labels), reduction)


def mse(pred: Any, target: Any, *, reduction: str = "mean") -> Any:
    """Squared error ``(pred - target) ** 2``, element by element."""
    return _reduce((pred - target) ** 2, reduction)


def binary_cross_entropy_with_logits(logits: Any, targets: Any, *,
                                     reduction: str = "mean") -> Any:
    """Cross-entropy of ``sigmoid(logits)`` against targets in [0, 1], element by element,
    as ``max(x, 0) - x * t + log1p(exp(-|x|))``: exact for logits of any size."""
    loss = np.maximum(logits, 0) - logits * targets + np.log1p(np.exp(-np.abs(logits)))
    return _reduce(loss, reduction)


def _picked(log_probs: Any, labels: Any) -> Any:
    """``-log_probs[..., labels]``: each element's loss at its label."""
    index = np.expand_dims(np.asarray(labels), -1)
    return -np.take_along_axis(log_probs, index, axis=-1)[..., 0]


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f'reduction must be "mean", "sum" or "none", not {reduction!r}')
