"""A machine's first compile: the compiler probes (one combined compile where all is
well) and the runtime libraries, built once, beside the module's own compile."""

from pathlib import Path

import pytest

from pullback.backends.c.build import compiler

from .build_child import HEADERS, LIBRARIES, add_source, linked_module

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


@pytest.fixture
def logged_cc(tmp_path, monkeypatch):
    """A fresh cache and a compiler that logs each command line; with ``reject`` set, it
    fails every command holding that flag. The log's lines, per command."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PULLBACK_CFLAGS", raising=False)
    log = tmp_path / "cc.log"

    def use(reject: str = "") -> Path:
        wrapper = tmp_path / "cc-logged"
        refuse = f'case " $* " in *" {reject} "*) exit 1;; esac\n' if reject else ""
        wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\n{refuse}'
                           f'exec {compiler.compiler_info()[0]} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("PULLBACK_CC", str(wrapper))
        return log

    return use


def lines(log: Path, word: str) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines() if word in line.split()]


@needs_cc
def test_a_working_compiler_is_probed_by_one_compile(logged_cc):
    """One shared library of the probe program, with every flag and vector math, answers
    every probe; the cached answers serve a new process."""
    log = logged_cc()
    compiler._probes.clear()
    compiler.build_module(add_source("pb_t_su1"), "pb_t_su1", headers=HEADERS)
    assert lines(log, "shared.c") == []
    (probe,) = lines(log, "probe.c")
    assert {"-march=native", "-fopenmp", "-lmvec", "-shared"} <= set(probe)
    compiler._probes.clear()  # as in a new process
    compiler.build_module(add_source("pb_t_su2"), "pb_t_su2", headers=HEADERS)
    assert len(lines(log, "probe.c")) == 1


@needs_cc
def test_probes_where_the_one_compile_fails_give_the_same_answer(logged_cc):
    """A linker that rejects the combined probe's ``--no-undefined`` (macOS's): the
    separate probes run (a one-line shared library, the probe program) and answer as the
    combined one does."""
    argv, version = compiler._found()
    cflags = tuple(compiler._cflags())
    assert compiler._probe(argv, cflags) == (list(cflags), True)
    log = logged_cc(reject="-Wl,--no-undefined")
    assert compiler._probe((compiler.compiler_info()[0],), cflags) == (list(cflags), True)
    assert len(lines(log, "shared.c")) == 1
    assert len(lines(log, "probe.c")) == 2  # the combined one (refused), the program


@needs_cc
def test_vector_math_that_does_not_link_is_found_by_the_combined_probe(monkeypatch):
    """A shared library may leave symbols undefined: the combined probe's link must fail
    where a vector function it calls is missing, as a program's does."""
    source = compiler._PROBE_SOURCE.replace("float expf(float);", "float pb_nope(float);")
    monkeypatch.setattr(compiler, "_PROBE_SOURCE",
                        source.replace("= expf(x[i])", "= pb_nope(x[i])"))
    argv, _ = compiler._found()
    cflags = tuple(compiler._cflags())
    assert compiler._probe(argv, cflags) == (list(cflags), False)


@needs_cc
def test_libraries_started_early_build_once(logged_cc):
    """Libraries started before the module's build (``start_libraries``, as a first
    compile does for the glue) are built once: the module waits for those builds."""
    log = logged_cc()
    compiler.start_libraries(LIBRARIES, {})
    assert linked_module("pb_t_su3").f(1.25) == 3.5
    assert len(lines(log, "libpbtwice.c")) == len(lines(log, "libpbinc.c")) == 1


@needs_cc
def test_a_library_rebuilds_without_a_flag_the_probes_reject(logged_cc):
    """A library builds before the probes answer, with every flag asked for; where the
    probes reject one, it is built again without it."""
    log = logged_cc(reject="-fopenmp")
    compiler._probes.clear()
    assert linked_module("pb_t_su4").f(1.25) == 3.5
    builds = lines(log, "libpbtwice.c")
    assert "-fopenmp" in builds[0] and "-fopenmp" not in builds[-1]


@needs_cc
def test_measured_choices_reach_the_builds(logged_cc, monkeypatch):
    """On a CPU with AVX-512 (as the tuning is told here), modules compile with the
    vector width measured fastest, and the packed library is told whether it computes
    the large products before any module calls it."""
    import ctypes

    from pullback.backends.c.build import tuning

    log = logged_cc()
    monkeypatch.setattr(tuning, "cpu_id", lambda: "flags : avx2 avx512f")
    monkeypatch.setattr(tuning, "measure_vector_width",
                        lambda *args: {"choice": "512", "seconds": {}})
    monkeypatch.setattr(tuning, "measure_gemm",
                        lambda *args: {"choice": "packed", "few": "blas"})
    monkeypatch.delenv("PULLBACK_GEMM", raising=False)
    compiler._probes.clear()
    packed = "int pb_gemm_packed_chosen = 0, pb_gemm_packed_few_chosen = 1;\n"
    module = compiler.build_module(add_source("pb_t_su5"), "pb_t_su5", headers=HEADERS,
                                   libraries={"pbpacked": packed})
    assert module.f is not None
    assert tuning.VECTOR_FLAG in lines(log, "pb_t_su5.c")[0]
    (library,) = (Path(module.__file__).parent).glob("libpbpacked-*.so")
    chosen = ctypes.CDLL(str(library))
    assert ctypes.c_int.in_dll(chosen, "pb_gemm_packed_chosen").value == 1
    assert ctypes.c_int.in_dll(chosen, "pb_gemm_packed_few_chosen").value == 0


def _linked_in_child(name: str) -> float:
    return linked_module(name).f(1.25)


@needs_cc
def test_a_child_forked_while_libraries_build_builds_its_own(logged_cc):
    """The worker threads building libraries do not survive fork: a child forked while
    they run starts its own builds instead of waiting for them forever."""
    import multiprocessing

    logged_cc()
    compiler.start_libraries(LIBRARIES, {})
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_linked_in_child, ("pb_t_su6",)).get(timeout=120) == 3.5
    assert linked_module("pb_t_su7").f(1.25) == 3.5


@needs_cc
def test_large_products_link_the_packed_kernels_only_where_they_may_run(logged_cc,
                                                                        monkeypatch):
    """Without AVX-512 a module's calls of the packed kernels compile away, and it does not
    link (or wait for) their library: it loads and computes the product, its symbols all
    resolved.  With AVX-512, or flags of the user's, the library is linked."""
    import numpy as np

    import pullback as pb
    from pullback.backends.c.build import libraries, tuning

    log = logged_cc()
    a = np.random.default_rng(0).standard_normal((96, 160)).astype(np.float32)
    got = pb.jit(lambda x: np.tanh(x @ x.T), backend="c")(a)
    np.testing.assert_allclose(got, np.tanh(a.astype(np.float64) @ a.T.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)
    avx512 = tuning.has_avx512(tuning.cpu_id())
    assert bool(lines(log, "libpbpacked.c")) == avx512
    calls = "pb_gemm_packed_float32(1, 1, 1, 1, a, 0, b, 0, NULL, c);"
    assert ("pbpacked" in libraries.needed(calls)) == avx512
    monkeypatch.setattr(tuning, "cpu_id", lambda: "flags : avx2 avx512f")
    assert "pbpacked" in libraries.needed(calls)
    monkeypatch.setattr(tuning, "cpu_id", lambda: "flags : avx2")
    assert "pbpacked" not in libraries.needed(calls)
    monkeypatch.setenv("PULLBACK_CFLAGS", "-mavx512f")
    assert "pbpacked" in libraries.needed(calls)
