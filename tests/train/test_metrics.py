"""pb.train.accuracy (eager and compiled) and RunningMean."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb


def test_accuracy_from_logits_and_labels():
    logits = np.array([[0.1, 2.0, -1.0], [3.0, 3.0, 0.0], [0.0, 0.0, 1.0], [5.0, 1.0, 2.0]])
    labels = np.array([1, 1, 2, 2])  # the tie in row 1 goes to class 0, as np.argmax does
    assert pb.train.accuracy(logits, labels) == 0.5
    assert pb.train.accuracy(np.array([[1, 2], [0, 2]]), np.array([[1, 0], [0, 2]])) == 0.75
    compiled = pb.jit(pb.train.accuracy)(logits, labels)
    assert compiled == 0.5 and compiled.dtype == np.float64
    with pytest.raises(ValueError, match=r"shape \(4, 3\) do not match labels of shape \(3,\)"):
        pb.train.accuracy(logits, labels[:3])


def test_running_mean_is_weighted():
    mean = pb.train.RunningMean()
    assert np.isnan(mean.value)
    values, weights = [0.5, np.float32(2.0), np.array([4.0])], [32, 32, 8]
    for v, w in zip(values, weights, strict=True):
        mean.update(v, w)
    assert mean.value == pytest.approx(np.average([0.5, 2.0, 4.0], weights=weights))
    mean.reset()
    mean.update(3.0)
    mean.update(1.0)
    assert mean.value == 2.0
    with pytest.raises(ValueError, match="size 1"):
        mean.update(np.ones(2))
    with pytest.raises(ValueError, match="weight must be >= 0"):
        mean.update(1.0, -1)
