"""``python -m pullback.backends.c.build.tune``: measure every choice ``tuning`` makes,
afresh (the cached answers are left as they are), on this machine, and print each with
its timings and the CPU it ran on."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from ..loops.ir import PARALLEL_MIN
from . import compiler, libraries, threads, tuning


def main() -> None:
    """Measure every choice afresh on this machine and print it with its timings."""
    found = compiler._found()
    cflags = tuple(compiler._cflags())
    accepted, mvec, _ = compiler._probed(*found, cflags)
    cpu = tuning.cpu_id()
    print(f"CPU: {_cpu_name()}; AVX-512: {'yes' if tuning.has_avx512(cpu) else 'no'}")
    print("vector flags: " + " ".join(sorted(f for f in cpu.split()
                                             if f.startswith(("avx", "amx", "fma")))))
    print(f"compiler: {found[1]}; threads: {os.cpu_count()} CPUs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', '(unset)')}, PULLBACK_NUM_THREADS="
          f"{os.environ.get('PULLBACK_NUM_THREADS', '(unset)')}")
    width = tuning.measure_vector_width(found[0], accepted, mvec)
    print(f"vector width: {width['choice']}  "
          + "  ".join(f"{k}: {v * 1e3:.3f} ms" for k, v in width["seconds"].items()))
    _parallel_loops(found[0], accepted)
    _crossovers()
    if not tuning.has_avx512(cpu):
        print("gemm: blas (not measured: the packed kernels are built only where the CPU "
              "has AVX-512)")
        return
    packed = compiler.library_path("pbpacked", libraries.LIBRARIES["pbpacked"][0])
    gemm = tuning.measure_gemm(packed, compiler.openblas_library())
    print(f"gemm: {gemm['choice']}; few rows by a large B: {gemm['few']}")
    for shape, t in gemm["seconds"].items():
        print(f"  {shape}: " + "  ".join(f"{k} {v * 1e3:.3f} ms" for k, v in t.items()))


def _parallel_loops(argv: tuple[str, ...], flags: list[str]) -> None:
    """The parallel-loop threshold for this process's thread count, with its timings."""
    team = threads.team_size()
    waits = ", ".join(f"{v}={os.environ[v]}" for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
                      if v in os.environ) or "OpenMP's default wait"
    if team < 2:
        print(f"parallel loops: from {PARALLEL_MIN} elements (one thread: not measured)")
        return
    record = tuning.measure_parallel(argv, flags, team, PARALLEL_MIN)
    print(f"parallel loops: from {record['choice']} elements ({team} threads, {waits}); "
          "one loop's time, serial / parallel:")
    for n, t in record["seconds"].items():
        print(f"  {n}: {t['serial'] * 1e6:.2f} / {t['parallel'] * 1e6:.2f} us")


def _crossovers() -> None:
    """The most work each kind of product runs as the inline kernel rather than BLAS, per
    float type, with the race's timings."""
    for dtype in ("float32", "float64"):
        name = f"pbkernels_{dtype}"
        kernels = compiler.library_path(name, libraries.LIBRARIES[name][0])
        record = tuning.measure_crossover(kernels, compiler.openblas_library(),
                                          compiler.BLAS_PREFIX, dtype)
        print(f"inline kernel up to, {dtype}: " + ", ".join(
            f"{kind} {most} multiply-adds" for kind, most in record["choice"].items())
            + "; a product's time, inline / BLAS (one thread):")
        for kind, times in record["seconds"].items():
            print(f"  {kind}: " + "  ".join(f"{work}: {t['inline'] * 1e6:.2f} / "
                                            f"{t['blas'] * 1e6:.2f} us"
                                            for work, t in times.items()))


def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return sys.platform


if __name__ == "__main__":
    main()
