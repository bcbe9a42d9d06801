"""Reverse mode of scalar loops that update arrays in place: explicit stencils (the
heat equation) written as ``for i in range(1, n - 1)`` loops over elements, with a
fresh copy per time step, two buffers swapped, one buffer updated in place, and a 2-d
stencil in nested loops.

Gradients agree with float64 central differences of the plain function on both
backends.  What keeps the gradient's cost near the forward's is checked on the program
itself, not by timing: an inner iteration pushes nothing onto the tape when what it
saves can be read again from an array the loop only reads (its index arithmetic is
recomputed in the backward), one scalar otherwise, and no loop inside another loop
allocates, copies or sweeps a whole array per iteration (a cotangent updated one element
at a time, in place).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.ir.core import Block

STEPS = 3


def heat_copy(u0, alpha):
    u = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        new = u.copy()
        for i in range(1, n - 1):
            new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = new
    return np.sum(u * u)


def heat_swap(u0, alpha):
    u = u0.copy()
    v = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        for i in range(1, n - 1):
            v[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u, v = v, u
    return np.sum(u * u)


def heat_inplace(u0, alpha):
    u = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        left = u[0]
        for i in range(1, n - 1):
            here = u[i]
            u[i] = here + alpha * (left - 2.0 * here + u[i + 1])
            left = here
    return np.sum(u * u)


def heat_2d(u0, alpha):
    u = u0.copy()
    n, m = u.shape
    for _ in range(STEPS - 1):
        new = u.copy()
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                new[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]
                                               + u[i, j + 1] - 4.0 * u[i, j])
        u = new
    return np.sum(u * u)


PROGRAMS = [heat_copy, heat_swap, heat_inplace, heat_2d]


def _args(f):
    rng = np.random.default_rng(0)
    u0 = rng.standard_normal((5, 6) if f is heat_2d else 12)
    return u0, 0.15


def _differences(f, u0, alpha, eps=1e-6):
    """Central differences of the plain function: d/du0 (every element), d/dalpha."""
    du = np.zeros_like(u0)
    for k in range(u0.size):
        e = np.zeros_like(u0)
        e.flat[k] = eps
        du.flat[k] = (f(u0 + e, alpha) - f(u0 - e, alpha)) / (2 * eps)
    return du, (f(u0, alpha + eps) - f(u0, alpha - eps)) / (2 * eps)


def _check(grad, f):
    u0, alpha = _args(f)
    gu, ga = grad(u0, alpha)
    du, da = _differences(f, u0, alpha)
    np.testing.assert_allclose(gu, du, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ga, da, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f, backend", [
    *[(f, "interp") for f in PROGRAMS], (heat_copy, "c"), (heat_inplace, "c"),
    *[pytest.param(f, "c", marks=pytest.mark.slow) for f in (heat_swap, heat_2d)],
], ids=lambda v: getattr(v, "__name__", v))
def test_jit_of_grad_matches_central_differences(f, backend):
    _check(pb.jit(pb.grad(f, argnums=(0, 1)), backend=backend), f)


@pytest.mark.parametrize("f", [heat_copy, heat_inplace], ids=lambda f: f.__name__)
def test_grad_of_jit_matches_central_differences(f):
    _check(pb.grad(pb.jit(f, backend="c"), argnums=(0, 1)), f)


def _loops(block: Block, depth: int = 0):
    """Every loop body in ``block``, with how many loops enclose it (itself included)."""
    for e in block.eqns:
        inner = depth + (e.op.name in ("for_loop", "while_loop"))
        for b in e.blocks():
            if e.op.name in ("for_loop", "while_loop") and b is e.params["body"]:
                yield b, inner
            yield from _loops(b, inner)


def _pushed(f, depth, args=None):
    """What the loop bodies ``depth`` loops deep (None: the innermost) push in the
    gradient of ``f`` at ``args`` (else ``_args(f)``)."""
    ir = pb.jit(pb.grad(f, argnums=(0, 1))).lower(*(args or _args(f))).ir
    bodies = list(_loops(ir.block))
    depth = max(d for _, d in bodies) if depth is None else depth
    return [e.inputs[1] for body, d in bodies if d == depth for e in body.eqns
            if e.op.name == "stack_push"]


@pytest.mark.parametrize("f", [heat_copy, heat_2d], ids=lambda f: f.__name__)
def test_an_inner_iteration_pushes_nothing(f):
    """The stencil's inner iteration saves nothing: the Laplacian at i that the
    derivative in alpha needs is read again from the step's array, which the time loop
    pushes once per step; the indices i - 1, i, i + 1 are recomputed from i."""
    assert _pushed(f, None) == []
    assert [v.type.shape for v in _pushed(f, 1)] == [_args(f)[0].shape]


def test_an_array_updated_in_place_is_not_read_again():
    """Where the loop updates the array it reads (``u[i + 1]`` of ``heat_inplace``),
    the backward cannot read it again: the iteration pushes the one scalar it needs."""
    assert [v.type.shape for v in _pushed(heat_inplace, None)] == [()]


def few_reads(x, alpha):
    s = 0.0
    y = x
    for _ in range(2):
        y = y * alpha
        for i in range(3):
            s = s + np.sin(y[i] * y[i + 1])
    return s


def test_a_loop_reading_few_elements_of_a_large_array_pushes_them():
    """Reading ``y[i]`` again would cost pushing all of ``y`` per time step for three
    reads: the inner iteration pushes its scalars instead, and the gradient is right."""
    x = np.linspace(0.1, 1.0, 100)
    inner = _pushed(few_reads, None, (x, 0.9))
    assert inner and all(v.type.shape == () for v in inner)
    gx, ga = pb.jit(pb.grad(few_reads, argnums=(0, 1)), backend="c")(x, 0.9)
    eps = 1e-6
    e = np.zeros_like(x)
    for k in range(5):
        e[:] = 0.0
        e[k] = eps
        assert abs(gx[k] - (few_reads(x + e, 0.9) - few_reads(x - e, 0.9)) / (2 * eps)) < 1e-7
    assert abs(ga - (few_reads(x, 0.9 + eps) - few_reads(x, 0.9 - eps)) / (2 * eps)) < 1e-7


_WHOLE = re.compile(r"\balloc |= copy |\bkernel\b")


_HEAD = re.compile(r"\s*for it\d+")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _inside_a_loop(lines: list[str], k: int) -> bool:
    """Whether line ``k`` of the printed loop IR is inside a ``for it`` loop."""
    level = _indent(lines[k])
    for ln in reversed(lines[:k]):
        if ln.strip() and _indent(ln) < level:
            if _HEAD.match(ln):
                return True
            level = _indent(ln)
    return False


def _nested_loop_bodies(text: str):
    """Per ``for it`` loop of the printed loop IR nested in another: its own
    statements (those of loops inside it left out)."""
    lines = text.splitlines()
    for k, head in enumerate(lines):
        if not _HEAD.match(head) or not _inside_a_loop(lines, k):
            continue
        own, skip = [], None
        for ln in lines[k + 1:]:
            if ln.strip() and _indent(ln) <= _indent(head):
                break
            if skip is not None and _indent(ln) > skip:
                continue
            skip = _indent(ln) if _HEAD.match(ln) else None
            own.append(ln)
        yield head, own


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_no_whole_array_work_per_inner_iteration(f):
    """Forward and backward: a loop inside the time loop updates its arrays one
    element at a time in place: no buffer allocated, copied or swept per iteration
    (an update's cotangent read after its window was zeroed, an array read through a
    slice elsewhere, a loop-invariant array's cotangent returned and added: each made
    the gradient's cost grow with n per element)."""
    for g in (f, pb.grad(f, argnums=(0, 1))):
        text = pb.jit(g, backend="c").lower(*_args(f)).loops
        for head, own in _nested_loop_bodies(text):
            assert not any(_WHOLE.search(ln) for ln in own), (head, own)
