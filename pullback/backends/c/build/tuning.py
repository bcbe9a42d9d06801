"""Choices made by measuring on the machine at hand, not by its vendor: each is measured
once (lazily, the first time a build needs it), cached on disk beside the compiler
probes and keyed by the CPU, and only where the CPU leaves something to choose.

Vector width (``vector_flags``)
    GCC's ``-march=native`` prefers 256-bit vectors on CPUs with AVX-512 (eight-lane
    ``tanhf``/``expf``).  Where the CPU has ``avx512f``, a small program (``tanhf`` and
    ``expf`` over 2**20 floats, then a sum of products) is built with and without
    ``-mprefer-vector-width=512`` and run; modules get the flag where it is faster.
Inline kernel or BLAS (``measure_crossover``, ``measured_later``)
    The most work a product runs as the runtime's inline kernel (``kernels.c``) rather
    than a BLAS call, per kind of product: the kernel races OpenBLAS on a ladder of
    products of each kind a power of two apart (``CROSSOVER_LADDERS``), in
    a process of its own that a thread of this one starts for the first product whose
    lowering the answer would change; until it is cached, lowering keeps its defaults.
GEMM (``gemm_choice``)
    The runtime's packed kernels (``packed.c``) against OpenBLAS, on products of the
    shapes ``GEMM_SHAPES``, and apart on ``FEW_ROW_SHAPES`` for the products of few rows
    by a large B (runtime.h's ``pb_packed_gemm``); the packed kernels compute a kind of
    product only where they are faster on it.  They are built only where the CPU has AVX-512
    (``runtime.h``): elsewhere OpenBLAS computes them and nothing is measured.
Parallel loops (``parallel_min``)
    The length from which a loop runs on every thread: an elementwise loop, timed on one
    thread and on all of them (a parallel region per loop, as compiled kernels run) at
    the lengths ``PARALLEL_SIZES``; the length from which threads make the least time
    over the whole ladder (``ladder_log_time``).  Measured per thread count and OpenMP
    wait setting (waking sleeping threads costs microseconds); with one thread nothing
    is measured.

A choice is taken only when it beats the default by ``MARGIN``: timings on a busy
machine vary by a few percent.  ``python -m pullback.backends.c.build.tune`` measures
every choice afresh and prints it with its timings (``tune.py``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy

from ....errors import CompileError
from . import cache


@functools.cache
def cpu_id() -> str:
    """What -march=native targets: the feature list of the first CPU (Linux), else the
    processor's name (measurements are cached per CPU)."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):  # x86, arm
                    return line.strip()
    return f"{platform.machine()} {platform.processor()}"

#: How much faster than the default (a fraction of its time) a choice must measure.
MARGIN = 0.05
VECTOR_FLAG = "-mprefer-vector-width=512"
#: Runs of each program (itself the best of nine passes), in turns.
ROUNDS = 3
#: The products (m, n, k) timed: an MLP layer, a square one, a small one, a classifier's
#: ten outputs.
GEMM_SHAPES = ((256, 1024, 1024), (512, 512, 512), (64, 256, 256), (256, 10, 512))
#: Products of few rows of A by a large B, chosen for apart (runtime.h's PB_FEW_ROWS,
#: PB_FEW_B): an RNN step's h @ w_hh (OpenBLAS packs all of B on every call).
FEW_ROW_SHAPES = ((32, 1024, 256), (64, 512, 512), (128, 1024, 256))

_VECTOR_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <time.h>
#ifdef PB_MVEC
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
float expf(float);
#endif
#define N (1 << 20)
static float x[N], y[N];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    double best = 1e30;
    float sum = 0;
    for (int i = 0; i < N; i++) x[i] = (float)(i % 2000) * 1e-3f - 1.0f;
    for (int r = 0; r < 9; r++) {
        const double t = now();
        #pragma omp simd
        for (int i = 0; i < N; i++) y[i] = tanhf(x[i]) + expf(x[i]);
        float acc = 0;
        #pragma omp simd reduction(+:acc)
        for (int i = 0; i < N; i++) acc += y[i] * x[i];
        sum += acc;
        if (now() - t < best) best = now() - t;
    }
    printf("%.0f %g\n", best, (double)sum);
    return 0;
}
"""


#: The loop lengths timed for ``parallel_min``; beyond the last, loops always use threads
#: where they won there, and never use them where they lost at every length.
PARALLEL_SIZES = tuple(1 << k for k in range(10, 21))

_PARALLEL_PROGRAM = r"""
#include <stdio.h>
#include <time.h>
#define WORK MAX /* elements per timing: many loops over short lengths */
static float x[MAX], y[MAX];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void serial(int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) y[i] = y[i] * 0.5f + x[i];
}

