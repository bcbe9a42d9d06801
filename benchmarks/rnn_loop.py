"""Gradient of a vanilla RNN written as a Python ``for`` loop, float32.

    h = 0;  for t in range(T): h = tanh(h @ W.T + x[t] @ U.T + b);  loss = sum(h * h)

T = 100 steps, hidden 128, batch 16, input 64; the gradient is with respect to (W, U, b).
``compile T=100`` and ``compile T=400`` rows give the first call of a freshly jitted
gradient at each length (staging/tracing + code generation + one call): JAX traces the
Python loop unrolled (and ``lax.scan`` does not), so its compile time grows with T.

Bound: the products the gradient needs, 5 per step (2 forward; dW, dU and dh backward),
as NumPy ``matmul`` calls with ``out=`` buffers in a Python loop, minus the same loop on
1x1 matrices (the Python and NumPy call overhead, which a compiled loop does not pay).

    python benchmarks/rnn_loop.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import time

import _harness as H

args = H.setup("rnn_loop")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

T, B, HID, DIN = 100, 16, 128, 64
T_LONG = 400
rng = np.random.default_rng(0)
W0 = (rng.standard_normal((HID, HID)) / np.sqrt(HID)).astype(np.float32)
U0 = (rng.standard_normal((HID, DIN)) / np.sqrt(DIN)).astype(np.float32)
b0 = (0.1 * rng.standard_normal(HID)).astype(np.float32)
XS = rng.standard_normal((T, B, DIN)).astype(np.float32)
XS_LONG = rng.standard_normal((T_LONG, B, DIN)).astype(np.float32)
ARGS = (W0, U0, b0, XS)


def rnn_loss(w, u, b, xs):
    h = np.zeros((xs.shape[1], w.shape[0]), dtype=w.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(h @ w.T + xs[t] @ u.T + b)
    return np.sum(h * h)


def np_grad(w, u, b, xs):
    """Backpropagation through time by hand."""
    h = np.zeros((xs.shape[1], w.shape[0]), dtype=w.dtype)
    hs = [h]
    for t in range(xs.shape[0]):
        h = np.tanh(h @ w.T + xs[t] @ u.T + b)
        hs.append(h)
    dh = 2 * h
    gw, gu, gb = np.zeros_like(w), np.zeros_like(u), np.zeros_like(b)
    for t in range(xs.shape[0] - 1, -1, -1):
        da = dh * (1 - hs[t + 1] * hs[t + 1])
        gw += da.T @ hs[t]
        gu += da.T @ xs[t]
        gb += da.sum(0)
        dh = da @ w
    return gw, gu, gb


REF = np_grad(*(a.astype(np.float64) for a in ARGS))


def err(grads):
    return max(H.relerr(g, r) for g, r in zip(grads, REF, strict=True))


def compile_row(system, kind, first_call, length):
    """Time first_call(): a freshly made gradient function's first call at this length."""
    try:
        t0 = time.perf_counter()
        first_call()
        H.record(system, f"compile T={length}", kind=kind, first_s=time.perf_counter() - t0)
    except Exception as e:  # reported, not raised
        H.fail(system, f"compile T={length}", e, kind=kind)


# ------------------------------------------------------------------ bound
hb = rng.standard_normal((B, HID)).astype(np.float32)
products = [(a, b, np.empty((a.shape[0], b.shape[1]), np.float32))
            for a, b in ((hb, W0.T), (XS[0], U0.T), (hb.T, hb), (hb.T, XS[0]), (hb, W0))]
one = np.ones((1, 1), np.float32)
tiny = [(one, one, np.empty((1, 1), np.float32))] * len(products)


def gemm_loop(ops):
    for _ in range(T):
        for a, b, out in ops:
            np.matmul(a, b, out=out)


gross = H.bench(lambda: gemm_loop(products))[0]
overhead = H.bench(lambda: gemm_loop(tiny))[0]
H.record("numpy matmul: 5 GEMMs per step, net", "grad", kind="bound",
         median_s=gross - overhead,
         note=f"{gross * 1e3:.3g} ms with the loop minus {overhead * 1e3:.3g} ms of call overhead")

# ------------------------------------------------------------------ pullback
H.warm("pullback")
pb_grad = pb.jit(pb.grad(rnn_loss, argnums=(0, 1, 2)), backend="c")
row = H.measure("pullback jit(backend=c)", "grad", lambda: pb_grad(*ARGS), check=err,
                kind="pullback")
if row["first_s"]:
    H.record("pullback jit(backend=c)", f"compile T={T}", kind="pullback",
             first_s=row["first_s"])
if H.want("pullback"):
    compile_row("pullback jit(backend=c)", "pullback",
                lambda: pb.jit(pb.grad(rnn_loss, argnums=(0, 1, 2)), backend="c")(
                    W0, U0, b0, XS_LONG), T_LONG)

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    H.measure("numpy (hand-written BPTT)", "grad", lambda: np_grad(*ARGS), check=err)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    H.warm("jax")

    def j_loop(w, u, b, xs):
        h = jnp.zeros((xs.shape[1], w.shape[0]), dtype=w.dtype)
        for t in range(xs.shape[0]):  # unrolled while tracing
            h = jnp.tanh(h @ w.T + xs[t] @ u.T + b)
        return jnp.sum(h * h)

    def j_scan(w, u, b, xs):
        def body(h, x):
            return jnp.tanh(h @ w.T + x @ u.T + b), None

        h, _ = jax.lax.scan(body, jnp.zeros((xs.shape[1], w.shape[0]), w.dtype), xs)
        return jnp.sum(h * h)

    J_ARGS = [jax.device_put(a) for a in ARGS]
    for system, fn in (("jax.jit (Python loop, unrolled)", j_loop),
                       ("jax.jit + lax.scan", j_scan)):
        jg = jax.jit(jax.grad(fn, argnums=(0, 1, 2)))
        row = H.measure(system, "grad", lambda jg=jg: jax.block_until_ready(jg(*J_ARGS)),
                        check=err)
        if row["first_s"]:
            H.record(system, f"compile T={T}", first_s=row["first_s"])
        if fn is j_scan or not H.quick():
            compile_row(system, "peer", lambda fn=fn: jax.block_until_ready(
                jax.jit(jax.grad(fn, argnums=(0, 1, 2)))(W0, U0, b0, XS_LONG)), T_LONG)

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") else None
if torch is not None:
    H.pin_torch(torch)

    def t_loop(w, u, b, xs):
        h = torch.zeros((xs.shape[1], w.shape[0]), dtype=w.dtype)
        for t in range(xs.shape[0]):
            h = torch.tanh(h @ w.T + xs[t] @ u.T + b)
        return (h * h).sum()

    XSt = torch.from_numpy(XS)

    def t_grad():
        params = [torch.tensor(a, requires_grad=True) for a in (W0, U0, b0)]
        return [g.numpy() for g in torch.autograd.grad(t_loop(*params, XSt), params)]

    H.measure("torch eager (Python loop)", "grad", t_grad, check=err)

H.finish(f"RNN T={T} batch={B} hidden={HID} input={DIN} float32; loss sum(h_T^2)")
