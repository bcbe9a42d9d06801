"""Arrays started as ``np.zeros``/``np.empty`` of one shape are one value after CSE, so
each update of one starts from a copy of that shared zeros buffer (the LSTM layer saves
its states and gates so, in arrays updated one step a time).  The C backend writes the
constant instead of reading the shared buffer.  Values against plain NumPy."""

from __future__ import annotations

import re

import numpy as np

import pullback as pb


def saved_steps(x):
    """Two arrays of one shape, each written one row per step, the first step before
    the loop (as the LSTM layer does, to fix the state's dtype)."""
    ys = np.zeros((x.shape[0], 3, x.shape[1]), x.dtype)
    hs = np.zeros((x.shape[0], 3, x.shape[1]), x.dtype)
    hs[:, 0] = x
    h = np.tanh(x * 0.5 + 1.0)
    ys[:, 0] = h
    for t in range(1, 3):
        hs[:, t] = h
        h = np.tanh(h * 0.5 + 1.0)
        ys[:, t] = h
    return ys, hs, ys.sum() + hs.sum()


def _x():
    return np.random.default_rng(0).standard_normal((4, 40)).astype(np.float32)


def test_values_match_numpy():
    got = pb.jit(saved_steps, backend="c")(_x())
    for g, want in zip(got, saved_steps(_x()), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6)


def test_updates_of_shared_zeros_start_from_the_constant():
    src = pb.jit(saved_steps, backend="c").lower(_x()).source
    # whole-array writes, ``v[i] = <what>`` over all 480 elements: the zeros, and the
    # start of the update that cannot take their buffer (the other reads it later)
    starts = re.findall(r"for \(int64_t i = 0; i < 480; i\+\+\) v\d+\[i\] = ([^;]+);", src)
    assert len(starts) == 2, src
    assert not any("[" in value for value in starts), starts