static void parallel(int n) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; i++) y[i] = y[i] * 0.5f + x[i];
}

static double per_loop(void (*run)(int), int n) {
    const int loops = WORK / n;
    const double t = now();
    for (int k = 0; k < loops; k++) run(n);
    return (now() - t) / loops;
}

int main(void) {
    double best[2][32];
    int count = 0;
    for (int i = 0; i < MAX; i++) x[i] = (float)(i % 1000);
    parallel(MAX); /* start the threads */
    for (int n = MIN; n <= MAX; n <<= 1, count++) best[0][count] = best[1][count] = 1e30;
    for (int round = 0; round < 5; round++) /* in turns: slow spells hit both */
        for (int n = MIN, j = 0; n <= MAX; n <<= 1, j++)
            for (int p = 0; p < 2; p++) {
                const double t = per_loop(p ? parallel : serial, n);
                if (t < best[p][j]) best[p][j] = t;
            }
    for (int n = MIN, j = 0; n <= MAX; n <<= 1, j++)
        printf("%d %.1f %.1f\n", n, best[0][j], best[1][j]);
    return y[3] == 1234.5f; /* y is used */
}
"""


def choose_parallel(seconds: Mapping[int, Mapping[str, float]], fallback: int) -> int:
    """The length from which loops run on threads: the first past the ladder's split
    between serial and parallel loops (``ladder_log_time``, the parallel loop made slower
    by MARGIN); twice the longest where serial loops win throughout (``fallback`` when
    nothing was measured).  With "threads win at every longer length" instead, one slow
    parallel timing at a long length set it: 32768 to 2097152 between caches on a busy
    AMD EPYC, on either side of an LSTM step's 32768-element gate loop."""
    if not seconds:
        return fallback
    lengths = sorted(seconds)
    last_serial = min([*reversed(lengths), 0],  # a tie is the serial loop's
                      key=lambda n: ladder_log_time(seconds, n, "serial", "parallel",
                                                    "parallel"))
    return next((n for n in lengths if n > last_serial), 2 * lengths[-1])


def ladder_log_time(seconds: Mapping[int, Mapping[str, float]], split: int, low: str,
                    high: str, handicapped: str) -> float:
    """The log of the ladder's time (the product of the times: each length counts alike)
    where lengths up to ``split`` take ``low``'s times and longer ones ``high``'s,
    ``handicapped``'s made longer by MARGIN: one bad timing moves the best split only
    where it outweighs all the others."""
    return sum(math.log(seconds[n][who] / (1 - MARGIN if who == handicapped else 1))
               for n in seconds for who in [low if n <= split else high])


