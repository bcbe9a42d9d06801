"""Threads (issue 24): the loop length from which loops run on every thread, measured
on the machine (build/threads.py, tuning.parallel_min) and read back from the cache by
lowering; and OpenBLAS's threaded products run as jobs on OpenMP's team (the glue's
``pb_blas_jobs``), not on a second pool of threads."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler, threads, tuning, units
from pullback.backends.c.loops.ir import PARALLEL_MIN

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A private cache, two threads, and no threshold remembered by this process."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(units.THREADS_ENV, "2")
    threads.parallel_min.cache_clear()
    yield tmp_path / "cache"
    threads.parallel_min.cache_clear()


def _times(pairs):
    return {n: {"serial": s, "parallel": p} for n, (s, p) in pairs.items()}


@pytest.mark.parametrize(("pairs", "least"), [
    ({1024: (1.0, 3.0), 4096: (4.0, 3.0), 16384: (16.0, 9.0)}, 4096),
    # a loss between wins counts by its size against theirs: the ladder's least time
    ({1024: (1.0, 0.5), 4096: (4.0, 4.5), 16384: (16.0, 9.0)}, 1024),
    ({1024: (1.0, 0.9), 4096: (4.0, 6.0), 16384: (16.0, 9.0)}, 16384),
    # one slow parallel timing at a long length does not move it past every length
    ({1024: (1.0, 3.0), 4096: (4.0, 3.0), 16384: (16.0, 9.0), 65536: (64.0, 70.0),
      262144: (256.0, 140.0)}, 4096),
    ({1024: (1.0, 0.5), 4096: (4.0, 2.0)}, 1024),
    ({1024: (1.0, 3.0), 4096: (4.0, 3.9)}, 8192),  # within the margin: never
    ({1024: (1.0, 3.0), 4096: (4.0, 4.0 * 0.95)}, 8192),  # a tie is the serial loop's
])
def test_the_threshold_is_where_threads_make_the_least_time(pairs, least):
    assert tuning.choose_parallel(_times(pairs), PARALLEL_MIN) == least


def test_nothing_measured_keeps_the_fallback():
    assert tuning.choose_parallel({}, PARALLEL_MIN) == PARALLEL_MIN


def test_one_thread_measures_nothing(fresh, monkeypatch):
    monkeypatch.setattr(tuning, "measure_parallel", pytest.fail)
    assert tuning.parallel_min(["cc"], ["-O2"], "cpu", 1, PARALLEL_MIN) == PARALLEL_MIN
    assert not fresh.exists()


def _sum(x):
    return np.sum(np.sin(x) * 2.0)


def _sum_source(n: int) -> str:
    return c.source_of(pb.make_ir(_sum)(np.ones(n))).text


@needs_cc
def test_a_threshold_read_from_the_cache_decides_the_pragma(fresh, monkeypatch):
    """Measured once (here: a made-up record), kept on disk, and read by a later
    process's lowering: loops of 2000 elements run on threads at a threshold of 1024,
    not at one of 4096."""
    for least, parallel in ((1024, True), (4096, False)):
        monkeypatch.setenv("OMP_WAIT_POLICY", f"test-{least}")  # part of the cache key
        calls = []
        monkeypatch.setattr(tuning, "measure_parallel",
                            lambda *a, least=least, calls=calls:
                            calls.append(a) or {"choice": least})
        threads.parallel_min.cache_clear()
        assert threads.parallel_min() == least and len(calls) == 1
        monkeypatch.setattr(tuning, "measure_parallel", pytest.fail)  # now from disk
        threads.parallel_min.cache_clear()
        assert threads.parallel_min() == least
        source = _sum_source(2000)
        assert ("#pragma omp parallel" in source) == parallel
    assert len(list(fresh.glob("tuning-parallel-*.json"))) == 2


@needs_cc
def test_short_loops_do_not_wait_for_the_measurement(fresh, monkeypatch):
    """A module whose loops are all shorter than the shortest length measured (``x + 1``
    on a machine's first compile) is made without measuring: they run on one thread."""
    monkeypatch.setattr(tuning, "measure_parallel", pytest.fail)
    assert "#pragma omp parallel" not in _sum_source(tuning.PARALLEL_SIZES[0] - 1)
    assert not list(fresh.glob("tuning-parallel-*.json"))


@needs_cc
def test_the_loop_program_times_every_length(fresh):
    record = tuning.measure_parallel(*compiler._found()[:1], ["-O2", "-fopenmp"], 2,
                                     PARALLEL_MIN)
    assert sorted(record["seconds"]) == list(tuning.PARALLEL_SIZES)
    assert all(t["serial"] > 0 and t["parallel"] > 0 for t in record["seconds"].values())
    assert record["choice"] in (*tuning.PARALLEL_SIZES, 2 * tuning.PARALLEL_SIZES[-1])


def _product(a, b):
    return a @ b


JOB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
RUNNER = ctypes.CFUNCTYPE(None, ctypes.c_int, JOB, ctypes.c_int, ctypes.c_size_t,
                          ctypes.c_void_p, ctypes.c_int)


@needs_cc
def test_blas_jobs_run_at_once_each_on_its_own_thread():
    """OpenBLAS's jobs wait for each other: all must run at the same time.  Each job here
    waits at a barrier for the others (a sequential run would time out), and records
    its index, its element and its thread."""
    a = np.arange(6.0).reshape(2, 3)
    staged, _ = pb.jit(_product, backend="c").specialise(a, a.T)
    assert staged.runner is not None
    np.testing.assert_array_equal(staged.runner(a, a.T)[0], a @ a.T)
    module = staged.runner.call.__self__  # any compiled module's glue: one per process
    runner = RUNNER(module.blas_jobs()[0])
    count = 3
    elements = (ctypes.c_int64 * count)(*[10 * k for k in range(count)])
    barrier, seen = threading.Barrier(count, timeout=20), []

    def job(index, element, data):
        barrier.wait()
        seen.append((index, ctypes.c_int64.from_address(element).value, data,
                     threading.get_native_id()))

    runner(1, JOB(job), count, ctypes.sizeof(ctypes.c_int64), ctypes.addressof(elements), 7)
    assert sorted(s[:3] for s in seen) == [(k, 10 * k, 7) for k in range(count)]
    assert len({s[3] for s in seen}) == count


_BLAS_WAIT = """
import os
import pullback.backends.c.call.compiled  # what loads compiled modules
with open("/proc/self/maps") as maps:
    loaded = "libscipy_openblas.so" in maps.read()
print(os.environ.get("OPENBLAS_THREAD_TIMEOUT"), loaded)
"""


@pytest.mark.parametrize(("user", "seen"), [(None, threads.BLAS_WAIT), ("24", "24")])
def test_openblas_idle_threads_spin_briefly_unless_the_user_says(user, seen):
    """OpenBLAS reads its threads' spin time once, as it loads: the backend sets it before
    its first module links OpenBLAS in, and keeps a value the user set."""
    env = {k: v for k, v in os.environ.items() if k != threads.BLAS_WAIT_ENV}
    if user is not None:
        env[threads.BLAS_WAIT_ENV] = user
    out = subprocess.run([sys.executable, "-c", _BLAS_WAIT], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [seen, "False"]
