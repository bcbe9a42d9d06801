"""Newton's method on 100,000 independent scalar problems, each with its own number of
iterations: a data-dependent ``while`` under ``vmap``, float64.

    def newton(a, b):                      # the root of x**3 + a x - b, from x = 1
        x, n = 1.0, 0
        while abs(x**3 + a*x - b) > TOL * (1 + abs(b)) and n < CAP:
            x = x - (x**3 + a*x - b) / (3*x*x + a);  n += 1
        return x

with a in [0.5, 4] and b in [-100, 100], so lanes take 2 to 10 iterations.  Rows:
``fwd``, the roots, ``pb.vmap(newton)``; ``val+grad``, the roots and d root / d (a, b)
per lane, ``pb.vmap(pb.value_and_grad(newton, (0, 1)))``; ``grad``, the derivatives
alone, ``pb.vmap(pb.grad(newton, (0, 1)))``; ``grad(sum)``, the same derivatives as the
gradient of ``pb.vmap(newton)(a, b).sum()``.  pullback differentiates the iterations.

The float64 reference is the NumPy masked loop below and the implicit function theorem
at its roots, d x / d a = -x / (3x^2 + a), d x / d b = 1 / (3x^2 + a), which the
differentiated iterations reach once converged.

Peers: the same loop in NumPy on every lane at once, masking converged lanes (``fwd``;
``val+grad`` with the implicit-function-theorem derivatives by hand), and
``jax.jit(jax.vmap(newton))`` with ``lax.while_loop`` (``fwd``; JAX refuses reverse mode
through ``while_loop``, its ``val+grad`` row says so).  torch's ``vmap`` does not take
data-dependent control flow.  The summary compares pullback's ``val+grad`` with JAX's
``fwd``.

    python benchmarks/batched_newton.py [--quick] [--threads 1|2|both] [--only SYSTEMS]
                                        [--json PATH]
"""

import _harness as H

args = H.setup("batched_newton")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

N, TOL, CAP = 100_000, 1e-12, 50
rng = np.random.default_rng(0)
A = rng.uniform(0.5, 4.0, N)
B = rng.uniform(-100.0, 100.0, N)


def newton_count(a, b):
    """The root and the number of iterations it took."""
    x, n = 1.0, 0
    while abs(x**3 + a * x - b) > TOL * (1 + abs(b)) and n < CAP:
        x = x - (x**3 + a * x - b) / (3 * x * x + a)
        n = n + 1
    return x, n


def newton(a, b):
    return newton_count(a, b)[0]


def np_newton(a, b):
    """Every lane's root and iteration count, updating only the lanes not converged."""
    x, n = np.ones_like(a), np.zeros(a.shape, np.int64)
    active = np.ones(a.shape, bool)
    while active.any():
        r = x**3 + a * x - b
        active &= (np.abs(r) > TOL * (1 + np.abs(b))) & (n < CAP)
        x = np.where(active, x - r / (3 * x * x + a), x)
        n += active
    return x, n


def np_value_and_grad(a, b):
    """The roots and, by the implicit function theorem, their derivatives."""
    x = np_newton(a, b)[0]
    den = 3 * x * x + a
    return x, (-x / den, 1 / den)


REF_X, COUNTS = np_newton(A, B)
REF_G = np_value_and_grad(A, B)[1]


def err_fwd(x):
    return H.relerr(x, REF_X)


def err_grad(grads):
    return max(H.relerr(g, r) for g, r in zip(grads, REF_G, strict=True))


def err_vg(out):
    return max(err_fwd(out[0]), err_grad(out[1]))


# ------------------------------------------------------------------ pullback
H.warm("pullback")


def pb_row(what, fn, check, source):
    compiled = pb.jit(fn, backend="c")
    return H.measure("pullback jit", what, lambda: compiled(A, B), check=check,
                     kind="pullback", note=source)


if H.want("pullback"):
    pb_counts = pb.jit(pb.vmap(newton_count), backend="c")(A, B)[1]
    H.note(f"iterations per lane: {COUNTS.min()} to {COUNTS.max()}, "
           f"{len(np.unique(COUNTS))} distinct counts, mean {COUNTS.mean():.2f}; "
           f"pullback's counts equal NumPy's in {np.mean(pb_counts == COUNTS):.2%} of lanes")
pb_vg = pb_row("val+grad", pb.vmap(pb.value_and_grad(newton, (0, 1))), err_vg,
               "vmap(value_and_grad(newton))")
pb_row("fwd", pb.vmap(newton), err_fwd, "vmap(newton)")
pb_row("grad", pb.vmap(pb.grad(newton, (0, 1))), err_grad, "vmap(grad(newton))")


def grad_of_sum(a, b):
    return pb.grad(lambda a, b: pb.vmap(newton)(a, b).sum(), (0, 1))(a, b)


pb_row("grad(sum)", grad_of_sum, err_grad, "grad(vmap(newton)(a, b).sum())")

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    H.measure("numpy masked loop", "fwd", lambda: np_newton(A, B)[0], check=err_fwd)
    H.measure("numpy masked loop + implicit derivatives", "val+grad",
              lambda: np_value_and_grad(A, B), check=err_vg)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    H.warm("jax")

    def j_newton(a, b):
        def residual(x):
            return x**3 + a * x - b

        def cond(state):
            x, n = state
            return (jnp.abs(residual(x)) > TOL * (1 + jnp.abs(b))) & (n < CAP)

        def body(state):
            x, n = state
            return x - residual(x) / (3 * x * x + a), n + 1

        return jax.lax.while_loop(cond, body, (jnp.ones_like(a), 0))[0]

    Aj, Bj = jax.device_put(A), jax.device_put(B)
    j_fwd = jax.jit(jax.vmap(j_newton))
    jax_fwd = H.measure("jax.jit(vmap(lax.while_loop))", "fwd",
                        lambda: jax.block_until_ready(j_fwd(Aj, Bj)), check=err_fwd)
    j_vg = jax.jit(jax.vmap(jax.value_and_grad(j_newton, (0, 1))))
    H.measure("jax.jit(vmap(value_and_grad(lax.while_loop)))", "val+grad",
              lambda: jax.block_until_ready(j_vg(Aj, Bj)), check=err_vg)
    if pb_vg.get("median_s") and jax_fwd.get("median_s"):
        H.note(f"pullback val+grad / jax fwd = {pb_vg['median_s'] / jax_fwd['median_s']:.2f}")

H.finish(f"Newton on x^3 + a x - b, {N} lanes, float64, tolerance {TOL} (1 + |b|), "
         f"at most {CAP} iterations")
