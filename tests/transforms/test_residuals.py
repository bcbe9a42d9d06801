"""What reverse mode saves per loop iteration: only what the backward pass reads.
Values invariant in the loop are read outside it, and derivatives the rules compute
for constants (which nobody reads) cost no push."""

from __future__ import annotations

import math

import numpy as np

import pullback as pb


def euler(a, x0):
    x = x0
    for i in range(50):
        x = x + 0.01 * (x * -a + math.sin(i * 0.01))
    return x


def _pushes_in_loops(func) -> int:
    return sum(e.op.name == "stack_push" for e in func.block.walk())


def _central(f, a, x0, h=1e-6):
    return ((f(a + h, x0) - f(a - h, x0)) / (2 * h), (f(a, x0 + h) - f(a, x0 - h)) / (2 * h))


def test_one_push_per_iteration_and_exact_gradient():
    grad = pb.grad(euler, argnums=(0, 1))
    ir = pb.make_ir(grad)(1.5, 0.7)
    # the old x (for d/da); -a is read outside the loop; 0.01 and sin need nothing
    assert _pushes_in_loops(ir) == 1, ir
    got = pb.jit(grad)(1.5, 0.7)
    np.testing.assert_allclose(got, _central(euler, 1.5, 0.7), rtol=1e-7)
