"""Kernels reading slices across rows (an LSTM's gates, ``z[:, n:2 * n]``) run by rows:
each read is at the row and column indices, with no division of a flat index, which GCC
vectorises as a gather per lane; the values equal NumPy's, and so does the gradient.  A
window at a run-time start (``xs[:, t]`` in a loop over time) is read in place by the
kernels that read it, slices of it too, rather than copied out first."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Load, Set, Sym, walk

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(11)


def cell(z, c_prev):
    n = c_prev.shape[-1]
    i, f = z[:, :n], z[:, n:2 * n]
    g, o = z[:, 2 * n:3 * n], z[:, 3 * n:]
    c_next = f * c_prev + i * g
    return o * np.tanh(c_next), c_next


def cell_loss(z, c_prev):
    h, c_next = cell(z, c_prev)
    return np.sum(h * h) + np.sum(np.sin(c_next))


def step_of_sequence(zs, c_prev):
    """A time step's slice of a sequence, reshaped to drop its axis of one, then gates."""
    return cell(zs[:, 3], c_prev)


def _divisions(fn, *args) -> list[str]:
    text = c.source_of(pb.jit(fn, backend="c").lower(*args).ir).text
    return re.findall(r"\[[^\]]*\bi / \d+[^\]]*\]", text)


@pytest.mark.parametrize("rows,n", [(32, 64), (5, 17), (3, 8)])
def test_gates_read_by_rows_equal_numpy(rows, n):
    z, c_prev = RNG.standard_normal((rows, 4 * n)), RNG.standard_normal((rows, n))
    h, c_next = pb.jit(cell, backend="c")(z, c_prev)
    want_h, want_c = cell(z, c_prev)
    np.testing.assert_array_equal(c_next, want_c)
    np.testing.assert_allclose(h, want_h, rtol=1e-14, atol=1e-15)
    if n >= 16:  # rows long enough for a SIMD loop of their own
        assert _divisions(cell, z, c_prev) == []


def test_a_sequence_step_read_through_its_reshape_by_rows():
    zs, c_prev = RNG.standard_normal((8, 6, 4 * 32)), RNG.standard_normal((8, 32))
    h, c_next = pb.jit(step_of_sequence, backend="c")(zs, c_prev)
    want_h, want_c = step_of_sequence(zs, c_prev)
    np.testing.assert_array_equal(c_next, want_c)
    np.testing.assert_allclose(h, want_h, rtol=1e-14, atol=1e-15)
    assert _divisions(step_of_sequence, zs, c_prev) == []


def test_the_gradient_through_sliced_gates_matches_central_differences():
    z, c_prev = RNG.standard_normal((6, 4 * 20)), RNG.standard_normal((6, 20))
    dz, dc = pb.jit(pb.grad(cell_loss, argnums=(0, 1)), backend="c")(z, c_prev)
    for got, x, k in ((dz, z, 0), (dc, c_prev, 1)):
        want = np.zeros_like(x)
        eps = 1e-6
        for j in np.ndindex(x.shape):
            up, down = [z.copy(), c_prev.copy()], [z.copy(), c_prev.copy()]
            up[k][j] += eps
            down[k][j] -= eps
            want[j] = (cell_loss(*up) - cell_loss(*down)) / (2 * eps)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def over_time(xs, c0):
    """An LSTM-like cell over the time axis, reading each step's window and its gates."""
    h, c_prev = np.zeros_like(c0), c0
    total = np.zeros_like(c0)
    for t in range(xs.shape[1]):
        h, c_prev = cell(xs[:, t] + np.concatenate([h, h, h, h], axis=-1), c_prev)
        total = total + h
    return total, c_prev


def test_windows_at_run_time_starts_are_read_in_place():
    xs, c0 = RNG.standard_normal((6, 5, 4 * 24)), RNG.standard_normal((6, 24))
    total, c_last = pb.jit(over_time, backend="c")(xs, c0)
    want_total, want_c = over_time(xs, c0)
    np.testing.assert_allclose(total, want_total, rtol=1e-13)
    np.testing.assert_allclose(c_last, want_c, rtol=1e-13)
    module = c.source_of(pb.jit(over_time, backend="c").lower(xs, c0).ir).module
    copies = [s for f in module.funcs for s in walk(f.body) if isinstance(s, Set) and
              isinstance(s.value, Load) and isinstance(s.value.ptr, Sym) and
              re.fullmatch(r"p\d+", s.value.ptr.name)]
    assert copies == []  # no window of xs copied out of the parameter
    assert _divisions(over_time, xs, c0) == []
    grad = pb.jit(pb.grad(lambda a, b: np.sum(over_time(a, b)[0] ** 2), argnums=(0, 1)))
    dxs, dc0 = grad(xs, c0)
    for got, k in ((dxs, 0), (dc0, 1)):
        probe = RNG.standard_normal(got.shape)
        args = [xs.copy(), c0.copy()]

        def at(e, args=args, k=k, probe=probe):
            moved = list(args)
            moved[k] = args[k] + e * probe
            return np.sum(over_time(*moved)[0] ** 2)

        want = (at(1e-6) - at(-1e-6)) / 2e-6
        np.testing.assert_allclose(np.sum(got * probe), want, rtol=1e-6)
