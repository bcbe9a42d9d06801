"""What compiled code may take of the machine, from the environment: how many threads
(``PULLBACK_NUM_THREADS``) and how much freed memory compiled functions keep between
calls (``PULLBACK_KEEP_MB``).  Read once per process (``config``: a bad value is an error
that names the variable, never a crash), and handed to the glue library, which every
module shares, and to OpenBLAS.

The glue library sets the thread count on each thread that calls (OpenMP keeps it per
thread), and runs the loops of a forked child's thread alone when that thread had run
calls before the fork: libgomp's threads do not survive fork, and waiting for them
hung the child.

Where idle OpenMP threads spin (the OpenMP runtime started before pullback chose its wait
policy, as torch starts it, or the user asked), OpenBLAS's threaded routines run their
jobs on the calling thread's OpenMP team (the glue's ``pb_blas_jobs``, set as OpenBLAS's
thread callback): one pool of threads for loops and products, never two spinning
against each other.  Where they sleep at once, OpenBLAS keeps its own threads.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

from .... import config
from ..build import compiler as build
from ..build.units import THREADS_ENV

KEEP_ENV = "PULLBACK_KEEP_MB"
#: Threads per CPU beyond which PULLBACK_NUM_THREADS is lowered: libgomp starts a team
#: from the calling thread's stack, which 65536 threads overflowed (a segfault).
THREADS_PER_CPU = 4
#: MiB of freed buffers and AD tape all compiled functions together keep between calls
#: (what a call frees beyond it goes back to the system at the call's end).
KEEP_MB = 256


@functools.cache
def num_threads() -> int:
    """The thread count PULLBACK_NUM_THREADS asks for (0 when unset: OpenMP's and
    OpenBLAS's own defaults), lowered with a warning to THREADS_PER_CPU per CPU."""
    wanted = config.whole_number(THREADS_ENV, 1)
    if wanted is None:
        return 0
    most = THREADS_PER_CPU * (os.cpu_count() or 1)
    if wanted > most:
        warnings.warn(f"pullback: {THREADS_ENV}={wanted} is more than {THREADS_PER_CPU} "
                      f"threads per CPU; using {most}", RuntimeWarning, stacklevel=2)
        return most
    return wanted


@functools.cache
def keep_bytes() -> int:
    """The bytes of freed memory all compiled functions may keep between calls."""
    mib = config.whole_number(KEEP_ENV, 0)
    return (KEEP_MB if mib is None else mib) << 20


def apply(module: Any) -> None:
    """Hand the settings to the glue library (through any module) and to OpenBLAS."""
    threads = num_threads()
    module.set_limits(threads, keep_bytes())
    if threads != 1:  # one thread: OpenBLAS runs no jobs, nothing to measure
        callback, spins = module.blas_jobs()
        if spins:
            _blas_on_openmp(callback)
    if threads:
        _blas_threads(threads)


@functools.cache
def _openblas() -> Any:
    import ctypes

    return ctypes.CDLL(str(build.openblas_library()))


@functools.cache
def _blas_on_openmp(callback: int) -> None:
    """Make the glue's ``callback`` OpenBLAS's thread callback (once: one per process)."""
    import ctypes

    setter = getattr(_openblas(), f"{build.BLAS_PREFIX}openblas_set_threads_callback_function")
    setter.argtypes = [ctypes.c_void_p]
    setter(callback)


@functools.cache
def _blas_threads(threads: int) -> None:
    """Set OpenBLAS's thread count (once: it is one for the process)."""
    getattr(_openblas(), f"{build.BLAS_PREFIX}openblas_set_num_threads")(threads)
