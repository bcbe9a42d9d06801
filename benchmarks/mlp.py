"""One SGD step of a 784-1024-1024-10 tanh MLP, softmax cross-entropy, batch 256, float32.

A step computes the loss and its gradient with respect to the six parameters and
returns the updated parameters (lr 0.01); the timed loop feeds them back.  Each row's
error is that system's loss and gradient against a float64 NumPy computation.

Bound: the step's eight matrix products alone (three forward, two per layer backward
except the first layer's input gradient) in OpenBLAS, i.e. NumPy ``matmul`` with ``out=``
buffers on the same shapes and transposes.  The first call of each compiled system is
also reported on its own as ``compile`` (staging/tracing + code generation + one step).
``step (kept)`` holds each step's results (pullback and JAX: the loss and the new
parameters; NumPy and torch update in place: the loss) alive for 30 more steps, as a
training loop that keeps its history would.

    python benchmarks/mlp.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import _harness as H

args = H.setup("mlp")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

B, D0, D1, D2, D3 = 256, 784, 1024, 1024, 10
LR = 0.01
FLOPS = 2 * B * (2 * (D0 * D1 + D1 * D2 + D2 * D3) + D1 * D2 + D2 * D3)

rng = np.random.default_rng(0)
X = rng.standard_normal((B, D0)).astype(np.float32)
Y = rng.integers(0, D3, size=B)
P0 = []
for din, dout in ((D0, D1), (D1, D2), (D2, D3)):
    P0.append((rng.standard_normal((din, dout)) / np.sqrt(din)).astype(np.float32))
    P0.append((0.01 * rng.standard_normal(dout)).astype(np.float32))


def loss(params, x, y):
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    z = h2 @ w3 + b3
    zmax = np.max(z, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(z - zmax), axis=1)) + zmax[:, 0]
    picked = np.take_along_axis(z, y[:, None], axis=1)[:, 0]
    return np.mean(lse - picked)


def sgd_step(params, x, y):
    value, grads = pb.value_and_grad(loss)(params, x, y)
    return value, [p - LR * g for p, g in zip(params, grads, strict=True)]


def np_value_and_grad(params, x, y):
    """The loss and its gradient by hand (dtype follows the inputs)."""
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    z = h2 @ w3 + b3
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(x.shape[0])
    value = np.mean(-np.log(p[rows, y]))
    dz = p
    dz[rows, y] -= 1.0
    dz /= x.shape[0]
    d2 = (dz @ w3.T) * (1 - h2 * h2)
    d1 = (d2 @ w2.T) * (1 - h1 * h1)
    return value, [x.T @ d1, d1.sum(0), h1.T @ d2, d2.sum(0), h2.T @ dz, dz.sum(0)]


REF = np_value_and_grad([p.astype(np.float64) for p in P0], X.astype(np.float64), Y)


def grad_err(value, grads):
    return max([H.relerr(value, REF[0])]
               + [H.relerr(g, r) for g, r in zip(grads, REF[1], strict=True)])


def gflops(row):
    return f"{FLOPS / row['median_s'] / 1e9:.1f} GFLOP/s" if row.get("median_s") else ""


def timed_step(system, step, value_and_grad, kind="peer", compiled=True):
    """Measure ``step()`` (which advances its own state and returns what it made), with
    its results dropped and with the last ``H.KEEP`` kept alive; the error comes from the
    same system's ``value_and_grad()`` at the initial parameters."""
    for keep in (0, H.KEEP):
        row = H.measure(system, "step", step, kind=kind, keep=keep,
                        check=lambda _: grad_err(*value_and_grad()))
        if row["median_s"]:
            row["note"] = f"{gflops(row)} {row['note']}".strip()
        if compiled and row["first_s"]:
            H.record(system, "compile", kind=kind, first_s=row["first_s"],
                     note="first call: compile + one step")


