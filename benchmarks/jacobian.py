"""The 256 x 256 Jacobian of a stack of three 256 -> 256 tanh layers with respect to the
input vector, float64:

    def f(x, ws, bs):
        for w, b in zip(ws, bs):
            x = np.tanh(w @ x + b)
        return x

by ``pb.jacrev`` and ``pb.jacfwd``, and by what JAX's ``jacrev`` / ``jacfwd`` are, the
map of a ``vjp`` over the rows of the identity or of a ``jvp`` over its columns:
``pb.vmap(vjp_fn)(eye)``, ``pb.vmap(jvp of f, out_axes=1)(eye)``.  The float64 reference
is the chain rule by hand, J = diag(1 - x3^2) W3 diag(1 - x2^2) W2 diag(1 - x1^2) W1.

Peers: ``jax.jit(jax.jacrev(f))``, ``jax.jit(jax.jacfwd(f))``, ``torch.func.jacrev`` and
``torch.func.jacfwd`` (eager), and that chain rule in NumPy, accumulated from the input
(``jacfwd``) or from the output (``jacrev``).  Bound: its two 256 x 256 x 256 matrix
products alone in OpenBLAS (NumPy ``matmul`` with ``out=``).

    python benchmarks/jacobian.py [--quick] [--threads 1|2|both] [--only SYSTEMS]
                                  [--json PATH]
"""

import _harness as H

args = H.setup("jacobian", unit="us")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

D, LAYERS = 256, 3
rng = np.random.default_rng(0)
WS = [rng.standard_normal((D, D)) / np.sqrt(D) for _ in range(LAYERS)]
BS = [0.1 * rng.standard_normal(D) for _ in range(LAYERS)]
X0 = rng.standard_normal(D)
EYE = np.eye(D)


def f(x, ws, bs):
    for w, b in zip(ws, bs, strict=True):
        x = np.tanh(w @ x + b)
    return x


def np_jacobian(x, ws, bs, forward):
    """The chain rule, each layer's factor diag(1 - x^2) W, multiplied from the input
    side (forward) or from the output side."""
    factors = []
    for w, b in zip(ws, bs, strict=True):
        x = np.tanh(w @ x + b)
        factors.append((1 - x * x)[:, None] * w)
    if forward:
        jac = factors[0]
        for m in factors[1:]:
            jac = m @ jac
        return jac
    jac = factors[-1]
    for m in factors[-2::-1]:
        jac = jac @ m
    return jac


REF = np_jacobian(X0, WS, BS, forward=True)


def err(jac):
    return H.relerr(jac, REF)


def pb_jacrev_vmap(x, ws, bs):
    _, pull = pb.vjp(lambda v: f(v, ws, bs), x)
    return pb.vmap(lambda row: pull(row)[0])(EYE)


def pb_jacfwd_vmap(x, ws, bs):
    def column(t):
        return pb.jvp(lambda v: f(v, ws, bs), (x,), (t,))[1]

    return pb.vmap(column, out_axes=1)(EYE)


# ------------------------------------------------------------------ bound
OUT = [np.empty((D, D)), np.empty((D, D))]


def gemms():
    np.matmul(WS[1], WS[0], out=OUT[0])
    np.matmul(WS[2], OUT[0], out=OUT[1])


gemm_row = H.measure("numpy matmul: 2 GEMMs 256^3", "jacrev", gemms, kind="bound")
H.record(gemm_row["system"], "jacfwd", kind="bound", first_s=gemm_row["first_s"],
         median_s=gemm_row["median_s"], min_s=gemm_row["min_s"], reps=gemm_row["reps"],
         contention=gemm_row["contention"])

# ------------------------------------------------------------------ pullback
H.warm("pullback")


def pb_row(what, fn, source):
    compiled = pb.jit(fn, backend="c")
    return H.measure(f"pullback {source}", what, lambda: compiled(X0, WS, BS), check=err,
                     kind="pullback")


pb_row("jacrev", pb.jacrev(f), "jit(jacrev(f))")
pb_row("jacfwd", pb.jacfwd(f), "jit(jacfwd(f))")
vmapped = {"jacrev": pb_row("jacrev", pb_jacrev_vmap, "jit(vmap(vjp_fn)(eye))"),
           "jacfwd": pb_row("jacfwd", pb_jacfwd_vmap, "jit(vmap(jvp, out_axes=1)(eye))")}

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    for what in ("jacrev", "jacfwd"):
        H.measure("numpy (chain rule by hand)", what,
                  lambda w=what: np_jacobian(X0, WS, BS, forward=w == "jacfwd"), check=err)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    H.warm("jax")

    def jf(x, ws, bs):
        for w, b in zip(ws, bs, strict=True):
            x = jnp.tanh(w @ x + b)
        return x

    Xj, Wj, Bj = jax.device_put(X0), jax.device_put(WS), jax.device_put(BS)
    for what, transform in (("jacrev", jax.jacrev), ("jacfwd", jax.jacfwd)):
        compiled = jax.jit(transform(jf))
        row = H.measure(f"jax.jit({what}(f))", what,
                        lambda c=compiled: jax.block_until_ready(c(Xj, Wj, Bj)), check=err)
        ours = vmapped[what]
        if row.get("median_s") and ours.get("median_s"):
            H.note(f"{what}: {ours['system']} / {row['system']} = "
                   f"{ours['median_s'] / row['median_s']:.2f}")

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") else None
if torch is not None:
    H.pin_torch(torch)

    def tf(x, ws, bs):
        for w, b in zip(ws, bs, strict=True):
            x = torch.tanh(w @ x + b)
        return x

    Xt, Wt, Bt = torch.from_numpy(X0), [torch.from_numpy(w) for w in WS], \
        [torch.from_numpy(b) for b in BS]
    for what, transform in (("jacrev", torch.func.jacrev), ("jacfwd", torch.func.jacfwd)):
        jac = transform(tf)
        H.measure(f"torch.func.{what}(f)", what, lambda j=jac: j(Xt, Wt, Bt).numpy(), check=err)

H.finish(f"Jacobian of {LAYERS} tanh layers {D} -> {D} w.r.t. the input, float64")
