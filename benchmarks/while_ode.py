"""Gradient through an adaptive-step ODE solver: a Python ``while`` on the data.

    dy/dt = -k y (1 - y) + sin(t),  t in [0, 10],  y in R^1000 (float32),  k = 3

Adaptive Heun-Euler pair: a step is accepted when the scaled error is <= 1, and the step
size follows the error, so the number of steps (about 1360 at rtol = atol = 1e-5; 1e-4
with --quick) depends on the data.  The step-size control is not differentiated
(``pb.stop_gradient``).  Loss = sum(y(10)); the gradient is with respect to k and y0.

The float64 reference is the same solver in float64 carrying forward-mode tangents; the
float32 solvers may accept a slightly different sequence of steps, so errors of the
order of the tolerance are expected.

Peers: JAX cannot differentiate ``lax.while_loop`` in reverse mode (its row says so);
it runs the adaptive solver forward only, and the gradient of a fixed-step solver with
the same number of steps through ``lax.scan`` (a different discretisation, checked
against its own float64 reference).  NumPy and torch run the Python loop as written.

    python benchmarks/while_ode.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import math

import _harness as H

args = H.setup("while_ode")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

N, K, T_END, H0 = 1000, 3.0, 10.0, 1e-2
RTOL = ATOL = 1e-4 if args.quick else 1e-5
rng = np.random.default_rng(0)
Y0 = rng.uniform(-0.5, 0.5, N).astype(np.float32)
K32 = np.float32(K)


def solve(k, y0):
    t, h, y = 0.0, H0, y0
    while T_END - t > 1e-9:
        h = min(h, T_END - t)
        f0 = -k * y * (1 - y) + math.sin(t)
        ye = y + h * f0
        f1 = -k * ye * (1 - ye) + math.sin(t + h)
        yn = y + 0.5 * h * (f0 + f1)
        err = float(pb.stop_gradient(np.max(np.abs(yn - ye) / (ATOL + RTOL * np.abs(yn)))))
        if err <= 1.0:
            t, y = t + h, yn
        h = h * (min(5.0, max(0.2, 0.9 * err ** -0.5)) if err > 0 else 5.0)
    return np.sum(y)


def reference(k, y0, steps=None):
    """The solver in float64 with tangents for dk and dy0 (its Jacobian is diagonal, so
    one all-ones tangent gives the gradient); fixed steps when ``steps`` is given.
    Returns (loss, dloss/dk, dloss/dy0, accepted steps)."""
    t, h, y = 0.0, (T_END / steps if steps else H0), y0.astype(np.float64)
    dk, dy, accepted = np.zeros(N), np.ones(N), 0

    def rhs(t, y):
        return -k * y * (1 - y) + math.sin(t)

    def tangent(y, dk, dy):  # d rhs for a tangent (dk_k = 1, dy) of (k, y)
        return -y * (1 - y) * dk - k * (1 - 2 * y) * dy

    while T_END - t > 1e-9:
        h = h if steps else min(h, T_END - t)
        f0 = rhs(t, y)
        ye = y + h * f0
        f1 = rhs(t + h, ye)
        yn = y + 0.5 * h * (f0 + f1)
        err = 0.0 if steps else float(np.max(np.abs(yn - ye) / (ATOL + RTOL * np.abs(yn))))
        if err <= 1.0:
            for d, kk in ((dk, 1.0), (dy, 0.0)):
                g0 = tangent(y, kk, d)
                g1 = tangent(ye, kk, d + h * g0)
                d += 0.5 * h * (g0 + g1)
            t, y, accepted = t + h, yn, accepted + 1
        if not steps:
            h = h * (min(5.0, max(0.2, 0.9 * err ** -0.5)) if err > 0 else 5.0)
    return float(np.sum(y)), float(np.sum(dk)), dy, accepted


REF = reference(K, Y0)
STEPS = REF[3]
REF_FIXED = reference(K, Y0, steps=STEPS)


def err_fwd(loss):
    return H.relerr(loss, REF[0])


def err_vg(out, ref=REF):
    loss, (gk, gy0) = out
    return max(H.relerr(loss, ref[0]), H.relerr(gk, ref[1]), H.relerr(gy0, ref[2]))


# ------------------------------------------------------------------ pullback
H.measure_pullback(solve, (K32, Y0), (0, 1), err_fwd, err_vg)

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    H.measure("numpy (the same source, Python while)", "fwd", lambda: solve(K32, Y0),
              check=err_fwd, min_reps=3)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    H.warm("jax")

    def j_step(t, y, h, k):
        f0 = -k * y * (1 - y) + jnp.sin(t)
        ye = y + h * f0
        f1 = -k * ye * (1 - ye) + jnp.sin(t + h)
        yn = y + 0.5 * h * (f0 + f1)
        return yn, ye

    def j_adaptive(k, y0):
        def body(state):
            t, y, h = state
            h = jnp.minimum(h, T_END - t)
            yn, ye = j_step(t, y, h, k)
            err = jax.lax.stop_gradient(jnp.max(jnp.abs(yn - ye) / (ATOL + RTOL * jnp.abs(yn))))
            ok = err <= 1.0
            grow = jnp.where(err > 0, jnp.clip(0.9 * err ** -0.5, 0.2, 5.0), 5.0)
            return jnp.where(ok, t + h, t), jnp.where(ok, yn, y), h * grow

        state = (jnp.float32(0), y0, jnp.float32(H0))
        return jnp.sum(jax.lax.while_loop(lambda s: T_END - s[0] > 1e-6, body, state)[1])

    def j_fixed(k, y0):
        h = T_END / STEPS

        def body(y, i):
            return j_step(i * h, y, h, k)[0], None

        return jnp.sum(jax.lax.scan(body, y0, jnp.arange(STEPS, dtype=jnp.float32))[0])

    kj, y0j = jnp.float32(K), jax.device_put(Y0)
    fwd = jax.jit(j_adaptive)
    H.measure("jax.jit lax.while_loop (adaptive)", "fwd",
              lambda: jax.block_until_ready(fwd(kj, y0j)), check=err_fwd)
    vg = jax.jit(jax.value_and_grad(j_adaptive, argnums=(0, 1)))
    H.measure("jax.jit value_and_grad(lax.while_loop)", "val+grad",
              lambda: jax.block_until_ready(vg(kj, y0j)), check=err_vg)
    fixed = jax.jit(jax.value_and_grad(j_fixed, argnums=(0, 1)))
    H.measure(f"jax.jit lax.scan, fixed {STEPS} steps", "val+grad",
              lambda: jax.block_until_ready(fixed(kj, y0j)),
              check=lambda out: err_vg(out, REF_FIXED),
              note="different discretisation; error against its own float64 reference")
    fixed_f = jax.jit(j_fixed)
    fixed_g = jax.jit(jax.grad(j_fixed, argnums=(0, 1)))
    H.measure(f"jax.jit lax.scan, fixed {STEPS} steps, forward and grad called separately",
              "val+grad", lambda: jax.block_until_ready((fixed_f(kj, y0j), fixed_g(kj, y0j))),
              check=lambda out: err_vg(out, REF_FIXED),
              note="different discretisation; error against its own float64 reference")

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") else None
if torch is not None:
    H.pin_torch(torch)

    def t_solve(k, y0):
        t, h, y = 0.0, H0, y0
        while T_END - t > 1e-9:
            h = min(h, T_END - t)
            f0 = -k * y * (1 - y) + math.sin(t)
            ye = y + h * f0
            f1 = -k * ye * (1 - ye) + math.sin(t + h)
            yn = y + 0.5 * h * (f0 + f1)
            err = ((yn - ye).abs() / (ATOL + RTOL * yn.abs())).max().item()
            if err <= 1.0:
                t, y = t + h, yn
            h = h * (min(5.0, max(0.2, 0.9 * err ** -0.5)) if err > 0 else 5.0)
        return y.sum()

    kt, y0t = torch.tensor(K, dtype=torch.float32), torch.from_numpy(Y0.copy())

    def t_fwd():
        with torch.no_grad():
            return t_solve(kt, y0t).item()

    def t_vg():
        k, y0 = kt.clone().requires_grad_(True), y0t.clone().requires_grad_(True)
        loss = t_solve(k, y0)
        gk, gy0 = torch.autograd.grad(loss, (k, y0))
        return loss.item(), (gk.item(), gy0.numpy())

    H.measure("torch eager (Python while)", "fwd", t_fwd, check=err_fwd, min_reps=3)
    H.measure("torch eager (Python while)", "val+grad", t_vg, check=err_vg, min_reps=3)

H.finish(f"ODE N={N} k={K} t in [0, {T_END}] rtol=atol={RTOL} float32; float64 reference: "
         f"{STEPS} accepted steps")
