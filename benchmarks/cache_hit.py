"""First call of an already-compiled function in a new process: the on-disk cache hit.

For each system and function a fresh process is started twice with the same, initially
empty, cache directory: it imports the system, makes the compiled function, calls it once
and reports the times.  The first process compiles and fills the cache (``miss``); the
second finds it there (``hit``).  A pullback miss includes its one-time compiler probes
and runtime libraries (built beside the module); a third process then compiles ``x * 2``
with that cache (``miss, warm cache``: the cost of each new function on a machine in
use).  A pullback first call the interpreter runs quickly runs there while the native
code builds on a thread (``pullback/tiered.py``; the process waits for the build before
it exits, so the cache is filled): the note says from when, counted from the first
call, native code runs (``wait``).  A native build on a hit still stages and generates C
to compute the cache key, and skips the C compiler.
Peers: Numba ``cache=True`` and JAX's persistent compilation cache (which still traces).

Functions: ``x + 1`` on 10 float32, and the gradient of a small residual network
(8 tanh blocks of 32x32, batch 64) with a Huber loss, written as a Python loop.

    python benchmarks/cache_hit.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import json
import os
import subprocess
import sys
import tempfile
import time

PROBE = sys.argv[1:2] == ["--probe"]  # this file is also the program each new process runs
if not PROBE:
    import _harness as H

    args = H.setup("cache_hit")

import numpy as np  # noqa: E402


def plus_one(x):
    return x + 1


def times_two(x):
    return x * 2


SMALL = {"x+1": plus_one, "x*2": times_two}


def resnet_huber(w, x, y):
    h = x
    for i in range(w.shape[0]):
        h = h + np.tanh(h @ w[i])
    r = h - y
    return np.sum(np.where(np.abs(r) < 1.0, 0.5 * r * r, np.abs(r) - 0.5))


def inputs(function):
    rng = np.random.default_rng(0)
    if function in SMALL:
        return (np.arange(10, dtype=np.float32),)
    return tuple(rng.standard_normal(s).astype(np.float32) * 0.2
                 for s in ((8, 32, 32), (64, 32), (64, 32)))


def make(system, function):
    """Import the system and build its compiled function; returns (import s, callable)."""
    t0 = time.perf_counter()
    if system == "pullback":
        import pullback as pb

        t = time.perf_counter() - t0
        fn = SMALL[function] if function in SMALL else pb.grad(resnet_huber)
        return t, pb.jit(fn, backend="c")
    if system == "numba":
        import numba

        return time.perf_counter() - t0, numba.njit(cache=True)(SMALL[function])
    import jax

    jax.config.update("jax_compilation_cache_dir", os.environ["PB_BENCH_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    t = time.perf_counter() - t0
    fn = SMALL[function] if function in SMALL else jax.grad(_jax_resnet_huber(jax))
    jitted = jax.jit(fn)
    return t, lambda *a: jax.block_until_ready(jitted(*a))


def _jax_resnet_huber(jax):
    jnp = jax.numpy

    def loss(w, x, y):
        h = x
        for i in range(w.shape[0]):
            h = h + jnp.tanh(h @ w[i])
        r = h - y
        return jnp.sum(jnp.where(jnp.abs(r) < 1.0, 0.5 * r * r, jnp.abs(r) - 0.5))

    return loss


def probe(system, function):
    """In a new process: print the import time, the first and the second call's."""
    try:
        import_s, fn = make(system, function)
    except ImportError as e:
        print(json.dumps({"missing": str(e)}))
        return
    a = inputs(function)
    t0 = time.perf_counter()
    fn(*a)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fn(*a)
    second = time.perf_counter() - t0
    t0 = time.perf_counter()
    getattr(fn, "wait", lambda: None)()  # pullback: its native code, where the first call
    native = first + second + time.perf_counter() - t0  # ran on the interpreter (tiered)
    print(json.dumps({"import_s": import_s, "first_s": first, "second_s": second,
                      "native_s": native}))


def run_probe(system, function, cache):
    env = dict(os.environ, PB_BENCH_CACHE=cache, PULLBACK_CACHE_DIR=cache,
               NUMBA_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(
                   [H.REPO, *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--probe", system,
                          function], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(system, function, kind):
    runs = [(function, "miss"), (function, "hit")]
    if function == "x+1":  # then a new function, the machine's one-time work done
        runs.append(("x*2", "miss, warm cache"))
    with tempfile.TemporaryDirectory(prefix="pb_bench_hit_") as cache:
        for fn, what in runs:
            try:
                r = run_probe(system, fn, cache)
            except (subprocess.CalledProcessError, ValueError, IndexError) as e:
                detail = getattr(e, "stderr", "") or ""
                H.fail(system, f"{fn} {what}", RuntimeError(f"{e} {detail[-300:]}"),
                       kind=kind)
                return
            if "missing" in r:
                H.record(system, fn, note=f"not installed ({r['missing']})")
                return
            native = f"; native code from {r['native_s']:.3g} s" if system == "pullback" else ""
            H.record(system, f"{fn} {what}", kind=kind, first_s=r["first_s"],
                     note=f"import {r['import_s']:.2f}s; second call "
                          f"{r['second_s'] * 1e3:.3g} ms{native}")


if PROBE:
    probe(*sys.argv[2:4])
else:
    peers = [s for s in ("numba", "jax") if H.want(s)]
    for function in ("x+1", "resnet grad"):
        if H.want("pullback"):
            measure("pullback", function, "pullback")
        for system in peers:
            if system == "numba" and function != "x+1":
                continue  # Numba has no automatic differentiation
            measure(system, function, "peer")
    H.finish("each row: a new process's first call, compile included on a miss")
