"""Schedules against their formulas written with ``math`` here, at every step of a range
crossing their boundaries: on Python ints, on 0-d int32 arrays, and compiled."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pullback as pb
from pullback import optim


def cosine(init, steps, alpha, t):
    return init * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * min(t, steps) / steps)) + alpha)


#: name -> (schedule, formula of the step t)
CASES = {
    "constant": (optim.constant_schedule(0.3), lambda t: 0.3),
    "step_decay": (optim.step_decay(0.1, 4, 0.5), lambda t: 0.1 * 0.5 ** (t // 4)),
    "exponential": (optim.exponential_decay(2.0, 5, 0.3), lambda t: 2.0 * 0.3 ** (t / 5)),
    "exponential-staircase": (optim.exponential_decay(2.0, 5, 0.3, staircase=True),
                              lambda t: 2.0 * 0.3 ** (t // 5)),
    "cosine": (optim.cosine_decay(1.5, 12, alpha=0.2), lambda t: cosine(1.5, 12, 0.2, t)),
    "linear_warmup": (optim.linear_warmup(0.8, 6, init=0.2),
                      lambda t: 0.2 + 0.6 * min(t, 6) / 6),
    "warmup_cosine": (optim.warmup_cosine_decay(1.0, 4, 14, end=0.1),
                      lambda t: t / 4 if t < 4 else cosine(1.0, 10, 0.1, t - 4)),
    "join": (optim.join_schedules([optim.constant_schedule(1.0), optim.linear_warmup(2.0, 4),
                                   optim.step_decay(3.0, 2, 0.5)], [3, 9]),
             lambda t: 1.0 if t < 3 else 2.0 * min(t - 3, 4) / 4 if t < 9
             else 3.0 * 0.5 ** ((t - 9) // 2)),
}
COUNTS = range(20)


@pytest.mark.parametrize("name", CASES)
def test_schedule_matches_its_formula(name):
    schedule, formula = CASES[name]
    for t in COUNTS:
        want = formula(t)
        assert float(schedule(t)) == pytest.approx(want, rel=1e-13, abs=1e-15)
        assert float(schedule(np.asarray(t, np.int32))) == pytest.approx(want, rel=1e-13,
                                                                          abs=1e-15)


def test_schedules_compiled_on_a_run_time_count():
    def all_rates(count):
        return [schedule(count) for schedule, _ in CASES.values()]

    compiled = pb.jit(all_rates, backend="interp")
    for t in COUNTS:
        got = compiled(np.asarray(t, np.int32))
        np.testing.assert_allclose(np.array(got, float), [f(t) for _, f in CASES.values()],
                                   rtol=1e-13, atol=1e-15)


def test_join_schedules_needs_one_boundary_fewer_than_schedules():
    with pytest.raises(ValueError, match="2 schedules need 1 boundaries, got 2"):
        optim.join_schedules([optim.constant_schedule(1.0)] * 2, [1, 2])
