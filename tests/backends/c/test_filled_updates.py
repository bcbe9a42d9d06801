"""Updates that write one constant: the reverse of ``x[i] = v`` resets the cotangent's
window to zeros, a broadcast literal that loop-invariant code motion hoists out of the
loop; the C backend stores the constant itself rather than loading the hoisted buffer
each iteration.  Values against plain NumPy, gradients against float64 central
differences along random directions, on the C backend."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb

from .test_tape_buffers import check_gradient

N = 12


def scalar_stores(u0, a):
    """The heat benchmark's stencil, one element written per iteration."""
    u = u0 * 1.0
    for _ in range(3):
        new = u.copy()
        for i in range(1, u.shape[0] - 1):
            new[i] = u[i] + a * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = new
    return np.sum(u * u)


def slice_stores(u0, a):
    """A two-element window written per iteration, in place."""
    u = u0 * 1.0
    for i in range(0, u.shape[0] - 2, 2):
        u[i:i + 2] = np.sin(a * u[i + 1:i + 3]) + u[i:i + 2]
    return np.sum(u * u)


def nested_in_place(u0, a):
    """Element stores in an inner loop inside an outer one, reading what was written."""
    u = u0 * 1.0
    for _ in range(2):
        for i in range(1, u.shape[0]):
            u[i] = u[i - 1] * a + np.cos(u[i])
    return np.sum(u * u)


def while_stores(u0, a):
    """Element stores in a while loop whose trip count is known at run time only."""
    u = u0 * 1.0
    i = 1
    while i < u.shape[0]:
        u[i] = a * u[i - 1] + u[i] * u[i]
        i = i + 1
    return np.sum(u)


def constant_stores(u0, a):
    """The program itself stores constants: one element and a window per iteration."""
    u = u0 * a
    for i in range(0, u.shape[0] - 3, 3):
        u[i] = 0.0
        u[i + 1:i + 3] = 1.5
    return np.sum(u * u)


PROGRAMS = [scalar_stores, slice_stores, nested_in_place, while_stores, constant_stores]


def _args():
    return np.random.default_rng(5).uniform(-1.0, 1.0, N), 0.3


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_value_and_gradient_match_numpy_and_central_differences(f):
    u0, a = _args()
    vg = pb.jit(pb.value_and_grad(f, argnums=(0, 1)), backend="c")
    np.testing.assert_allclose(vg(u0, a)[0], f(u0, a), rtol=1e-12)
    check_gradient(lambda *args: vg(*args)[1], f, u0, a)


def test_the_reverse_of_an_element_store_stores_the_zero_itself():
    """No element store of the stencil's gradient reads a buffer's element for its
    value: the forward stores a computed local, the backward's reset the literal 0."""
    src = pb.jit(pb.grad(scalar_stores, argnums=(0, 1)), backend="c").lower(*_args()).source
    # (an index ``s + i`` as lowered, or ``it + k`` once ``loops/stencils.py`` evaluates it)
    stores = re.findall(r"\bv\d+\[(?:s\d+ \+ i\d+|it\d+(?: [-+] \d+)?)\] = ([^;]+);", src)
    assert "(0x0.0p+0)" in stores
    assert not any(re.search(r"\[", value) for value in stores), stores
