"""A loop of scalar float64 arithmetic with a branch on the data: 1e5 iterations (1e4
with --quick) of a damped, driven oscillator.

    for i in range(n):
        force = -a x - b v + sin(i dt);  v += dt force;  x += dt v
        acc += x * x if x > 0 else 0.5 x * x
    return acc * dt

Forward against Numba (the same source under ``numba.njit``) and plain Python; value and
gradient with respect to (a, b) against JAX (``lax.fori_loop``, the branch as
``jnp.where``, float64).  The float64 reference gradient is forward mode written by hand.

    python benchmarks/scalar_loop.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import math

import _harness as H

args = H.setup("scalar_loop", default_threads="1")  # scalar code: one thread is the case

N_ITER = 10_000 if args.quick else 100_000
DT = 1e-3
A, B = 4.0, 0.5


def oscillator(a, b):
    x, v, acc = 0.0, 1.0, 0.0
    for i in range(N_ITER):
        force = -a * x - b * v + math.sin(i * DT)
        v = v + DT * force
        x = x + DT * v
        if x > 0:
            acc += x * x
        else:
            acc += 0.5 * x * x
    return acc * DT


def reference(a, b):
    """(value, d/da, d/db) by forward mode written out by hand."""
    x, v, acc = 0.0, 1.0, 0.0
    xa = xb = va = vb = acc_a = acc_b = 0.0
    for i in range(N_ITER):
        force = -a * x - b * v + math.sin(i * DT)
        va, vb = va + DT * (-x - a * xa - b * va), vb + DT * (-a * xb - v - b * vb)
        v = v + DT * force
        xa, xb = xa + DT * va, xb + DT * vb
        x = x + DT * v
        c = 1.0 if x > 0 else 0.5
        acc += c * x * x
        acc_a += 2 * c * x * xa
        acc_b += 2 * c * x * xb
    return acc * DT, acc_a * DT, acc_b * DT


REF = reference(A, B)


def err_fwd(value):
    return H.relerr(value, REF[0])


def err_vg(out):
    """Error of (value, (d/da, d/db)); also takes the flat (value, d/da, d/db)."""
    value, (ga, gb) = (out[0], out[1:]) if len(out) == 3 else out
    return max(H.relerr(value, REF[0]), H.relerr(ga, REF[1]), H.relerr(gb, REF[2]))


# ------------------------------------------------------------------ pullback
H.measure_pullback(oscillator, (A, B), (0, 1), err_fwd, err_vg)

# ------------------------------------------------------------------ Python
if H.want("python"):
    H.measure("plain Python (the same source)", "fwd", lambda: oscillator(A, B),
              check=err_fwd, min_reps=3)
    H.measure("plain Python, forward mode by hand", "val+grad",
              lambda: reference(A, B), check=err_vg, min_reps=3)

# ------------------------------------------------------------------ numba
nb = H.optional("numba") if H.want("numba") else None
if nb is not None:
    H.warm("numba")
    nb_fwd = nb.njit(oscillator)
    nb_ref = nb.njit(reference)
    H.measure("numba njit (the same source)", "fwd", lambda: nb_fwd(A, B), check=err_fwd)
    H.measure("numba njit, forward mode by hand", "val+grad",
              lambda: nb_ref(A, B), check=err_vg)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    H.warm("jax")

    def j_oscillator(a, b):
        def body(i, state):
            x, v, acc = state
            v = v + DT * (-a * x - b * v + jnp.sin(i * DT))
            x = x + DT * v
            return x, v, acc + jnp.where(x > 0, x * x, 0.5 * x * x)

        zero = jnp.float64(0)
        return jax.lax.fori_loop(0, N_ITER, body, (zero, zero + 1, zero))[2] * DT

    aj, bj = jnp.float64(A), jnp.float64(B)
    j_fwd = jax.jit(j_oscillator)
    j_vg = jax.jit(jax.value_and_grad(j_oscillator, argnums=(0, 1)))
    H.measure("jax.jit lax.fori_loop", "fwd", lambda: jax.block_until_ready(j_fwd(aj, bj)),
              check=err_fwd)
    H.measure("jax.jit value_and_grad(lax.fori_loop)", "val+grad",
              lambda: jax.block_until_ready(j_vg(aj, bj)), check=err_vg)
    j_grad = jax.jit(jax.grad(j_oscillator, argnums=(0, 1)))
    H.measure("jax.jit lax.fori_loop and its grad, called separately", "val+grad",
              lambda: jax.block_until_ready((j_fwd(aj, bj), j_grad(aj, bj))), check=err_vg)

H.finish(f"n={N_ITER} iterations, float64 scalars, dt={DT}, a={A}, b={B}")
