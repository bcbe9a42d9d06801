"""What reverse mode saves per loop iteration: only what the backward pass reads.
Values invariant in the loop are read outside it, and derivatives the rules compute
for constants (which nobody reads) cost no push.  (``pb.jacrev`` asks for reverse mode:
``pb.grad`` of a scalar loop with respect to a few scalars runs forward mode.)"""

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
    grad = pb.jacrev(euler, argnums=(0, 1))
    ir = pb.make_ir(grad)(1.5, 0.7)
    # the old x (for d/da); -a is read outside the loop; 0.01 and sin need nothing
    assert _pushes_in_loops(ir) == 1, ir
    got = pb.jit(grad)(1.5, 0.7)
    np.testing.assert_allclose(got, _central(euler, 1.5, 0.7), rtol=1e-7)


def test_grad_of_a_scalar_loop_runs_forward_mode_without_a_tape():
    """Two scalar parameters: two forward-mode lanes beside the primal, no pushes, the
    same gradient as reverse mode to rounding."""
    ir = pb.make_ir(pb.grad(euler, argnums=(0, 1)))(1.5, 0.7)
    assert not any(e.op.name.startswith("stack_") for e in ir.block.walk()), ir
    got = pb.jit(pb.value_and_grad(euler, argnums=(0, 1)))(1.5, 0.7)
    assert got[0] == euler(1.5, 0.7)
    np.testing.assert_allclose(got[1], pb.jacrev(euler, argnums=(0, 1))(1.5, 0.7),
                               rtol=1e-13)
    np.testing.assert_allclose(got[1], _central(euler, 1.5, 0.7), rtol=1e-7)


def _heun_step(k, y, t, h):
    f0 = -k * y * (1 - y) + math.sin(t)
    ye = y + h * f0
    f1 = -k * ye * (1 - ye) + math.sin(t + h)
    return ye, y + 0.5 * h * (f0 + f1)


def heun(k, y0):
    """Adaptive Heun steps whose step control is held constant (``stop_gradient``)."""
    t, h, y = 0.0, 0.05, y0
    while t < 1.0:
        ye, yn = _heun_step(k, y, t, h)
        err = float(pb.stop_gradient(np.max(np.abs(yn - ye))))
        if err <= 1e-3:
            t += h
            y = yn
        h = h * min(2.0, max(0.5, 0.9 * (1e-3 / (err + 1e-12)) ** 0.5))
    return np.sum(y * y)


def _schedule(k, y0):
    """The accepted steps (t, h) plain Python takes: what the gradient holds fixed."""
    t, h, y, steps = 0.0, 0.05, y0, []
    while t < 1.0:
        ye, yn = _heun_step(k, y, t, h)
        err = float(np.max(np.abs(yn - ye)))
        if err <= 1e-3:
            steps.append((t, h))
            t += h
            y = yn
        h = h * min(2.0, max(0.5, 0.9 * (1e-3 / (err + 1e-12)) ** 0.5))
    return steps


def _replay(k, y0, steps):
    y = y0
    for t, h in steps:
        y = _heun_step(k, y, t, h)[1]
    return np.sum(y * y)


def _arrays_pushed(func) -> list:
    return [e.inputs[1].type for e in func.block.walk()
            if e.op.name == "stack_push" and e.inputs[1].type.shape != ()]


def test_arrays_of_cheap_steps_are_recomputed_not_pushed():
    y0 = np.linspace(-0.4, 0.4, 16)
    grad = pb.grad(heun, argnums=(0, 1))
    ir = pb.make_ir(grad)(2.0, y0)
    # y at the start of a step; ye, f0, f1, yn and their pieces are recomputed from it
    assert len(_arrays_pushed(ir)) == 1, ir
    gk, gy = pb.jit(grad)(2.0, y0)
    steps, h = _schedule(2.0, y0), 1e-6
    assert len(steps) > 10
    np.testing.assert_allclose(
        gk, (_replay(2.0 + h, y0, steps) - _replay(2.0 - h, y0, steps)) / (2 * h), rtol=1e-6)
    fd = [(_replay(2.0, y0 + h * e, steps) - _replay(2.0, y0 - h * e, steps)) / (2 * h)
          for e in np.eye(16)]
    np.testing.assert_allclose(gy, fd, rtol=1e-6, atol=1e-9)


def rnn(wx, wh, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh)
    return np.sum(h * h)


def test_a_carried_value_is_pushed_once_not_as_old_and_new():
    """The backward reads h before and after each step (for d/dwh and tanh's derivative):
    the new h is the next step's old one, so only the old is pushed; xs[t] is sliced
    from xs again."""
    rng = np.random.default_rng(0)
    wx, wh = rng.standard_normal((3, 4)) * 0.5, rng.standard_normal((4, 4)) * 0.5
    xs, h0 = rng.standard_normal((6, 2, 3)), rng.standard_normal((2, 4))
    grad = pb.grad(rnn, argnums=(0, 1, 3))
    assert [t.shape for t in _arrays_pushed(pb.make_ir(grad)(wx, wh, xs, h0))] == [(2, 4)]
    got = pb.jit(grad)(wx, wh, xs, h0)
    h = 1e-6
    for k, x in zip((0, 1, 3), got, strict=True):
        args = [wx, wh, xs, h0]
        fd = np.zeros_like(args[k])
        for i in np.ndindex(fd.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[k][i] += h
            down[k][i] -= h
            fd[i] = (rnn(*up) - rnn(*down)) / (2 * h)
        np.testing.assert_allclose(x, fd, rtol=1e-6, atol=1e-9)
