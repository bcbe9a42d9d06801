"""Choices measured on the machine (build/tuning.py): the decisions from timings, the
measurements made only where the CPU leaves a choice, once, and cached on disk."""

import os
import re

import pytest

from pullback.backends.c.build import compiler, libraries, tuning

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")
AVX512 = "flags : fpu sse2 avx2 avx512f avx512bw"
AVX2 = "flags : fpu sse2 avx2 fma"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize(("seconds", "chosen"), [
    ({"default": 1.0, "512": 0.7}, "512"),
    ({"default": 1.0, "512": 0.97}, "default"),  # within the margin: noise
    ({"default": 0.7, "512": 1.0}, "default"),
])
def test_a_choice_must_beat_the_default_by_the_margin(seconds, chosen):
    assert tuning.choose(seconds, "default") == chosen


def test_gemm_goes_by_the_geometric_mean_over_the_shapes():
    # packed twice as fast on one shape, 1.5 times slower on another: 2/1.5 overall
    won = {(1, 1, 1): {"packed": 1.0, "blas": 2.0}, (2, 2, 2): {"packed": 3.0, "blas": 2.0}}
    assert tuning.choose_gemm(won) == "packed"
    lost = {(1, 1, 1): {"packed": 1.0, "blas": 1.2}, (2, 2, 2): {"packed": 3.0, "blas": 2.0}}
    assert tuning.choose_gemm(lost) == "blas"


def _record(packed: float, blas: float) -> dict:
    seconds = {f"{m}x{n}x{k}": {"packed": packed, "blas": blas}
               for m, n, k in tuning.GEMM_SHAPES + tuning.FEW_ROW_SHAPES}
    return {"choice": "blas" if blas <= packed * (1 + tuning.MARGIN) else "packed",
            "few": "packed", "seconds": seconds}


@pytest.mark.parametrize("packed,blas,one,several", [
    (1.0, 1.0, "blas", "packed"),  # a tie: one thread keeps OpenBLAS, a team its own
    (1.0, 0.5, "blas", "blas"),  # OpenBLAS clearly faster: on any number of threads
    (0.5, 1.0, "packed", "packed"),
])
def test_a_team_of_threads_takes_the_packed_kernels_unless_openblas_wins(packed, blas, one,
                                                                         several):
    record = _record(packed, blas)
    assert tuning.in_team(record, "choice", 1) == one
    assert tuning.in_team(record, "choice", 2) == several
    assert tuning.in_team(record, "few", 2) == several  # the same rule for few rows


def test_nothing_is_measured_without_avx512(cache_dir, monkeypatch):
    def measure(*args):
        raise AssertionError("measured")

    monkeypatch.setattr(tuning, "measure_vector_width", measure)
    monkeypatch.setattr(tuning, "measure_gemm", measure)
    assert tuning.vector_flags(["cc"], ["-O3"], True, AVX2) == []
    assert tuning.gemm_choice(cache_dir / "lib.so", cache_dir / "blas.so", AVX2, "") == "blas"
    assert not cache_dir.exists()


def test_the_vector_width_is_measured_once_and_cached(cache_dir, monkeypatch):
    calls = []

    def measure(argv, flags, mvec):
        calls.append(argv)
        return {"choice": tuning.choose({"default": 2e-3, "512": 1e-3}, "default"),
                "seconds": {"default": 2e-3, "512": 1e-3}}

    monkeypatch.setattr(tuning, "measure_vector_width", measure)
    assert tuning.vector_flags(["cc"], ["-O3"], True, AVX512) == [tuning.VECTOR_FLAG]
    assert tuning.vector_flags(["cc"], ["-O3"], True, AVX512) == [tuning.VECTOR_FLAG]
    assert len(calls) == 1 and len(list(cache_dir.glob("tuning-vector-*.json"))) == 1


def test_the_gemm_choice_is_cached_for_later_processes(cache_dir, monkeypatch):
    monkeypatch.setattr(tuning, "measure_gemm", lambda packed, blas: {"choice": "packed"})
    assert tuning.cached_gemm_choice(cache_dir / "blas.so", AVX512, "src") == ""
    assert tuning.gemm_choice(cache_dir / "p.so", cache_dir / "blas.so", AVX512,
                              "src") == "packed"
    assert tuning.cached_gemm_choice(cache_dir / "blas.so", AVX512, "src") == "packed"


def test_the_gemm_choice_holds_for_the_openblas_kernels_it_timed(cache_dir, monkeypatch):
    """A process told to run other OpenBLAS kernels (OPENBLAS_CORETYPE) measures again."""
    monkeypatch.setattr(tuning, "measure_gemm", lambda packed, blas: {"choice": "packed"})
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("GOTOBLAS_CORETYPE", raising=False)
    tuning.gemm_choice(cache_dir / "p.so", cache_dir / "blas.so", AVX512, "src")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert tuning.cached_gemm_choice(cache_dir / "blas.so", AVX512, "src") == ""
    monkeypatch.setattr(tuning, "measure_gemm", lambda packed, blas: {"choice": "blas"})
    assert tuning.gemm_choice(cache_dir / "p.so", cache_dir / "blas.so", AVX512,
                              "src") == "blas"
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert tuning.cached_gemm_choice(cache_dir / "blas.so", AVX512, "src") == "packed"


