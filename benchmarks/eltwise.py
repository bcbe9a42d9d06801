"""Element-wise workloads on x = 10M float32 (2M with --quick).

* ``f(x) = sum(tanh(x) * sigmoid(x) + 0.5 x^2)``: forward, gradient, value and gradient;
* ``m(x) = sum(0.5 x^2 + 3 x)``: the memory-bound variant, forward and gradient.

Bound: the bytes that must move over the bandwidth measured in this run.  A forward
reads x (4N bytes) at the best read bandwidth (BLAS dot of x with itself, Numba
``prange`` sum); a gradient reads x and writes the gradient (8N bytes) at the best copy
bandwidth (``np.copyto``, Numba ``prange`` copy), i.e. the time of one copy into an
existing buffer.  A function returning a new array whose memory is fresh also has the
kernel zero each new page before it is written: the ``(kept)`` rows' second gradient
bound is 12N bytes at the copy bandwidth (``x.copy()`` with its copies kept is measured
as a probe beside it; it is NumPy's time, not a floor).  For ``f`` the bounds ignore the
tanh and exp work, so only ``m`` can come near them.

Every measurement is made twice: with each result dropped before the next call, and
``(kept)``, with the last 30 results alive (as a training loop keeps its activations),
so that a new result cannot reuse the memory the previous one just freed.  Value and gradient
have two JAX rows, ``jax.value_and_grad`` and the forward and the gradient as two jitted
functions called one after the other; the faster is the best peer.

    python benchmarks/eltwise.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import _harness as H

args = H.setup("eltwise")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

N = 2_000_000 if args.quick else 10_000_000
rng = np.random.default_rng(0)
x = rng.standard_normal(N).astype(np.float32)


def f(x):
    return np.sum(np.tanh(x) * (1.0 / (1.0 + np.exp(-x))) + 0.5 * x * x)


def m(x):
    return np.sum(0.5 * x * x + 3 * x)


x64 = x.astype(np.float64)
tanh64, sig64 = np.tanh(x64), 1.0 / (1.0 + np.exp(-x64))
REF = {"fwd": f(x64), "grad": (1 - tanh64 ** 2) * sig64 + tanh64 * sig64 * (1 - sig64) + x64,
       "mem fwd": m(x64), "mem grad": x64 + 3}
del tanh64, sig64


def err(what):
    return lambda out: H.relerr(out, REF[what])


def err_vg(out):
    return max(H.relerr(out[0], REF["fwd"]), H.relerr(out[1], REF["grad"]))


# ------------------------------------------------------------------ bandwidth bound
nb = H.optional("numba")
if nb is not None:
    H.warm("numba")
dst = np.empty_like(x)
read = [H.measure("np.dot(x, x) (read probe)", "read", lambda: np.dot(x, x), kind="probe")]
copy = [H.measure("np.copyto (copy probe)", "copy", lambda: np.copyto(dst, x), kind="probe")]
if nb is not None:
    @nb.njit(parallel=True)
    def nb_copy(a, b):
        for i in nb.prange(a.shape[0]):
            b[i] = a[i]

    @nb.njit(parallel=True, fastmath=True)
    def nb_sum(a):
        acc = np.float32(0.0)
        for i in nb.prange(a.shape[0]):
            acc += a[i]
        return acc

    read.append(H.measure("numba prange sum (read probe)", "read", lambda: nb_sum(x),
                          kind="probe"))
    copy.append(H.measure("numba prange copy (copy probe)", "copy",
                          lambda: nb_copy(x, dst), kind="probe"))
H.measure("x.copy() (copy into a new array)", "copy", x.copy, kind="probe", keep=H.KEEP)
read_bw = max((x.nbytes / r["median_s"] for r in read if r["median_s"]), default=None)
copy_bw = max((2 * x.nbytes / r["median_s"] for r in copy if r["median_s"]), default=None)
for keep, suffix in ((0, ""), (H.KEEP, " (kept)")) if read_bw and copy_bw else ():
    # the probes run in pullback's process, with its bounds
    for what in ("fwd", "mem fwd"):
        H.record("bound: read x", what + suffix, kind="bound", median_s=x.nbytes / read_bw,
                 note=f"4N bytes at {read_bw / 1e9:.1f} GB/s")
    for what in ("grad", "val+grad", "mem grad"):
        H.record("bound: read x, write grad into a buffer", what + suffix, kind="bound",
                 median_s=2 * x.nbytes / copy_bw, note=f"8N bytes at {copy_bw / 1e9:.1f} GB/s")
        if keep:
            H.record("bound: read x, write grad into fresh memory", what + suffix,
                     kind="bound", median_s=3 * x.nbytes / copy_bw,
                     note=f"12N bytes at {copy_bw / 1e9:.1f} GB/s: the kernel zeroes "
                          "each fresh page before it is written")

# ------------------------------------------------------------------ pullback
H.warm("pullback")
pb_f, pb_g = pb.jit(f, backend="c"), pb.jit(pb.grad(f), backend="c")
pb_vg = pb.jit(pb.value_and_grad(f), backend="c")
pb_m, pb_mg = pb.jit(m, backend="c"), pb.jit(pb.grad(m), backend="c")
for what, fn, check in (("fwd", pb_f, err("fwd")), ("grad", pb_g, err("grad")),
                        ("val+grad", pb_vg, err_vg), ("mem fwd", pb_m, err("mem fwd")),
                        ("mem grad", pb_mg, err("mem grad"))):
    H.measure_both("pullback jit(backend=c)", what, lambda fn=fn: fn(x), check=check,
                   kind="pullback")

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    def np_grad(x):
        t = np.tanh(x)
        s = 1.0 / (1.0 + np.exp(-x))
        return (1 - t * t) * s + t * s * (1 - s) + x

    def np_value_and_grad(x):
        t = np.tanh(x)
        s = 1.0 / (1.0 + np.exp(-x))
        return np.sum(t * s + 0.5 * x * x), (1 - t * t) * s + t * s * (1 - s) + x

    for system, what, fn in (("numpy", "fwd", lambda: f(x)),
                             ("numpy (hand-written gradient)", "grad", lambda: np_grad(x)),
                             ("numpy (hand-written gradient)", "val+grad",
                              lambda: np_value_and_grad(x)),
                             ("numpy", "mem fwd", lambda: m(x)),
                             ("numpy (hand-written gradient)", "mem grad", lambda: x + 3)):
        H.measure_both(system, what, fn, check=err_vg if what == "val+grad" else err(what))

# ------------------------------------------------------------------ numba
if nb is not None and H.want("numba"):
    import math

    @nb.njit(parallel=True, fastmath=True)
    def nb_f(x):
        acc = 0.0
        for i in nb.prange(x.shape[0]):
            v = x[i]
            acc += math.tanh(v) * (1.0 / (1.0 + math.exp(-v))) + 0.5 * v * v
        return acc

    @nb.njit(parallel=True, fastmath=True)
    def nb_g(x):
        out = np.empty_like(x)
        one = np.float32(1.0)
        for i in nb.prange(x.shape[0]):
            v = x[i]
            t = math.tanh(v)
            s = one / (one + math.exp(-v))
            out[i] = (one - t * t) * s + t * s * (one - s) + v
        return out

    @nb.njit(parallel=True, fastmath=True)
    def nb_m(x):
        acc = 0.0
        for i in nb.prange(x.shape[0]):
            acc += 0.5 * x[i] * x[i] + 3.0 * x[i]
        return acc

    @nb.njit(parallel=True, fastmath=True)
    def nb_mg(x):
        out = np.empty_like(x)
        for i in nb.prange(x.shape[0]):
            out[i] = x[i] + np.float32(3.0)
        return out

    @nb.njit(parallel=True, fastmath=True)
    def nb_vg(x):
        out = np.empty_like(x)
        one = np.float32(1.0)
        acc = 0.0
        for i in nb.prange(x.shape[0]):
            v = x[i]
            t = math.tanh(v)
            s = one / (one + math.exp(-v))
            acc += t * s + 0.5 * v * v
            out[i] = (one - t * t) * s + t * s * (one - s) + v
        return acc, out

    for system, what, fn in (("numba prange", "fwd", nb_f),
                             ("numba prange (hand-written gradient)", "grad", nb_g),
                             ("numba prange (hand-written gradient)", "val+grad", nb_vg),
                             ("numba prange", "mem fwd", nb_m),
                             ("numba prange (hand-written gradient)", "mem grad", nb_mg)):
        H.measure_both(system, what, lambda fn=fn: fn(x),
                       check=err_vg if what == "val+grad" else err(what))

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp

    H.warm("jax")

    def jf(x):
        return jnp.sum(jnp.tanh(x) * jax.nn.sigmoid(x) + 0.5 * x * x)

    def jm(x):
        return jnp.sum(0.5 * x * x + 3 * x)

    xj = jax.device_put(x)
    j_f, j_g = jax.jit(jf), jax.jit(jax.grad(jf))
    for system, what, fn, check in (
            ("jax.jit", "fwd", j_f, err("fwd")), ("jax.jit", "grad", j_g, err("grad")),
            ("jax.jit(value_and_grad)", "val+grad", jax.jit(jax.value_and_grad(jf)), err_vg),
            ("jax.jit(f), jax.jit(grad(f)) called separately", "val+grad",
             lambda v: (j_f(v), j_g(v)), err_vg),
            ("jax.jit", "mem fwd", jax.jit(jm), err("mem fwd")),
            ("jax.jit", "mem grad", jax.jit(jax.grad(jm)), err("mem grad"))):
        H.measure_both(system, what, lambda fn=fn: jax.block_until_ready(fn(xj)), check=check)

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") or H.want("torch.compile") else None
if torch is not None:
    H.pin_torch(torch)
    xt = torch.from_numpy(x.copy())

    def tf(x):
        return (torch.tanh(x) * torch.sigmoid(x) + 0.5 * x * x).sum()

    def tm(x):
        return (0.5 * x * x + 3 * x).sum()

    def no_grad(fn):
        with torch.no_grad():
            return fn(xt).item()

    def grad(fn):
        v = xt.detach().requires_grad_(True)
        return torch.autograd.grad(fn(v), v)[0].numpy()

    def value_and_grad(fn):
        v = xt.detach().requires_grad_(True)
        value = fn(v)
        return value.item(), torch.autograd.grad(value, v)[0].numpy()

    systems = [("torch eager", tf, tm)] if H.want("torch") else []
    if H.want("torch.compile") and not H.quick():
        H.warm("torch.compile")
        systems.append(("torch.compile", torch.compile(tf), torch.compile(tm)))
    for name, tfn, tmn in systems:
        for what, fn, check in (("fwd", lambda tfn=tfn: no_grad(tfn), err("fwd")),
                                ("grad", lambda tfn=tfn: grad(tfn), err("grad")),
                                ("val+grad", lambda tfn=tfn: value_and_grad(tfn), err_vg),
                                ("mem fwd", lambda tmn=tmn: no_grad(tmn), err("mem fwd")),
                                ("mem grad", lambda tmn=tmn: grad(tmn), err("mem grad"))):
            H.measure_both(name, what, fn, check=check)

H.finish(f"N={N} float32; bound = bytes that must move / bandwidth measured above")