def parallel_min(argv: Sequence[str], flags: Sequence[str], cpu_id: str, threads: int,
                 fallback: int) -> int:
    """The loop length from which loops run on ``threads`` threads (measured once per
    compiler, CPU, thread count and OpenMP wait setting); ``fallback`` for one thread."""
    if threads < 2:
        return fallback
    waits = [os.environ.get(v, "") for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")]
    record = measured("parallel", [list(argv), list(flags), cpu_id, threads, *waits],
                      lambda: measure_parallel(argv, flags, threads, fallback))
    return int(record["choice"])


def measure_parallel(argv: Sequence[str], flags: Sequence[str], threads: int,
                     fallback: int) -> dict:
    """Build and run the loop program on ``threads`` threads; the choice and the
    nanoseconds of a loop per length, serial and parallel."""
    wanted = [f for f in flags if f.startswith(("-march", "-fopenmp", "-O"))]
    seconds: dict[int, dict[str, float]] = {}
    with cache.scratch("tuning") as tmp:
        (tmp / "loops.c").write_text(_PARALLEL_PROGRAM)
        built = subprocess.run(
            [*argv, "-std=c11", *wanted, f"-DMIN={PARALLEL_SIZES[0]}",
             f"-DMAX={PARALLEL_SIZES[-1]}", "loops.c", "-o",
             "loops"], cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if built.returncode == 0:
            out = subprocess.run([str(tmp / "loops")], capture_output=True, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": str(threads)})
            if out.returncode == 0:
                for line in out.stdout.splitlines():
                    n, serial, parallel = line.split()
                    seconds[int(n)] = {"serial": float(serial) * 1e-9,
                                       "parallel": float(parallel) * 1e-9}
    return {"choice": choose_parallel(seconds, fallback), "seconds": seconds}


def has_avx512(cpu_id: str) -> bool:
    """Whether the CPU's flags (``cpu_id``) name AVX-512's foundation."""
    return "avx512f" in cpu_id.split()


def choose(seconds: Mapping[str, float], default: str) -> str:
    """The option of least time, unless it beats ``default``'s by less than MARGIN."""
    best = min(seconds, key=seconds.__getitem__)
    return best if seconds[best] < (1 - MARGIN) * seconds[default] else default


def choose_gemm(seconds: Mapping[tuple[int, int, int], Mapping[str, float]],
                default: str = "blas") -> str:
    """Who of ``packed`` and ``blas`` has the least geometric mean of times over the
    shapes measured, unless it beats ``default``'s by less than MARGIN."""
    mean = {who: math.exp(sum(math.log(t[who]) for t in seconds.values()) / len(seconds))
            for who in ("packed", "blas")}
    return choose(mean, default)


def measured(what: str, key: Sequence[object], measure: Callable[[], dict]) -> dict:
    """The record of a measurement (``choice`` and what it measured), from the cache or
    made by ``measure``."""
    entry, name = cache.key("tuning", what, *key), f"tuning-{what}.json"
    with cache.exclusive(entry, name):  # one process measures, the others wait and read
        path = cache.entry(entry, name, lambda out: out.write_text(json.dumps(measure())))
    return json.loads(cache.payload(path))


#: Rounds of the race of the inline kernel against BLAS (``measure_crossover``).
CROSSOVER_ROUNDS = 7
#: A product's shape as the race takes it: rows, columns, terms, and whether B is
#: stored transposed (n x k).
Shape = tuple[int, int, int, bool]


def _ladder(m: int, n: int, k: int, transposed: bool, steps: int) -> tuple[Shape, ...]:
    """``steps`` products from m x n x k, the terms and the columns doubled in turn."""
    shapes = []
    for step in range(steps):
        shapes.append((m, n, k, transposed))
        n, k = (n, 2 * k) if step % 2 == 0 else (2 * n, k)
    return tuple(shapes)


#: The products the inline kernel races OpenBLAS on, per kind of product (as lowering
#: names them: ``lower/products.py``), each twice the last's work: ``direct`` (16 rows, a
#: row-major B at least two vectors wide, read as register tiles straight from B; from
#: 2^13 to 2^19 multiply-adds, through 16x64x64 and the RNN's 16x128x128), ``panels``
#: (B transposed, first copied in panels), ``tile`` and ``few`` (a B as ``direct``'s and
#: one or two of the kernel's tiles of 4 rows, to 2^20: at 4x512x1024 the race had the
#: kernel 13% faster, a compiled product of NumPy arrays 13-41% slower; AMD EPYC).
#: Below a ladder a product runs inline, above it on BLAS.
CROSSOVER_LADDERS = {"direct": _ladder(16, 32, 16, False, 7),
                     "panels": _ladder(16, 32, 16, True, 7),
                     "tile": _ladder(4, 64, 64, False, 7),
                     "few": _ladder(8, 64, 64, False, 6)}


#: The most work a product of each kind runs inline until the race has run, and unless
#: it finds otherwise by MARGIN (``choose_crossover``): measured by hand for issue 24
#: (AMD EPYC, AVX2, OpenBLAS Haswell, CPU time of 100 calls; 16 rows: OpenBLAS faster
#: from 2^17, 32x64x64: 8.9 us against 10.6, the inline kernel up to 2^16, 16x64x64:
#: 6.3 us against 6.7; at most 8 rows: the kernel twice as fast to 2^20, 4x256x256: 14
#: us against 25).
CROSSOVER_DEFAULTS = {"direct": 1 << 16, "panels": 1 << 15, "tile": 1 << 20,
                      "few": 1 << 20}


def choose_crossover(seconds: Mapping[int, Mapping[str, float]], default: int) -> int:
    """The most work (multiply-adds) a product runs inline, from the race's ``inline``
    and ``blas`` seconds per work: of the works measured, the one up to which the inline
    kernel and past which BLAS make the least time over the whole ladder (the product of
    the times: each work counts alike), the kernel's times made longer by MARGIN (own
    kernels stay where they beat OpenBLAS; a tie is BLAS's); the least where two make
    it alike.  One bad timing moves it only where it outweighs all the others: with the
    last work's alone (or "BLAS wins at every larger work"), it swung from 2^13 to 2^19
    between runs on a busy machine (float64, AMD EPYC, 2 cores).  It replaces ``default``
    only where that makes the ladder's time less by MARGIN: in a slow spell of the
    machine the kernel ran 40% slower, BLAS 10%, for seconds on end."""
    def log_time(most: int) -> float:
        return ladder_log_time(seconds, most, "inline", "blas", "inline")

    best = min(sorted(seconds), key=log_time)
    return best if log_time(best) < log_time(default) + math.log(1 - MARGIN) else default


#: The race's program: the library of the inline kernel, OpenBLAS, the race's and
#: BLAS's function names, the rounds, then four numbers a product (m, n, k, transposed);
#: prints the race's nanoseconds, inline and BLAS per product (``pb_gemm_race_*``).
_RACE_PROGRAM = """
import ctypes, sys
kernels, openblas, race, gemm, rounds, *shape = sys.argv[1:]
race = getattr(ctypes.CDLL(kernels), race)
gemm = ctypes.cast(getattr(ctypes.CDLL(openblas), gemm), ctypes.c_void_p)
shapes = (ctypes.c_int64 * len(shape))(*map(int, shape))
best = (ctypes.c_double * (len(shape) // 2))()
race.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                 ctypes.c_void_p]
if race(len(shape) // 4, shapes, int(rounds), gemm, best) == 0:
    print(*best)
"""


def measure_crossover(kernels: Path, openblas: Path, prefix: str, dtype: str,
                      ladders: Mapping[str, Sequence[Shape]] = CROSSOVER_LADDERS) -> dict:
    """Race the inline kernel of ``dtype`` (the library ``kernels``) against OpenBLAS's
    gemm (its names begin with ``prefix``) on each ladder's products (``pb_gemm_race_*``
    in ``kernels.c``: the least of CROSSOVER_ROUNDS timings taken in turns); the most
    work each kind runs inline (``choose_crossover`` from CROSSOVER_DEFAULTS) and the
    seconds per work, or no
    choice where the race could not run.  It runs in a process of its own, with OpenBLAS
    on one thread: below 2**18 multiply-adds OpenBLAS uses one thread whatever its
    count, and in this process, on two threads of a busy machine, its timings swung (the
    16-row crossover at 2**13 in one run, 2**19 in the next; AMD EPYC, 2 cores, AVX2)."""
    shapes = [shape for ladder in ladders.values() for shape in ladder]
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _RACE_PROGRAM, str(kernels), str(openblas),
         f"pb_gemm_race_{dtype}", f"{prefix}cblas_{'s' if dtype == 'float32' else 'd'}gemm",
         str(CROSSOVER_ROUNDS), *(str(int(d)) for shape in shapes for d in shape)],
        capture_output=True, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    best = [float(t) * 1e-9 for t in out.stdout.split()]
    if out.returncode != 0 or len(best) != 2 * len(shapes):
        return {"choice": {}, "seconds": {}}
    seconds: dict[str, dict[int, dict[str, float]]] = {}
    times = iter(zip(best[::2], best[1::2], strict=True))
    for kind, ladder in ladders.items():
        seconds[kind] = {m * n * k: dict(zip(("inline", "blas"), next(times), strict=True))
                         for m, n, k, _ in ladder}
    return {"choice": {kind: choose_crossover(t, CROSSOVER_DEFAULTS[kind])
                       for kind, t in seconds.items()},
            "seconds": seconds}


#: Measurements this process started on threads of their own (``measured_later``).
_later: dict[str, threading.Thread] = {}
_later_lock = threading.Lock()


def cached(what: str, key: Sequence[object]) -> dict | None:
    """The record of a measurement where one was cached, else None (nothing started)."""
    found = cache.existing(cache.key("tuning", what, *key), f"tuning-{what}.json")
    return None if found is None else json.loads(cache.payload(found))


def measured_later(what: str, key: Sequence[object], measure: Callable[[], dict]
                   ) -> dict | None:
    """The record of a measurement (as ``measured``) where one was cached, else None,
    the measurement started (once per process) on a thread of its own: the caller goes
    on with its default and does not wait.  A measurement that fails (no compiler, a
    library that does not build) leaves the default."""
    found = cached(what, key)
    if found is not None:
        return found
    entry = cache.key("tuning", what, *key)
    with _later_lock:
        if entry not in _later:
            _later[entry] = threading.Thread(target=_measure_quietly, args=(what, key, measure),
                                             name=f"pullback-tuning-{what}", daemon=True)
            _later[entry].start()
    return None


def wait_later() -> None:
    """Wait for the measurements ``measured_later`` started (``pb.finish_builds``: they
    would share the cores with what a benchmark times next)."""
    with _later_lock:
        threads = list(_later.values())
    for thread in threads:
        thread.join()


def _measure_quietly(what: str, key: Sequence[object], measure: Callable[[], dict]) -> None:
    with contextlib.suppress(CompileError, OSError):
        measured(what, key, measure)


def vector_flags(argv: Sequence[str], flags: Sequence[str], mvec: bool, cpu_id: str
                 ) -> list[str]:
    """The flags that set the vector width modules compile for: none unless the CPU has
    AVX-512 and measuring finds the wider vectors faster."""
    if not has_avx512(cpu_id):
        return []
    record = measured("vector", [list(argv), list(flags), mvec, cpu_id],
                      lambda: measure_vector_width(argv, flags, mvec))
    return [] if record["choice"] == "default" else [VECTOR_FLAG]


def measure_vector_width(argv: Sequence[str], flags: Sequence[str], mvec: bool) -> dict:
    """Build the program with the default width and with VECTOR_FLAG (at once), run each
    in turn; the choice and each one's seconds."""
    wanted = [f for f in flags if f.startswith(("-march", "-fopenmp", "-O"))]
    math_flags = ["-DPB_MVEC", "-lmvec", "-lm"] if mvec else ["-lm"]
    variants = {"default": [], "512": [VECTOR_FLAG]}
    with cache.scratch("tuning") as tmp:
        (tmp / "width.c").write_text(_VECTOR_PROGRAM)
        builds = {name: subprocess.Popen(
            [*argv, "-std=c11", *wanted, "-fno-math-errno", *extra, "width.c", "-o", name,
             *math_flags], cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, extra in variants.items()}
        built = [name for name, proc in builds.items() if proc.wait() == 0]
        seconds = {name: math.inf for name in built}
        for _ in range(ROUNDS):  # in turns: a busy machine's slow spells hit both
            for name in built:
                out = subprocess.run([str(tmp / name)], capture_output=True, text=True)
                if out.returncode == 0:
                    seconds[name] = min(seconds[name], float(out.stdout.split()[0]) * 1e-9)
    seconds = {name: t for name, t in seconds.items() if t < math.inf}
    if "default" not in seconds:  # nothing to compare with
        return {"choice": "default", "seconds": seconds}
    return {"choice": choose(seconds, "default"), "seconds": seconds}


#: Settings by which a process has OpenBLAS run other kernels than its CPU's (``Haswell``
#: on an AVX-512 machine is slower): what was measured with OpenBLAS holds for their values.
BLAS_KERNEL_SETTINGS = ("OPENBLAS_CORETYPE", "GOTOBLAS_CORETYPE")


def blas_measured(openblas: Path) -> str:
    """OpenBLAS as this process runs it, for the keys of measurements that time it: its
    file and the settings that choose its kernels."""
    chosen = [f"{k}={os.environ[k]}" for k in BLAS_KERNEL_SETTINGS if os.environ.get(k)]
    return " ".join([str(openblas), *chosen])


def gemm_choice(packed: Path, openblas: Path, cpu_id: str, source: str,
                kind: str = "choice", threads: int = 1) -> str:
    """``packed`` or ``blas``: who computes large float products (measured once per CPU,
    packed library's source and OpenBLAS), of few rows by a large B where ``kind`` is
    ``few``, in a process whose parallel loops run on ``threads`` (``in_team``)."""
    if not has_avx512(cpu_id):
        return "blas"
    record = measured("gemm", [blas_measured(openblas), source, cpu_id],
                      lambda: measure_gemm(packed, openblas))
    return in_team(record, kind, threads)


def cached_gemm_choice(openblas: Path, cpu_id: str, source: str, threads: int = 1) -> str:
    """``gemm_choice`` as an earlier process measured it, or ``""``: nothing measured."""
    path = cache.existing(cache.key("tuning", "gemm", blas_measured(openblas), source,
                                    cpu_id), "tuning-gemm.json")
    return "" if path is None else in_team(json.loads(cache.payload(path)), "choice", threads)


def in_team(record: Mapping, kind: str, threads: int) -> str:
    """The measured choice for ``kind`` on one thread; on several, the packed kernels
    unless OpenBLAS was faster by MARGIN: they run on OpenMP's threads, as the loops
    around them do, where OpenBLAS's own threads would share the cores with those (on
    the Zen 5, 2 threads, where the two tie on one: an LSTM training step 27.8 ms with
    OpenBLAS for the large products, 17.3-19.3 with the packed kernels; a transformer's
    26.5 against 23.5-24.3; MLP and CNN steps alike)."""
    if threads < 2 or "seconds" not in record:
        return record[kind]
    shapes = GEMM_SHAPES if kind == "choice" else FEW_ROW_SHAPES
    seconds = {s: record["seconds"][f"{s[0]}x{s[1]}x{s[2]}"] for s in shapes
               if f"{s[0]}x{s[1]}x{s[2]}" in record["seconds"]}
    return choose_gemm(seconds, "packed") if seconds else record[kind]


def measure_gemm(packed: Path, openblas: Path) -> dict:
    """Time float32 products of GEMM_SHAPES and FEW_ROW_SHAPES by the packed library and
    by OpenBLAS (best of three each, after one to warm up); the choice for each kind
    (``choice``, ``few``) and the seconds per shape."""
    import ctypes

    lib, blas = ctypes.CDLL(str(packed)), ctypes.CDLL(str(openblas))
    i64, i32, f32 = ctypes.c_int64, ctypes.c_int, ctypes.c_float
    ptr = ctypes.c_void_p
    lib.pb_gemm_packed_float32.argtypes = [i64, i64, i64, f32, ptr, i32, ptr, i32, ptr, ptr]
    sgemm = blas.scipy_cblas_sgemm
    sgemm.argtypes = [i32, i32, i32, i32, i32, i32, f32, ptr, i32, ptr, i32, f32, ptr, i32]
    seconds = {}
    rng = numpy.random.default_rng(0)
    for m, n, k in GEMM_SHAPES + FEW_ROW_SHAPES:
        a, b = (rng.standard_normal(s, dtype=numpy.float32) for s in ((m, k), (k, n)))
        c = numpy.empty((m, n), numpy.float32)
        pa, pb, pc = (x.ctypes.data for x in (a, b, c))
        row_major, as_is = 101, 111  # CBLAS's enums
        runs = {"packed": functools.partial(lib.pb_gemm_packed_float32, m, n, k, 1, pa, 0,
                                            pb, 0, None, pc),
                "blas": functools.partial(sgemm, row_major, as_is, as_is, m, n, k, 1, pa, k,
                                          pb, n, 0, pc, n)}
        seconds[f"{m}x{n}x{k}"] = {who: _best(run) for who, run in runs.items()}
    shapes = {tuple(map(int, s.split("x"))): t for s, t in seconds.items()}
    return {"choice": choose_gemm({s: shapes[s] for s in GEMM_SHAPES}),
            "few": choose_gemm({s: shapes[s] for s in FEW_ROW_SHAPES}), "seconds": seconds}


def _best(run: Callable[[], object], times: int = 3) -> float:
    run()
    best = math.inf
    for _ in range(times):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best