@needs_cc
def test_the_vector_width_program_builds_and_runs_with_each_width(cache_dir):
    found = compiler._found()
    accepted, mvec, _ = compiler._probed(*found, tuple(compiler._cflags()))
    record = tuning.measure_vector_width(found[0], accepted, mvec)
    assert set(record["seconds"]) == {"default", "512"}
    assert record["choice"] in ("default", "512")


@needs_cc
@pytest.mark.slow
@pytest.mark.skipif(not tuning.has_avx512(tuning.cpu_id()),
                    reason="the packed kernels are built only with AVX-512")
def test_the_gemm_measurement_runs_both_kernels(cache_dir):
    packed = compiler.library_path("pbpacked", libraries.LIBRARIES["pbpacked"][0])
    record = tuning.measure_gemm(packed, compiler.openblas_library())
    assert len(record["seconds"]) == len(tuning.GEMM_SHAPES) + len(tuning.FEW_ROW_SHAPES)
    assert all(set(t) == {"packed", "blas"} for t in record["seconds"].values())
    assert {record["choice"], record["few"]} <= {"packed", "blas"}


def test_each_kind_of_product_goes_by_its_own_shapes():
    """Products of few rows by a large B are chosen for on their shapes alone."""
    seconds = {**{f"{m}x{n}x{k}": {"packed": 2.0, "blas": 1.0} for m, n, k in
                  tuning.GEMM_SHAPES},
               **{f"{m}x{n}x{k}": {"packed": 1.0, "blas": 2.0} for m, n, k in
                  tuning.FEW_ROW_SHAPES}}
    shapes = {tuple(map(int, s.split("x"))): t for s, t in seconds.items()}
    assert tuning.choose_gemm({s: shapes[s] for s in tuning.GEMM_SHAPES}) == "blas"
    assert tuning.choose_gemm({s: shapes[s] for s in tuning.FEW_ROW_SHAPES}) == "packed"
    defined = dict(re.findall(r"#define (PB_FEW_\w+) (\d+)", libraries.HEADERS["runtime.h"]))
    rows, b = int(defined["PB_FEW_ROWS"]), int(defined["PB_FEW_B"])  # runtime.h's kinds
    assert all(m <= rows and n * k >= b for m, n, k in tuning.FEW_ROW_SHAPES)
    assert not any(m <= rows and n * k >= b for m, n, k in tuning.GEMM_SHAPES)


def test_threads_wait_as_the_measured_gemm_choice_wants(cache_dir, monkeypatch):
    """Idle OpenMP threads spin for OpenBLAS's products unless an earlier process measured
    the packed kernels faster, then for theirs; OpenBLAS's core type, which NumPy's BLAS
    reads too, is left alone."""
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OPENBLAS_CORETYPE", "PULLBACK_GEMM"):
        monkeypatch.setenv(name, "")  # restored after the test
        monkeypatch.delenv(name)
    monkeypatch.setattr(tuning, "cpu_id", lambda: AVX512)
    compiler.choose_threading()
    assert os.environ.pop("GOMP_SPINCOUNT") == compiler.BLAS_SPIN  # nothing measured yet
    monkeypatch.setattr(tuning, "measure_gemm", lambda *args: {"choice": "packed"})
    tuning.gemm_choice(cache_dir / "p.so", compiler.openblas_library(), AVX512,
                       libraries.LIBRARIES["pbpacked"][0])
    compiler.choose_threading()
    assert os.environ["GOMP_SPINCOUNT"] == compiler.SPIN
    assert "OMP_WAIT_POLICY" not in os.environ and "OPENBLAS_CORETYPE" not in os.environ


_MEASURE_TOGETHER = """
import json, os, sys, time
from pullback.backends.c.build import tuning

def measure():
    with open(sys.argv[1], "a") as log:
        log.write(f"{os.getpid()}\\n")
    time.sleep(0.5)  # long enough for the other process to ask meanwhile
    return {"choice": os.getpid()}

print(json.dumps(tuning.measured("together", ["key"], measure)))
"""


def test_processes_starting_together_measure_once_and_read_one_answer(cache_dir, tmp_path):
    """The parallel threshold differed between two xdist workers that measured it at
    once (CI collected different tests in each): one process measures, the other waits
    and reads its record."""
    import subprocess
    import sys

    log = tmp_path / "measured"
    script = tmp_path / "together.py"
    script.write_text(_MEASURE_TOGETHER)
    procs = [subprocess.Popen([sys.executable, str(script), str(log)], text=True,
                              stdout=subprocess.PIPE, env=os.environ.copy())
             for _ in range(2)]
    answers = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert len(log.read_text().split()) == 1
    assert answers[0] == answers[1]
