"""How many threads compiled code runs on, the loop length from which a loop is worth
running on all of them (``#pragma omp parallel``): measured once on this machine for that
many threads (``tuning.parallel_min``), else ``PARALLEL_MIN`` (no compiler, one thread),
and how long OpenBLAS's idle threads spin (``choose_blas_wait``)."""

from __future__ import annotations

import functools
import os
import threading

from . import compiler, tuning
from .units import team_size

BLAS_WAIT_ENV = "OPENBLAS_THREAD_TIMEOUT"
#: How long OpenBLAS's idle threads spin before they sleep: 2**16 cycles (tens of
#: microseconds, enough for the next product of a run of them), not OpenBLAS's 2**28
#: (about 0.1 s after every product, on a core that OpenMP's threads then share: on two
#: cores a product then an 8M-element loop took 11.9 ms, 7.8 ms with 2**16, and a digits
#: CNN training step 23-36 ms, 19-20 ms, 24 ms on one thread; AMD EPYC, 2 cores, AVX2,
#: minima under SCHED_FIFO on a busy machine).
BLAS_WAIT = "16"


def choose_blas_wait() -> None:
    """How long OpenBLAS's idle threads spin, read when pullback's OpenBLAS loads (after
    this module's import: the first compiled module links it), unless the user set it."""
    os.environ.setdefault(BLAS_WAIT_ENV, BLAS_WAIT)


#: Compiles on several threads (tiered) would measure at once, each slowing the other's
#: threads: the first measures, the others then read its answer from the disk cache.
_measuring = threading.Lock()


@functools.cache
def parallel_min() -> int:
    """The loop length from which loops run on every thread (once per process)."""
    from ..loops.ir import PARALLEL_MIN  # here: a cache hit imports no loop IR (call/index.py)

    try:
        argv, version = compiler._found()
        accepted, _, _ = compiler._probed(argv, version, tuple(compiler._cflags()))
    except compiler.BuildError:  # no (usable) compiler: nothing to measure with
        return PARALLEL_MIN
    with _measuring:
        return tuning.parallel_min(argv, accepted, tuning.cpu_id(), team_size(),
                                   PARALLEL_MIN)


def runs_parallel(n: int) -> bool:
    """Whether a loop of ``n`` iterations runs on every thread.  Loops shorter than the
    shortest length measured never do, so a module without long loops (``x + 1``) does
    not wait for the measurement."""
    return n >= tuning.PARALLEL_SIZES[0] and n >= parallel_min()


def products_share_team(batch: int, m: int, n: int, k: int) -> bool:
    """Whether a batch of ``batch`` BLAS products (m x k by k x n) runs on every thread,
    a product a thread: where a loop over the elements they read and write would (each
    product of an attention's heads is too small for BLAS's own threads, which would
    leave them all on one)."""
    return batch >= team_size() > 1 and runs_parallel(batch * (m * k + k * n + m * n))


choose_blas_wait()  # before any module this backend builds loads OpenBLAS
