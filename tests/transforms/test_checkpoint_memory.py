"""Reverse mode (``pb.jacrev``: ``pb.grad`` of a few scalars runs forward mode) through
long data-dependent loops: the residual tape grows with the
iteration count, and checkpointing trades it for recomputation without changing the
gradient."""

from __future__ import annotations

import functools

import numpy as np

import pullback as pb
from pullback.ops.stack import TAPE_STATS

N = np.int64(30_000)
A = 1 - 1e-5


def damped(x, a, n):
    k = 0
    while k < n:
        x = x * a + 1e-3 * np.sin(x)
        k += 1
    return x


def damped_checkpointed(x, a, n):
    k = 0
    with pb.checkpoint_loops(every=300):
        while k < n:
            x = x * a + 1e-3 * np.sin(x)
            k += 1
    return x


def _peak(fn, *args) -> tuple[object, int]:
    """The result of ``fn(*args)`` and the most bytes its residual tape held."""
    TAPE_STATS.reset()
    out = fn(*args)
    return out, TAPE_STATS.peak


@functools.cache
def _plain(n: int):
    return _peak(pb.jacrev(damped, argnums=(0, 1)), 0.8, A, np.int64(n))


def _exact(x, a, n):
    """The derivatives of the recurrence, computed alongside it in plain Python."""
    dx, da = 1.0, 0.0
    for _ in range(n):
        step = a + 1e-3 * np.cos(x)
        dx, da = dx * step, da * step + x
        x = x * a + 1e-3 * np.sin(x)
    return dx, da


def test_a_30000_iteration_while_loop_keeps_residuals_proportional_to_its_length():
    (gx, ga), peak = _plain(int(N))
    _, peak_half = _plain(int(N) // 2)
    np.testing.assert_allclose([gx, ga], _exact(0.8, A, int(N)), rtol=1e-9)
    assert peak_half * 2 == peak  # the same residuals every iteration
    assert 8 * int(N) <= peak <= 3 * 8 * int(N)  # x and sin's input, float64 each


def test_checkpointed_loop_gives_the_same_gradient_with_far_less_memory():
    plain, peak_plain = _plain(int(N))
    checked, peak_checked = _peak(pb.jacrev(damped_checkpointed, argnums=(0, 1)), 0.8, A, N)
    assert plain == checked  # the same operations in the same order: bit for bit
    assert peak_checked < peak_plain / 25  # n/300 snapshots of ~33 bytes, 300 residual sets


def test_checkpointed_for_loop_with_an_uneven_last_segment():
    def f(x, n):
        s = x
        with pb.checkpoint_loops(every=7):
            for i in range(n):
                s = np.sin(s) * 1.01 + 0.1 * i
        return np.sum(s * s)

    def g(x, n):
        s = x
        for i in range(n):
            s = np.sin(s) * 1.01 + 0.1 * i
        return np.sum(s * s)

    x = np.linspace(0.1, 0.9, 5)
    for n in (0, 1, 6, 7, 30):
        np.testing.assert_array_equal(pb.grad(f)(x, np.int64(n)), pb.grad(g)(x, np.int64(n)))


def test_checkpointed_function_inside_a_loop_matches_the_plain_one():
    def body(y):
        return np.tanh(y) * np.exp(-y * y)

    def plain(x, n):
        for _ in range(n):
            x = body(x) + x
        return np.sum(x)

    def checked(x, n):
        step = pb.checkpoint(body)
        for _ in range(n):
            x = step(x) + x
        return np.sum(x)

    x = np.linspace(-1, 1, 4)
    np.testing.assert_allclose(pb.grad(checked)(x, np.int64(5)),
                               pb.grad(plain)(x, np.int64(5)), rtol=1e-14)
    ir = str(pb.make_ir(pb.grad(checked))(x, np.int64(5)))
    assert ir.count("tanh") > str(pb.make_ir(pb.grad(plain))(x, np.int64(5))).count("tanh")
