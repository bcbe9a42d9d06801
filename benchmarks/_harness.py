"""Shared timing harness of the benchmarks (standard library only at import time).

Each benchmark script starts with, before importing NumPy or any peer::

    import _harness as H
    args = H.setup("eltwise")

In the driver (the command you type) ``setup`` re-executes the script in fresh
subprocesses whose thread settings (OpenMP, OpenBLAS, MKL, Numba, XLA, pullback) are in
the environment from their first instruction and whose CPU affinity is pinned, collects
the rows the children measured and prints one table per thread count.  Each system is
measured in a process of its own (``processes``), with the same cores and settings as the
others: one library's thread pool (torch's OpenMP runtime, started first, decides how
idle threads wait for every OpenMP user in the process) never shapes another's timing,
as it would not in a user's program.  In a child ``setup`` returns the parsed arguments
and the script measures.

A row is one system doing one thing (``what``): its first call (compile included), the
median and minimum over repetitions, the largest relative error against a float64
reference, and a note.  Tables give, per row, pullback's time divided by that row's
(a peer's or a lower bound's), so ``pullback / peer`` and ``pullback / bound`` read
straight off.  Missing peers are reported as not installed; failures as FAILED rows.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import datetime
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
               "PULLBACK_NUM_THREADS")
CONTENDED = 0.05  # fraction of our cores used by others above which a row says so

_CLK = os.sysconf("SC_CLK_TCK")
_state: dict[str, Any] = {"rows": [], "notes": [], "threads": None, "quick": False,
                          "process": None, "asked": []}

#: The children of one thread count: the first measures no system (it computes the
#: references the others share, ``shared``, and finds the peers the script asks about
#: with ``want``), then pullback's process and one process per peer.  Pullback's process
#: measures the ``pullback``, ``bound`` and ``probe`` rows (the bounds are pullback's: NumPy's BLAS
#: runs in its process anyway); a peer's process the ``peer`` rows its ``want`` guards.
REFERENCE, PULLBACK = "reference", "pullback"


# ------------------------------------------------------------------ set-up and children

def setup(name: str, *, unit: str = "ms", default_threads: str = "both") -> argparse.Namespace:
    """Parse the common options; in the driver, run the children and exit."""
    p = argparse.ArgumentParser(description=f"benchmark: {name} (pullback vs peers)")
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    p.add_argument("--threads", default=default_threads, choices=["1", "2", "both"])
    p.add_argument("--only", default=None,
                   help="comma-separated systems to run (pullback, numpy, jax, torch, ...)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the rows as JSON")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--process", default=REFERENCE, help=argparse.SUPPRESS)
    args = p.parse_args()
    _state.update(name=name, unit=unit, quick=args.quick)
    if args.child is None:
        sys.exit(_drive(name, args))
    _state.update(threads=int(args.threads), out=args.child, process=args.process,
                  env0={k: os.environ.get(k) for k in SHARED_SETTINGS})
    _pin(int(args.threads))
    sys.path.insert(1, REPO)  # measure the checkout these scripts live in
    cache = tempfile.mkdtemp(prefix="pb_bench_cache_")  # cold compiler caches: first calls
    os.environ["PULLBACK_CACHE_DIR"] = os.path.join(cache, "pullback")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    atexit.register(shutil.rmtree, cache, True)
    return args


def want(system: str) -> bool:
    """Whether this process measures the system group ``system`` (``pullback`` or a peer
    group's name: ``numpy``, ``jax``, ``torch``...); the driver learns the groups a
    script has from the names asked here."""
    if system not in _state["asked"]:
        _state["asked"].append(system)
    return _state["process"] == system


def _measures(kind: str) -> bool:
    """Whether this process records rows of ``kind`` (see ``REFERENCE``)."""
    if kind in ("pullback", "bound", "probe"):  # probes measure the bounds
        return _state["process"] == PULLBACK
    return _state["process"] not in (PULLBACK, REFERENCE)


def shared(key: str) -> Any:
    """A value ``share`` stored in an earlier process of this run (a float64 reference
    computed with a peer), else None."""
    try:
        with open(_shared_path(key)) as f:
            return json.load(f)
    except (OSError, ValueError, KeyError):
        return None


def share(key: str, value: Any) -> Any:
    """Store ``value`` (JSON) for the later processes of this run; returns it."""
    if "PB_BENCH_SHARED" in os.environ:
        with open(_shared_path(key), "w") as f:
            json.dump(value, f)
    return value


def _shared_path(key: str) -> str:
    return os.path.join(os.environ["PB_BENCH_SHARED"], f"{key}.json")


def quick() -> bool:
    """Whether --quick asked for small sizes."""
    return bool(_state["quick"])


def _drive(name: str, args: argparse.Namespace) -> int:
    ncpu = len(os.sched_getaffinity(0))
    machine = cpu()
    print(f"# {name}: {cpu_line(machine)}", flush=True)
    counts = [1, 2] if args.threads == "both" else [int(args.threads)]
    runs, rc, asked = {}, 0, None
    shared_dir = tempfile.mkdtemp(prefix=f"pb_bench_{name}_shared_")
    atexit.register(shutil.rmtree, shared_dir, True)
    for n in counts:
        if n > ncpu:
            print(f"# {name}: skipping threads={n}, only {ncpu} core(s) available")
            continue
        cores, load = _least_busy(n)
        print(f"# {name} threads={n} cores={sorted(cores)} quick={args.quick} "
              f"(other processes' load on them before start: {load:.0%})", flush=True)
        env = {**_thread_env(n, cores), "PB_BENCH_SHARED": shared_dir}
        run: dict[str, list] = {"rows": [], "notes": []}
        if asked is None:  # once per run: the shared references, the script's groups
            first, rc = _child(args, n, REFERENCE, env)
            run["notes"] += first["notes"]
            asked = first.get("asked", [])
        for process in processes(asked, args.only):
            part, status = _child(args, n, process, env)
            run["rows"] += part["rows"]
            run["notes"] += part["notes"]
            rc = rc or status
        run["notes"][:0] = [f"CPU: {cpu_line(machine)}", *_removed_env(),
                            f"other processes' load on cores {sorted(cores)} before "
                            f"start: {load:.0%}",
                            "each system measured in a process of its own (same cores "
                            "and thread settings)"]
        runs[n] = run
        print_table(name, n, run, args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workload": name, "quick": args.quick, **machine,
                       "unit": _state["unit"],
                       "date": datetime.datetime.now().isoformat(timespec="seconds"),
                       "runs": {str(n): r for n, r in runs.items()}}, f, indent=1)
    return rc


def processes(asked: list[str], only: str | None) -> list[str]:
    """The measuring processes, in order: pullback's, then one per peer group the script
    asked ``want`` about, each where ``--only`` (comma-separated) selects it."""
    chosen = None if only is None else set(only.split(","))
    groups = [PULLBACK, *(s for s in asked if s not in (PULLBACK, REFERENCE))]
    return [g for g in dict.fromkeys(groups) if chosen is None or g in chosen]


def _child(args: argparse.Namespace, n: int, process: str, env: dict[str, str]
           ) -> tuple[dict, int]:
    """Run the script as the process that measures ``process`` on n threads: its rows,
    notes and the groups it asked about, and its exit status."""
    fd, tmp = tempfile.mkstemp(suffix=".json", prefix=f"pb_bench_{process}_")
    os.close(fd)
    argv = _strip(sys.argv[1:], ("--threads", "--json", "--child", "--only", "--process"))
    cmd = [sys.executable, os.path.abspath(sys.argv[0]), *argv, "--threads", str(n),
           "--child", tmp, "--process", process]
    print(f"## {process}'s process", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env)
    try:
        with open(tmp) as f:
            run = json.load(f)
    except (OSError, ValueError):
        run = {"rows": [], "notes": []}
    finally:
        os.unlink(tmp)
    if proc.returncode != 0:
        run["notes"].append(f"{process}'s process exited with status {proc.returncode} "
                            f"after {time.perf_counter() - t0:.0f}s")
    return run, proc.returncode


def _strip(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """argv without the options in names (``--x v`` and ``--x=v`` forms)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in names:
            skip = True
        elif not any(a.startswith(n + "=") for n in names):
            out.append(a)
    return out


#: Settings of the caller's environment that the children do not get: each would choose
#: kernels for every library in the process, peers and bounds included (OPENBLAS_CORETYPE:
#: "Haswell" halves NumPy's GEMM, the MLP bound, on a CPU with AVX-512).  Each library,
#: pullback included, makes its own choice instead.
NOT_PASSED = ("OPENBLAS_CORETYPE", "GOTOBLAS_CORETYPE")


def _removed_env() -> list[str]:
    """Notes on the caller's settings in ``NOT_PASSED`` that the children did not get."""
    return [f"{v}={os.environ[v]} of the caller's environment not passed to the benchmark "
            "(it would pick the kernels of the peers' and bounds' BLAS too)"
            for v in NOT_PASSED if v in os.environ]


def _thread_env(n: int, cores: set[int]) -> dict[str, str]:
    """The child's environment: every thread pool sized n, set before any import, and
    no ``NOT_PASSED`` setting."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    env["PB_BENCH_CPUS"] = ",".join(map(str, sorted(cores)))
    env.update({v: str(n) for v in THREAD_VARS})
    xla = env.get("XLA_FLAGS", "")
    if n == 1 and "xla_cpu_multi_thread_eigen" not in xla:
        xla += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env["XLA_FLAGS"] = xla.strip()
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _pin(n: int) -> None:
    """Run on the cores the driver chose (the first n without one)."""
    cores = os.environ.get("PB_BENCH_CPUS")
    os.sched_setaffinity(0, {int(c) for c in cores.split(",")} if cores else set(range(n)))


def pin_torch(torch: ModuleType) -> None:
    """torch sizes its pools itself: tell it the thread count too."""
    torch.set_num_threads(_state["threads"])
    try:
        torch.set_num_interop_threads(_state["threads"])
    except RuntimeError:  # already set (torch allows it once per process)
        pass


#: The instruction-set extensions that decide which kernels a compiler or library picks
#: (vector width, FMA, bfloat16 and matrix units), recorded with every result.
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
             "amx_int8", "asimd", "sve")


def cpu() -> dict[str, Any]:
    """What ran the benchmark: the CPU's name, which of ``CPU_FLAGS`` it has, how many
    CPUs the OS shows, and the transparent huge page mode (fresh buffers' page faults)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in iter(f.readline, "\n"):  # the first processor's entry
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = set(info.get("flags", info.get("Features", "")).split())
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        thp = "unknown"
    return {"cpu": info.get("model name") or platform.processor(),
            "cpu_flags": [f for f in CPU_FLAGS if f in flags], "cpus": os.cpu_count(),
            "thp": thp}


def cpu_line(rec: dict[str, Any]) -> str:
    """``cpu()``'s record as one line of text (no AVX-512 said so explicitly)."""
    flags = " ".join(rec.get("cpu_flags", [])) or "unknown"
    if "avx512f" not in rec.get("cpu_flags", ["avx512f"]):
        flags += ", no AVX-512"
    return (f"{rec['cpu']} ({rec.get('cpus', '?')} CPUs; flags: {flags}; transparent huge "
            f"pages: {rec.get('thp', 'unknown')})")


# ------------------------------------------------------------------ contention

def _busy(cpus: set[int]) -> int:
    """Busy jiffies (all but idle and iowait) of the given CPUs, from /proc/stat."""
    total = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break
                name, *vals = line.split()
                if name == "cpu" or int(name[3:]) not in cpus:
                    continue
                v = [int(x) for x in vals[:8]]
                total += sum(v) - v[3] - v[4]
    except OSError:
        pass
    return total


def _own() -> float:
    """This process's CPU time (with finished children's) in jiffies."""
    t = os.times()
    return (t.user + t.system + t.children_user + t.children_system) * _CLK


def _least_busy(n: int, sample: float = 0.5) -> tuple[set[int], float]:
    """The n cores other processes used least over ``sample`` seconds, and that load."""
    cpus = sorted(os.sched_getaffinity(0))
    before = [_busy({c}) for c in cpus]
    t0 = time.perf_counter()
    time.sleep(sample)
    dt = time.perf_counter() - t0
    used = sorted((_busy({c}) - b, c) for c, b in zip(cpus, before, strict=True))[:n]
    return {c for _, c in used}, min(1.0, sum(j for j, _ in used) / (dt * _CLK * n))


class Contention:
    """Fraction of our cores' time other processes used while the block ran."""

    def __enter__(self) -> Contention:
        self.cpus = set(os.sched_getaffinity(0))
        self.b0, self.s0, self.t0 = _busy(self.cpus), _own(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        dt = time.perf_counter() - self.t0
        other = (_busy(self.cpus) - self.b0) - (_own() - self.s0)
        self.fraction = max(0.0, other / max(dt * _CLK * len(self.cpus), 1e-9))


# ------------------------------------------------------------------ timing and rows

def bench(fn: Callable[[], Any], target_s: float | None = None, min_reps: int = 5,
          max_reps: int = 2000, warmup: int = 2, batch: int = 1
          ) -> tuple[float, float, int, float]:
    """(median, min) seconds per call of fn, the repetitions and the contention.

    fn must block until its work is done; ``batch`` calls make one sample (for calls of
    microseconds, where the clock's resolution and loop overhead matter)."""
    target_s = target_s or (0.4 if quick() else 1.5)
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    est = max(time.perf_counter() - t0, 1e-9)
    reps = int(max(min_reps, min(max_reps, target_s / est)))
    samples = []
    with Contention() as c:
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            samples.append((time.perf_counter() - t0) / batch)
    return statistics.median(samples), min(samples), reps, c.fraction


def relerr(a: Any, ref: Any) -> float:
    """max |a - ref| / max |ref| in float64 (absolute when ref is all zeros)."""
    import numpy as np

    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    scale = float(np.max(np.abs(ref))) if ref.size else 1.0
    return float(np.max(np.abs(a - ref))) / (scale or 1.0)


def record(system: str, what: str, *, kind: str = "peer", first_s: float | None = None,
           median_s: float | None = None, min_s: float | None = None,
           reps: int | None = None, err: float | None = None, note: str = "",
           contention: float | None = None) -> dict:
    """Add a row (kind: 'pullback', 'peer' or 'bound') and print it as it comes; a row
    this process does not measure (``REFERENCE``) is returned, not added."""
    if contention is not None and contention > CONTENDED:
        note = f"{note} [other processes used {contention:.0%} of our cores]".strip()
    row = dict(system=system, what=what, kind=kind, threads=_state["threads"],
               first_s=first_s, median_s=median_s, min_s=min_s, reps=reps, err=err,
               note=note, contention=contention)
    if not _measures(kind):
        return row
    _state["rows"].append(row)
    unit = _state["unit"]
    print(f"  {system:<40} {what:<12} first={_num(first_s, 1)}s "
          f"median={_num(median_s, _scale(unit))}{unit} err={_num(err, 1, 'e')} {note}",
          flush=True)
    return row


#: How many results the "(kept)" variant holds alive.
KEEP = 30


def measure(system: str, what: str, fn: Callable[[], Any], *,
            check: Callable[[Any], float] | None = None, kind: str = "peer",
            note: str = "", keep: int = 0, **bench_args: Any) -> dict:
    """Time fn's first call, check its answer, time it repeatedly, and record the row.

    With ``keep``, every call's result stays alive until ``keep`` later calls have
    returned, as a training loop keeps its activations: freed buffers are then not
    handed straight back to the next call, whose fresh memory pays its page faults.
    The row's ``what`` says ``(kept)``.  A pullback function that fell back to the
    interpreter says so in the row's note, and any exception becomes a FAILED row
    instead of ending the script.  A row this process does not measure is not run."""
    if not _measures(kind):
        return record(system, what, kind=kind)
    kept: collections.deque = collections.deque(maxlen=keep or 1)
    call = (lambda: kept.append(fn())) if keep else fn
    what = f"{what} (kept)" if keep else what
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            out = fn()
            first = time.perf_counter() - t0
            if kind == "pullback":  # its native build's warnings are caught too
                _finish_builds()
            ready = time.perf_counter() - t0
        fell_back = [str(w.message) for w in caught if "interpreter" in str(w.message)]
        if fell_back:
            note = f"{note} RAN ON THE INTERPRETER: {fell_back[0]}".strip()
        err = check(out) if check else None
        del out
        med, mn, reps, cont = bench(call, **bench_args)
    except Exception as e:  # a benchmark reports failures; it does not stop at them
        return fail(system, what, e, kind=kind)
    finally:
        kept.clear()
    if not keep and ready > 1.2 * first:  # (a first call built quickly: ``tiered``)
        note = f"{note} optimised code from {ready:.3g} s".strip()
    return record(system, what, kind=kind, first_s=None if keep else first, median_s=med,
                  min_s=mn, reps=reps, err=err, note=note, contention=cont)


def _finish_builds() -> None:
    """Wait for the native code pullback builds in the background while its first calls
    run on the interpreter (tiered execution), so that the timed calls run native code;
    the first call's time is as the user sees it.  Nothing where pullback builds first."""
    api = sys.modules.get("pullback.api")
    wait = getattr(api, "finish_builds", None)
    if wait is not None:
        wait()


def measure_both(system: str, what: str, fn: Callable[[], Any], **args: Any) -> dict:
    """``measure`` with the results dropped, then with the last ``KEEP`` kept alive;
    the first row."""
    row = measure(system, what, fn, **args)
    measure(system, what, fn, keep=KEEP, **args)
    return row


def fail(system: str, what: str, exc: BaseException, kind: str = "peer") -> dict:
    msg = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(msg) > 400:  # keep the start (what) and the end (a compiler's complaint)
        msg = msg[:150] + " ... " + msg[-250:]
    return record(system, what, kind=kind, note="FAILED: " + msg)


def optional(module: str) -> ModuleType | None:
    """The peer's module, or None and a 'not installed' row."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        record(module, "-", note=f"not installed ({e})")
        return None


def note(text: str) -> None:
    _state["notes"].append(text)
    print("  note:", text, flush=True)


def warm(framework: str) -> None:
    """Pay a framework's one-time start-up (back-end init; for pullback the compiler
    probes and its runtime library) on a trivial function, so first-call times measure
    compiling the workload's own code.  Only in the framework's own process."""
    if not want(framework):
        return
    t0 = time.perf_counter()
    _WARM_UPS[framework]()
    note(f"{framework}: one-time start-up on a trivial function took "
         f"{time.perf_counter() - t0:.2f}s (not in the first-call times)")


def _plus_one(v: Any) -> Any:
    return v + 1.0


def measure_pullback(fn: Callable, args: tuple, argnums: tuple[int, ...],
                     err_fwd: Callable[[Any], float], err_vg: Callable[[Any], float]) -> None:
    """Time ``fn`` and its ``value_and_grad`` compiled by pullback, after its start-up."""
    import pullback as pb

    if not want(PULLBACK):
        return
    warm("pullback")
    fwd = pb.jit(fn, backend="c")
    vg = pb.jit(pb.value_and_grad(fn, argnums=argnums), backend="c")
    measure("pullback jit(backend=c)", "fwd", lambda: fwd(*args), check=err_fwd,
            kind="pullback")
    measure("pullback jit(backend=c)", "val+grad", lambda: vg(*args), check=err_vg,
            kind="pullback")


def warm_pullback() -> None:
    """pullback's one-time start-up on this machine (its cache directory): built here, it
    is not in the first-call times (nor GradBench's compile column, ``--cold-cache``)."""
    import numpy as np

    import pullback as pb

    # what every first compile on a machine pays once: the compiler probes, the loop
    # length from which loops run on threads (measured on this run's cores), the runtime
    # libraries (the glue, and the small and packed products that modules link), the
    # products' crossover (raced in the background, waited for here)
    for n in (4, 128):
        pb.jit(pb.grad(lambda v: (v @ v.T).sum()), backend="c")(np.ones((n, n)))
    for dtype in (np.float32, np.float64):  # the inline-kernel/OpenBLAS crossover's race
        pb.jit(lambda a, b: a @ b, backend="c")(np.ones((16, 64), dtype),
                                                np.ones((64, 64), dtype))
    _finish_builds()  # builds a first call left running in the background (tiered)
    note(f"pullback from {os.path.dirname(pb.__file__)}")


def _warm_jax() -> None:
    import jax
    import jax.numpy as jnp

    jax.jit(jax.grad(lambda v: (v * v).sum()))(jnp.ones(4)).block_until_ready()


def _warm_numba() -> None:
    import numba
    import numpy as np

    numba.njit(_plus_one)(np.ones(4))


def _warm_torch_compile() -> None:
    import torch

    v = torch.ones(4, requires_grad=True)
    torch.compile(lambda v: (v * v).sum())(v).backward()


_WARM_UPS = {"pullback": warm_pullback, "jax": _warm_jax, "numba": _warm_numba,
             "torch.compile": _warm_torch_compile}


#: Process-wide settings a library may make for the others as it loads.
SHARED_SETTINGS = ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                   "OPENBLAS_THREAD_TIMEOUT")


def _settings() -> list[str]:
    """Each OpenBLAS loaded in this process and the core type it runs, and the shared
    settings made since the child started (by pullback's C backend: one OpenMP runtime
    serves pullback and torch, so its wait policy is torch's too)."""
    import ctypes

    found = []
    with open("/proc/self/maps") as maps:
        libs = sorted({ln.split()[-1] for ln in maps if "openblas" in ln and ".so" in ln})
    for lib in libs:
        handle = ctypes.CDLL(lib)
        for fn in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                   "openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(handle, fn):
                getattr(handle, fn).restype = ctypes.c_char_p
                found.append(f"{os.path.basename(lib)}: {getattr(handle, fn)().decode()}")
                break
    made = [f"{k}={os.environ[k]}" for k in SHARED_SETTINGS
            if os.environ.get(k) != _state["env0"].get(k)]
    process = f"{_state['process']}'s process"
    return ([f"OpenBLAS cores in {process}: {'; '.join(found)}"] if found else []) + (
        [f"set in {process} after start: {', '.join(made)}"] if made else [])


def finish(summary: str = "") -> None:
    """Hand the child's rows to the driver, with the process's BLAS and OpenMP settings."""
    if summary:
        _state["notes"].append(summary)
    _state["notes"] += _settings()
    with open(_state["out"], "w") as f:
        json.dump({"rows": _state["rows"], "notes": _state["notes"],
                   "asked": _state["asked"]}, f)


# ------------------------------------------------------------------ tables

def _scale(unit: str) -> float:
    return 1e6 if unit == "us" else 1e3


def _num(v: float | None, scale: float = 1.0, spec: str = "g") -> str:
    if v is None:
        return "-"
    if spec == "e":
        return f"{v:.1e}"
    v *= scale
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def ratio(pb: dict, other: dict) -> float | None:
    """pullback / other: of medians when both have one, else of first-call times."""
    for key in ("median_s", "first_s"):
        if pb.get(key) and other.get(key):
            return pb[key] / other[key]
    return None


def verdicts(run: dict) -> dict[str, dict]:
    """Per measured quantity (``what``): pullback's row, the best peer's row and
    pullback / it, and pullback / each bound."""
    rows = run["rows"]
    out: dict[str, dict] = {}
    for pb in rows:
        if pb["kind"] != "pullback" or pb["note"].startswith("FAILED") or pb["what"] in out:
            continue
        what = pb["what"]
        peers = [r for r in rows if r["kind"] == "peer" and r["what"] == what
                 and ratio(pb, r) is not None]
        best = max(peers, key=lambda r: ratio(pb, r)) if peers else None
        out[what] = {"pb": pb, "peer": best, "peer_ratio": best and ratio(pb, best),
                     "bounds": [(r["system"], ratio(pb, r)) for r in rows
                                if r["kind"] == "bound" and r["what"] == what
                                and ratio(pb, r) is not None]}
    return out


def table(name: str, threads: int, run: dict, was_quick: bool, unit: str = "ms") -> str:
    """The rows as a markdown table, pullback / row in its own column, then a summary."""
    sc = _scale(unit)
    rows = run["rows"]
    found = verdicts(run)
    lines = [f"### {name} - threads={threads}{' (quick)' if was_quick else ''}", "",
             f"| system | what | first call (s) | median ({unit}) | min ({unit}) | reps | "
             "rel err vs f64 | pullback / this | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        pb = found.get(r["what"], {}).get("pb")
        x = None if pb is None or r["kind"] == "pullback" else ratio(pb, r)
        lines.append(f"| {r['system']} | {r['what']} | {_num(r['first_s'])} | "
                     f"{_num(r['median_s'], sc)} | {_num(r['min_s'], sc)} | "
                     f"{r['reps'] if r['reps'] else '-'} | {_num(r['err'], 1, 'e')} | "
                     f"{'-' if x is None else f'{x:.2f}'} | {r['note'].replace('|', '/')} |")
    lines.append("")
    for what, v in found.items():
        parts = [f"pullback/bound = {x:.2f} ({system})" for system, x in v["bounds"]]
        if v["peer"] is not None:
            parts.append(f"pullback/best peer = {v['peer_ratio']:.2f} ({v['peer']['system']})")
        if parts:
            lines.append(f"- {what}: " + "; ".join(parts))
    lines += [f"- {t}" for t in dict.fromkeys(run["notes"])]
    return "\n".join(lines) + "\n"


def print_table(name: str, threads: int, run: dict, was_quick: bool) -> None:
    print("\n" + table(name, threads, run, was_quick, _state["unit"]), flush=True)
