"""An explicit heat-equation solver written as a new user writes it: scalar index loops
over the elements, a fresh buffer per time step, float64, n = 1000 points and 500 steps
(200 and 100 with ``--quick``):

    def heat(u0, alpha):
        u = u0.copy()
        n = u.shape[0]
        for t in range(STEPS):
            new = u.copy()
            for i in range(1, n - 1):
                new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])
            u = new
        return np.sum(u * u)

Forward, gradient with respect to (u0, alpha) by ``pb.jit(pb.grad(heat))`` and
``pb.grad(pb.jit(heat))``, value and gradient; the note gives pullback's gradient /
forward ratio (reverse-mode tools such as Enzyme report 2-5x on such code).  Peers: JAX
written the same way (``lax.fori_loop`` over the elements with ``.at[i].set``) and
vectorised (slices), NumPy vectorised (forward; the gradient by hand, the reverse sweep
of the stencil with each step's state kept), which is also the float64 reference.

    python benchmarks/heat.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import _harness as H

args = H.setup("heat", default_threads="1")  # scalar loops: one thread is the case

import numpy as np  # noqa: E402

N, STEPS = (200, 100) if H.quick() else (1000, 500)
U0 = np.sin(np.linspace(0.0, 3.0, N)) + 0.1 * np.cos(np.linspace(0.0, 40.0, N))
ALPHA = 0.2


def heat(u0, alpha):
    u = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        new = u.copy()
        for i in range(1, n - 1):
            new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = new
    return np.sum(u * u)


def np_heat(u0, alpha):
    u = u0.copy()
    for _ in range(STEPS):
        u[1:-1] += alpha * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    return np.sum(u * u)


def np_value_and_grad(u0, alpha):
    """The reverse sweep by hand: each step's state kept, then the stencil's transpose
    applied from the last step back."""
    states = [u0]
    for _ in range(STEPS):
        u = states[-1].copy()
        u[1:-1] += alpha * (states[-1][:-2] - 2.0 * states[-1][1:-1] + states[-1][2:])
        states.append(u)
    g = 2.0 * states[-1]
    ga = 0.0
    for u in reversed(states[:-1]):
        inner = g[1:-1]
        ga += inner @ (u[:-2] - 2.0 * u[1:-1] + u[2:])
        scaled = alpha * inner
        g = g.copy()
        g[1:-1] -= 2.0 * scaled
        g[:-2] += scaled
        g[2:] += scaled
    return np.sum(states[-1] ** 2), (g, ga)


REF_F, REF_G = np_value_and_grad(U0, ALPHA)
_H = 1e-6
assert abs((np_heat(U0, ALPHA + _H) - np_heat(U0, ALPHA - _H)) / (2 * _H) - REF_G[1]) < \
    1e-6 * max(1.0, abs(REF_G[1])), "the gradient by hand disagrees with central differences"


def err_fwd(value):
    return H.relerr(value, REF_F)


def err_grad(out):
    return max(H.relerr(out[0], REF_G[0]), H.relerr(out[1], REF_G[1]))


def err_vg(out):
    return max(err_fwd(out[0]), err_grad(out[1]))


# ------------------------------------------------------------------ pullback
import pullback as pb  # noqa: E402

H.warm("pullback")
fwd = pb.jit(heat, backend="c")
vg = pb.jit(pb.value_and_grad(heat, argnums=(0, 1)), backend="c")
fwd_row = H.measure("pullback jit(backend=c)", "fwd", lambda: fwd(U0, ALPHA), check=err_fwd,
                    kind="pullback")
for source, fn in (("jit(grad(heat))", pb.jit(pb.grad(heat, argnums=(0, 1)), backend="c")),
                   ("grad(jit(heat))", pb.grad(pb.jit(heat, backend="c"), argnums=(0, 1)))):
    row = H.measure(f"pullback {source}", "grad", lambda f=fn: f(U0, ALPHA), check=err_grad,
                    kind="pullback")
    if fwd_row.get("median_s") and row.get("median_s"):
        H.note(f"pullback {source} / its forward: {row['median_s'] / fwd_row['median_s']:.1f}x "
               f"(medians), {row['min_s'] / fwd_row['min_s']:.1f}x (minima)")
H.measure("pullback jit(backend=c)", "val+grad", lambda: vg(U0, ALPHA), check=err_vg,
          kind="pullback")

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    H.measure("numpy, vectorised (slices)", "fwd", lambda: np_heat(U0, ALPHA), check=err_fwd)
    H.measure("numpy, vectorised, reverse sweep by hand", "val+grad",
              lambda: np_value_and_grad(U0, ALPHA), check=err_vg)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    H.warm("jax")

    def j_loops(u0, alpha):
        """The same loops: ``lax.fori_loop`` over time and over the elements."""
        n = u0.shape[0]

        def step(_, u):
            def cell(i, new):
                return new.at[i].set(u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1]))

            return jax.lax.fori_loop(1, n - 1, cell, u)

        u = jax.lax.fori_loop(0, STEPS, step, u0)
        return jnp.sum(u * u)

    def j_slices(u0, alpha):
        """As a JAX user would vectorise it: the stencil on slices, time by fori_loop."""
        def step(_, u):
            return u.at[1:-1].add(alpha * (u[:-2] - 2.0 * u[1:-1] + u[2:]))

        u = jax.lax.fori_loop(0, STEPS, step, u0)
        return jnp.sum(u * u)

    uj, aj = jax.device_put(U0), jnp.float64(ALPHA)
    for name, f in (("lax.fori_loop over elements, .at[i].set", j_loops),
                    ("vectorised (slices)", j_slices)):
        for what, fn, check in (
                ("fwd", jax.jit(f), err_fwd),
                ("grad", jax.jit(jax.grad(f, argnums=(0, 1))), err_grad),
                ("val+grad", jax.jit(jax.value_and_grad(f, argnums=(0, 1))), err_vg)):
            H.measure(f"jax.jit {name}", what,
                      lambda g=fn: jax.block_until_ready(g(uj, aj)), check=check)

H.finish(f"heat equation, n = {N} points, {STEPS} steps, float64, alpha = {ALPHA}")
