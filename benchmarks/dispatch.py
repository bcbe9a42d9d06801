"""Per-call overhead: a compiled ``x + 1`` on a 10-element float32 array, in microseconds;
and the gradient of ``sum(x * x)`` called through a transform object kept between calls
and through one built afresh on every call (``pb.grad(f)(x)`` in a loop), which finds the
specialisation the first one compiled.

Each sample is 200 back-to-back calls divided by 200; the median over samples is
reported.  Every system allocates and returns a new array.  Bound: a Python call of a
function returning its argument, the least any call from Python costs.

    python benchmarks/dispatch.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import _harness as H

args = H.setup("dispatch", unit="us")

import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

x = np.arange(10, dtype=np.float32)
REF = x.astype(np.float64) + 1
TIMING = dict(batch=200, warmup=50, max_reps=5000)


def plus_one(x):
    return x + 1


def err(out):
    return H.relerr(out, REF)


def identity(x):
    return x


H.warm("pullback")
pb_plus_one = pb.jit(plus_one, backend="c")
H.measure("pullback jit(backend=c)", "call", lambda: pb_plus_one(x), check=err,
          kind="pullback", **TIMING)

def sum_of_squares(x):
    return np.sum(x * x)


GRAD = 2 * x.astype(np.float64)
pb_grad = pb.jit(pb.grad(sum_of_squares), backend="c")
H.measure("pullback grad (object kept)", "grad", lambda: pb_grad(x),
          check=lambda out: H.relerr(out, GRAD), kind="pullback", **TIMING)
H.measure("pullback grad (built on every call)", "grad",
          lambda: pb.jit(pb.grad(sum_of_squares), backend="c")(x),
          check=lambda out: H.relerr(out, GRAD), kind="pullback", **TIMING)

H.measure("Python call of an identity function", "call", lambda: identity(x), kind="bound",
          **TIMING)
if H.want("python"):
    H.measure("numpy x + 1", "call", lambda: plus_one(x), check=err, **TIMING)

nb = H.optional("numba") if H.want("numba") else None
if nb is not None:
    H.warm("numba")
    nb_plus_one = nb.njit(plus_one)
    H.measure("numba njit", "call", lambda: nb_plus_one(x), check=err, **TIMING)

torch = H.optional("torch") if H.want("torch") else None
if torch is not None:
    H.pin_torch(torch)
    xt = torch.from_numpy(x.copy())
    H.measure("torch eager", "call", lambda: plus_one(xt), check=lambda out: err(out.numpy()),
              **TIMING)

jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    H.warm("jax")
    j_plus_one = jax.jit(plus_one)
    xj = jax.device_put(x)
    H.measure("jax.jit (device array in, blocking)", "call",
              lambda: j_plus_one(xj).block_until_ready(), check=err, **TIMING)
    H.measure("jax.jit (NumPy array in and out)", "call",
              lambda: np.asarray(j_plus_one(x)), check=err, **TIMING)

if jax is not None:
    jnp_sum_sq = lambda v: jax.numpy.sum(v * v)  # noqa: E731
    j_grad = jax.jit(jax.grad(jnp_sum_sq))
    H.measure("jax.jit(jax.grad) (object kept)", "grad", lambda: np.asarray(j_grad(x)),
              check=lambda out: H.relerr(out, GRAD), **TIMING)
    H.measure("jax.jit(jax.grad) (built on every call)", "grad",
              lambda: np.asarray(jax.jit(jax.grad(jnp_sum_sq))(x)),
              check=lambda out: H.relerr(out, GRAD), **TIMING)

H.finish("f(x) = x + 1 on 10 float32; median of samples of 200 back-to-back calls")