# ------------------------------------------------------------------ bound
h = rng.standard_normal((B, D1)).astype(np.float32)
d = rng.standard_normal((B, D1)).astype(np.float32)
dz = rng.standard_normal((B, D3)).astype(np.float32)
products = [(X, P0[0], np.empty((B, D1), np.float32)), (h, P0[2], np.empty((B, D2), np.float32)),
            (h, P0[4], np.empty((B, D3), np.float32)), (h.T, dz, np.empty((D2, D3), np.float32)),
            (dz, P0[4].T, np.empty((B, D2), np.float32)), (h.T, d, np.empty((D1, D2), np.float32)),
            (d, P0[2].T, np.empty((B, D1), np.float32)), (X.T, d, np.empty((D0, D1), np.float32))]


def gemms():
    for a, b, out in products:
        np.matmul(a, b, out=out)


row = H.measure("numpy matmul: the step's 8 GEMMs", "step", gemms, kind="bound")
row["note"] = gflops(row)
H.record(row["system"], "step (kept)", kind="bound", median_s=row["median_s"],
         min_s=row["min_s"], reps=row["reps"], note=row["note"],
         contention=row["contention"])

# ------------------------------------------------------------------ pullback
H.warm("pullback")
pb_step = pb.jit(sgd_step, backend="c")
pb_state = [p.copy() for p in P0]


def pb_run():
    out = pb_step(pb_state, X, Y)
    pb_state[:] = out[1]
    return out


timed_step("pullback jit(backend=c)", pb_run,
           lambda: pb.jit(pb.value_and_grad(loss), backend="c")(P0, X, Y), kind="pullback")

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    np_state = [p.copy() for p in P0]

    def np_run():
        value, grads = np_value_and_grad(np_state, X, Y)
        for p, g in zip(np_state, grads, strict=True):
            p -= LR * g
        return value

    timed_step("numpy (hand-written backward)", np_run,
               lambda: np_value_and_grad(P0, X, Y), compiled=False)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    H.warm("jax")

    def jloss(params, x, y):
        w1, b1, w2, b2, w3, b3 = params
        h1 = jnp.tanh(x @ w1 + b1)
        h2 = jnp.tanh(h1 @ w2 + b2)
        z = h2 @ w3 + b3
        lse = jax.nn.logsumexp(z, axis=1)
        return jnp.mean(lse - jnp.take_along_axis(z, y[:, None], axis=1)[:, 0])

    @jax.jit
    def jstep(params, x, y):
        value, grads = jax.value_and_grad(jloss)(params, x, y)
        return value, [p - LR * g for p, g in zip(params, grads, strict=True)]

    Xj, Yj = jax.device_put(X), jax.device_put(Y)
    j_state = [jax.device_put(p) for p in P0]

    def j_run():
        out = jstep(j_state, Xj, Yj)
        j_state[:] = out[1]
        return jax.block_until_ready(out)

    timed_step("jax.jit(value_and_grad + update)", j_run,
               lambda: jax.jit(jax.value_and_grad(jloss))(P0, Xj, Yj))

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") or H.want("torch.compile") else None
if torch is not None:
    import torch.nn.functional as F

    H.pin_torch(torch)
    Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)

    def tloss(params, x, y):
        w1, b1, w2, b2, w3, b3 = params
        h1 = torch.tanh(x @ w1 + b1)
        h2 = torch.tanh(h1 @ w2 + b2)
        return F.cross_entropy(h2 @ w3 + b3, y)

    def torch_rows(system, fn, compiled):
        t_state = [torch.tensor(p, requires_grad=True) for p in P0]

        def t_run():
            value = fn(t_state, Xt, Yt)
            value.backward()
            with torch.no_grad():
                for p in t_state:
                    p -= LR * p.grad
                    p.grad = None
            return value

        def t_vg():
            params = [torch.tensor(p, requires_grad=True) for p in P0]
            value = fn(params, Xt, Yt)
            return value.item(), [g.numpy() for g in torch.autograd.grad(value, params)]

        timed_step(system, t_run, t_vg, compiled=compiled)

    if H.want("torch"):
        torch_rows("torch eager", tloss, False)
    if H.want("torch.compile") and not H.quick():
        H.warm("torch.compile")
        torch_rows("torch.compile(loss), eager update", torch.compile(tloss), True)

H.finish(f"MLP {D0}-{D1}-{D2}-{D3} tanh, batch {B}, softmax CE, SGD lr={LR}, float32; "
         f"{FLOPS / 1e9:.2f} GFLOP of matrix products per step")
