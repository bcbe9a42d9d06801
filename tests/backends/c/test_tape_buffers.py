"""Arrays on the C backend's AD tape: one of at least ``BY_POINTER`` bytes goes on the
tape as the pointer of a buffer of its own (the operand's when it dies at the push,
else a copy), and the pop hands that buffer to the backward.  Each program here saves
such an array and then writes, frees or returns what it saved from, so a popped value
read from a buffer that was written after its push gives a wrong gradient.  Values
against plain NumPy; gradients against float64 central differences along random
directions."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.loops.ir import Loop, Range, Runtime, walk, work
from pullback.backends.c.lower.control import BY_POINTER

N = 160  # float64: 1280 bytes, on the tape by pointer
assert N * 8 >= BY_POINTER


def heat(u0, a):
    """The benchmark's stencil: a fresh copy per step; the old state dies at the push."""
    u = u0.copy()
    n = u.shape[0]
    for _ in range(3):
        new = u.copy()
        for i in range(1, n - 1):
            new[i] = u[i] + a * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = new
    return np.sum(u * u)


def written_after_push(u0, a):
    """The state is saved for ``sin``'s derivative, then updated in place element by
    element and as a whole."""
    u = u0 * 1.0
    for _ in range(3):
        s = np.sin(u)
        for i in range(1, u.shape[0]):
            u[i] = u[i - 1] * 0.5 + a * s[i]
        u = u * 0.9
    return np.sum(u * u)


def nested(u0, a):
    """An inner loop's saved states inside an outer loop's, on the one tape."""
    u = u0 * 1.0
    for _ in range(2):
        for _ in range(3):
            u = np.tanh(a * u + u[::-1])
        u = u * np.cos(u)
    return np.sum(u)


def while_on_data(u0, a):
    """A while loop on data: the trip count is known only at run time."""
    u = u0 * 1.0
    t = a * 0.0
    while t < 3.5:
        u = np.sin(a * u) + u
        t = t + 1.0
    return np.sum(u * u)


def saved_and_returned(u0, a):
    """The saved state is also carried out of the loop and returned (the push cannot
    take it over)."""
    u = u0 * 1.0
    prev = u
    for _ in range(3):
        prev = u
        u = np.sin(a * u)
    return np.sum(u * prev), prev


def saved_and_read(u0, a):
    return saved_and_returned(u0, a)[0]


def small_and_large(u0, a):
    """Arrays under and over ``BY_POINTER`` pushed in one body, interleaved on the tape."""
    u = u0 * 1.0
    w = u0[:4] * 1.0
    for _ in range(3):
        w = np.sin(w * a) + np.sum(u[:4] * w)
        u = np.cos(u * a) + w[0] * u
    return np.sum(u * u) + np.sum(w)


PROGRAMS = [heat, written_after_push, nested, while_on_data, saved_and_read,
            small_and_large]


def _args():
    rng = np.random.default_rng(1)
    return rng.uniform(-1.0, 1.0, N), 0.3


def check_gradient(grad, f, u0, a, eps=1e-6):
    """``grad(u0, a)`` against central differences of ``f`` (along three random
    directions in u0, and in a)."""
    gu, ga = grad(u0, a)
    rng = np.random.default_rng(2)
    for _ in range(3):
        v = rng.standard_normal(u0.shape)
        slope = (f(u0 + eps * v, a) - f(u0 - eps * v, a)) / (2 * eps)
        np.testing.assert_allclose(np.dot(gu, v), slope, rtol=1e-6, atol=1e-6)
    da = (f(u0, a + eps) - f(u0, a - eps)) / (2 * eps)
    np.testing.assert_allclose(ga, da, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_value_and_gradient_match_numpy_and_central_differences(f):
    u0, a = _args()
    vg = pb.jit(pb.value_and_grad(f, argnums=(0, 1)), backend="c")
    value, _ = vg(u0, a)
    np.testing.assert_allclose(value, f(u0, a), rtol=1e-12)
    check_gradient(lambda *args: vg(*args)[1], f, *_args())
    # twice: the second call runs on the buffers the first left in the pool
    check_gradient(lambda *args: vg(*args)[1], f, *_args())


def test_grad_of_jit_matches_central_differences():
    check_gradient(pb.grad(pb.jit(written_after_push, backend="c"), argnums=(0, 1)),
                   written_after_push, *_args())


def test_a_saved_array_returned_keeps_its_value():
    u0, a = _args()
    vg = pb.jit(pb.value_and_grad(saved_and_returned, argnums=(0, 1), has_aux=True),
                backend="c")
    (value, prev), _ = vg(u0, a)
    want, want_prev = saved_and_returned(u0, a)
    np.testing.assert_allclose(value, want, rtol=1e-12)
    np.testing.assert_allclose(prev, want_prev, rtol=1e-12)
    check_gradient(lambda *args: vg(*args)[1], saved_and_read, *_args())


def test_heat_saves_each_step_by_pointer_without_a_copy():
    """The stencil's old state dies at its push: the tape takes its buffer (a pointer
    pushed, no copy made for it) and the pop hands it back.  The pointer passes through
    a local of its own: no buffer's address is taken (OpenMP would share it with a loop
    by reference, and the loop would gather its elements)."""
    src = pb.jit(pb.grad(heat, argnums=(0, 1)), backend="c").lower(*_args()).source
    pushes = re.findall(r"pb_tape_push\(ctx, \w+, \(&(box\d+)\), sizeof\(void \*\)\)", src)
    pops = re.findall(r"pb_tape_pop\(ctx, \w+, \(&(box\d+)\), sizeof\(void \*\)\)", src)
    assert pushes and pops
    assert all(re.search(rf"void \*{p} = v\d+;", src) for p in pushes)
    assert all(re.search(rf"v\d+ = {p};", src) for p in pops)
    assert not re.search(r"pb_tape_p\w+\(ctx, \w+, \(&v", src)


def small_steps(u0, a):
    u = u0 * 1.0
    for _ in range(4):
        u = np.sin(a * u)
    return np.sum(u)


def test_tape_traffic_counts_as_the_elements_it_copies():
    """A push or pop charges the poll budget the elements it copies (one for a pointer),
    not the square of its bytes: a short time loop saving 100 float64 (under
    ``BY_POINTER``) is a counted loop, the gradient right."""
    u0 = _args()[0][:100]
    assert 100 * 8 < BY_POINTER
    g = pb.jit(pb.grad(small_steps, argnums=(0, 1)), backend="c")
    lowered = c.source_of(g.lower(u0, 0.3).ir).module
    runtime = [s for f in lowered.funcs for s in walk(f.body)
               if isinstance(s, Runtime) and s.name.startswith("pb_tape_")]
    assert runtime and all(work([s]) == s.cost == 100 for s in runtime)
    loops = [s for f in lowered.funcs for s in walk(f.body) if isinstance(s, (Loop, Range))]
    assert not any(isinstance(s, Range) for s in loops), "no time loop polls"
    gu, ga = g(u0, 0.3)
    eps = 1e-6
    v = np.random.default_rng(3).standard_normal(100)
    np.testing.assert_allclose(np.dot(gu, v), (small_steps(u0 + eps * v, 0.3)
                                               - small_steps(u0 - eps * v, 0.3)) / (2 * eps),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ga, (small_steps(u0, 0.3 + eps) - small_steps(u0, 0.3 - eps))
                               / (2 * eps), rtol=1e-6, atol=1e-6)
