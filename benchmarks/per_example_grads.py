"""Per-example gradients of a 784-512-10 tanh MLP, softmax cross-entropy, batch 256
(64 with --quick), float32: one gradient of the four parameters per example,

    pb.jit(pb.vmap(pb.grad(loss), in_axes=(None, 0, 0)))

where ``loss(params, x, y)`` is written for one example.  The result is 4 B (784 * 512 +
512 + 512 * 10 + 10) bytes (417 MB at B = 256), so writing it costs more than the
arithmetic.  Each row's error is its gradients of 8 examples spread over the batch
against a float64 NumPy computation by hand.

Bounds: the products alone, into ``out=`` buffers: the forward and backward matrix
products in OpenBLAS (NumPy ``matmul``), and the per-example outer products that are the
weight gradients as broadcast NumPy multiplies (OpenBLAS's batched products with an
inner dimension of 1 are slower); and writing the result once (``ndarray.fill`` of
buffers of its size).

    python benchmarks/per_example_grads.py [--quick] [--threads 1|2|both] [--only SYSTEMS]
                                           [--json PATH]
"""

import _harness as H

args = H.setup("per_example_grads")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

B = 64 if args.quick else 256
D0, D1, D2 = 784, 512, 10
# forward and backward products (2 flops per multiply-add), outer products (1 per element)
FLOPS = 2 * B * (D0 * D1 + 2 * D1 * D2) + B * (D0 * D1 + D1 * D2)
CHECK = np.linspace(0, B - 1, 8).astype(int)  # the examples whose gradients are checked

rng = np.random.default_rng(0)
X = rng.standard_normal((B, D0)).astype(np.float32)
Y = rng.integers(0, D2, size=B)
P0 = [(rng.standard_normal((D0, D1)) / np.sqrt(D0)).astype(np.float32),
      (0.1 * rng.standard_normal(D1)).astype(np.float32),
      (rng.standard_normal((D1, D2)) / np.sqrt(D1)).astype(np.float32),
      (0.1 * rng.standard_normal(D2)).astype(np.float32)]


def loss(params, x, y):
    """The loss of one example: x of shape (784,), y an integer label."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    zmax = np.max(z)
    return np.log(np.sum(np.exp(z - zmax))) + zmax - z[y]


def np_per_example(params, x, y):
    """Every example's gradient by hand, batched (dtype follows the inputs)."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True)
    dz[np.arange(len(y)), y] -= 1.0
    d1 = (dz @ w2.T) * (1 - h * h)
    return [x[:, :, None] * d1[:, None, :], d1, h[:, :, None] * dz[:, None, :], dz]


REF = np_per_example([p.astype(np.float64) for p in P0], X[CHECK].astype(np.float64), Y[CHECK])


def err(grads):
    return max(H.relerr(np.asarray(g)[CHECK], r) for g, r in zip(grads, REF, strict=True))


def gflops(row):
    if row.get("median_s"):
        row["note"] = f"{FLOPS / row['median_s'] / 1e9:.1f} GFLOP/s {row['note']}".strip()


def timed(system, fn, kind="peer"):
    gflops(H.measure(system, "grads", fn, check=err, kind=kind, min_reps=3))


# ------------------------------------------------------------------ bounds
H1 = rng.standard_normal((B, D1)).astype(np.float32)
DZ = rng.standard_normal((B, D2)).astype(np.float32)
OUT = [np.empty((B, D0, D1), np.float32), np.empty((B, D1), np.float32),
       np.empty((B, D1, D2), np.float32), np.empty((B, D2), np.float32)]
products = [(np.matmul, X, P0[0], OUT[1]), (np.matmul, H1, P0[2], OUT[3]),
            (np.matmul, DZ, P0[2].T, OUT[1]),
            (np.multiply, X[:, :, None], H1[:, None, :], OUT[0]),
            (np.multiply, H1[:, :, None], DZ[:, None, :], OUT[2])]


def products_alone():
    for op, a, b, out in products:
        op(a, b, out=out)


def writes():
    for out in OUT:
        out.fill(1.0)


gflops(H.measure("numpy: the products alone", "grads", products_alone, kind="bound",
                 min_reps=3))
row = H.measure("ndarray.fill: write the result once", "grads", writes, kind="bound",
                min_reps=3)
if row.get("median_s"):
    nbytes = sum(o.nbytes for o in OUT)
    row["note"] = f"{nbytes / 1e6:.0f} MB at {nbytes / row['median_s'] / 1e9:.1f} GB/s"

# ------------------------------------------------------------------ pullback
H.warm("pullback")
pb_grads = pb.jit(pb.vmap(pb.grad(loss), in_axes=(None, 0, 0)), backend="c")
timed("pullback jit(vmap(grad))", lambda: pb_grads(P0, X, Y), kind="pullback")

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    timed("numpy (hand-written, batched)", lambda: np_per_example(P0, X, Y))

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    H.warm("jax")

    def jloss(params, x, y):
        w1, b1, w2, b2 = params
        z = jnp.tanh(x @ w1 + b1) @ w2 + b2
        return jax.nn.logsumexp(z) - z[y]

    j_grads = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
    Pj, Xj, Yj = [jax.device_put(p) for p in P0], jax.device_put(X), jax.device_put(Y)
    timed("jax.jit(vmap(grad))", lambda: jax.block_until_ready(j_grads(Pj, Xj, Yj)))

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") or H.want("torch.compile") else None
if torch is not None:
    from torch.func import grad, vmap

    H.pin_torch(torch)

    def tloss(params, x, y):
        w1, b1, w2, b2 = params
        z = torch.tanh(x @ w1 + b1) @ w2 + b2
        return torch.logsumexp(z, 0) - torch.gather(z, 0, y[None])[0]  # z[y] fails in vmap

    Pt, Xt, Yt = [torch.from_numpy(p) for p in P0], torch.from_numpy(X), torch.from_numpy(Y)
    t_grads = vmap(grad(tloss), in_dims=(None, 0, 0))

    def torch_row(system, fn):
        timed(system, lambda: [g.numpy() for g in fn(Pt, Xt, Yt)])

    if H.want("torch"):
        torch_row("torch.func vmap(grad)", t_grads)
    if H.want("torch.compile") and not H.quick():
        H.warm("torch.compile")
        torch_row("torch.compile(vmap(grad))", torch.compile(t_grads))

H.finish(f"per-example gradients, MLP {D0}-{D1}-{D2} tanh, softmax CE, batch {B}, float32; "
         f"{FLOPS / 1e9:.2f} GFLOP; result {sum(o.nbytes for o in OUT) / 1e6:.0f} MB")
