"""``np.empty`` in native code: a buffer, nothing written into it before the program
writes it (a recurrent loop's outputs and saved states, step by step), no copy of it
when two of one shape are updated, and the values and gradients NumPy's program gives."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Const, Int, Load, Loop, Set, walk

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(3)


def run(xs, w, h):
    """Every step's state and the state each step starts from, saved as an RNN's
    gradient saves them (two ``empty_like`` of one shape, both written whole)."""
    steps = xs.shape[1]
    ys = np.empty((xs.shape[0], steps, h.shape[-1]))
    starts = np.empty_like(ys)
    for t in range(steps):
        starts[:, t] = h
        h = np.tanh(xs[:, t] @ w + h)
        ys[:, t] = h
    return ys, starts


def loss(xs, w, h):
    ys, starts = run(xs, w, h)
    return np.sum(ys * ys) + np.sum(np.cos(starts))


def _fills(fn, *args) -> list[Set]:
    """Stores of a constant into a buffer of the size of ``run``'s outputs."""
    module = c.source_of(pb.jit(fn, backend="c").lower(*args).ir).module
    size = args[0].shape[0] * args[0].shape[1] * args[2].shape[-1]
    return [s for f in module.funcs for lp in walk(f.body) if isinstance(lp, Loop)
            and isinstance(lp.stop, Int) and lp.stop.value == size
            for s in lp.body if isinstance(s, Set) and isinstance(s.value, Const)]


def test_a_loop_writing_every_step_fills_nothing_first():
    xs, w, h = RNG.standard_normal((4, 7, 5)), RNG.standard_normal((5, 5)), \
        RNG.standard_normal((4, 5))
    ys, starts = pb.jit(run, backend="c")(xs, w, h)
    want_ys, want_starts = run(xs, w, h)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-13)
    np.testing.assert_allclose(starts, want_starts, rtol=1e-13)
    assert _fills(run, xs, w, h) == []
    text = c.source_of(pb.jit(run, backend="c").lower(xs, w, h).ir).text
    copies = [line for line in text.splitlines() if "pb_copy" in line and f"{ys.size} *" in line]
    assert copies == []  # the two empty_like are two buffers, not one copied


def halves(xs):
    """A fresh ``np.empty`` each step, written in two halves (its creation, the same
    every step, moves out of the loop: each step's first write starts from it)."""
    total = np.zeros(xs.shape[1])
    half = xs.shape[1] // 2
    for t in range(xs.shape[0]):
        row = np.empty(xs.shape[1])
        row[:half] = np.sin(xs[t, :half])
        row[half:] = np.cos(xs[t, half:]) * t
        total = total + row * row
    return total


def test_a_buffer_made_each_step_is_written_without_a_fill_or_copy():
    xs = RNG.standard_normal((9, 37))
    np.testing.assert_allclose(pb.jit(halves, backend="c")(xs), halves(xs), rtol=1e-13)
    module = c.source_of(pb.jit(halves, backend="c").lower(xs).ir).module
    stores = [s.value for f in module.funcs for lp in walk(f.body) if isinstance(lp, Loop)
              and isinstance(lp.stop, Int) and lp.stop.value == 37
              for s in lp.body if isinstance(s, Set)]
    zeros = [v for v in stores if isinstance(v, Const) and v.value == 0]
    assert len(zeros) == 1  # ``total``'s, not the rows'
    assert not [v for v in stores if isinstance(v, Load)]  # no row copied

    text = c.source_of(pb.jit(halves, backend="c").lower(xs).ir).text
    assert "pb_copy" not in text


def test_gradient_through_empty_buffers_matches_central_differences():
    xs, w, h = RNG.standard_normal((3, 4, 3)), RNG.standard_normal((3, 3)), \
        RNG.standard_normal((3, 3))
    for grad in (pb.jit(pb.grad(loss, argnums=(1, 2))), pb.grad(pb.jit(loss), argnums=(1, 2))):
        dw, dh = grad(xs, w, h)
        for got, k in ((dw, 1), (dh, 2)):
            args = [xs, w, h]
            want = np.zeros_like(args[k])
            for j in np.ndindex(want.shape):
                up, down = [a.copy() for a in args], [a.copy() for a in args]
                up[k][j] += 1e-6
                down[k][j] -= 1e-6
                want[j] = (loss(*up) - loss(*down)) / 2e-6
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_the_interpreter_gives_zeros_and_shapes_and_dtypes_follow_numpy():
    def make(n):
        return np.empty((n, 3), np.float32), np.empty(n), np.empty_like(np.zeros((2, n), int))

    for backend in ("interp", "c"):
        a, b, e = pb.jit(make, backend=backend)(4)
        assert (a.shape, a.dtype, b.shape, b.dtype, e.shape, e.dtype) == \
            ((4, 3), np.float32, (4,), np.float64, (2, 4), np.int64)
    a, b, e = pb.jit(make, backend="interp")(4)
    assert not a.any() and not b.any() and not e.any()
