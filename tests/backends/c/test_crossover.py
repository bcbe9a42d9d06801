"""The crossover between the inline product kernel and BLAS, measured on the machine
(issue 24): the race's answer is what lowering uses, once measured (in the background,
never waited for) and cached for later processes; a product equals NumPy on either side.
The vector width is measured where the CPU leaves a choice, and module builds use it."""

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler, crossover, libraries, tuning
from pullback.backends.c.call import index
from pullback.backends.c.loops.ir import Gemm, walk
from pullback.backends.c.lower import products
from pullback.ir.types import float32

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")
MEASURED = products.measured_crossover  # conftest.py pins it to the defaults; not here
AVX512 = "flags : fpu sse2 avx2 avx512f avx512bw"


@pytest.fixture
def measuring(tmp_path, monkeypatch):
    """Lowering by the measured crossover, from a fresh cache, in a fresh process state."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(products, "measured_crossover", MEASURED)
    monkeypatch.setattr(crossover, "_measured", {})
    monkeypatch.setattr(tuning, "_later", {})


def _forced(direct: int, go: threading.Event | None = None):
    """A race whose answer is ``direct`` for the 16-row products (once ``go`` is set),
    counting its runs."""
    runs = []

    def race(kernels, openblas, prefix, dtype):
        runs.append(dtype)
        if go is not None:
            go.wait()
        return {"choice": {"direct": direct, "panels": 1 << 13, "tile": 1 << 20,
                           "few": 1 << 20}, "seconds": {}}

    return race, runs


def _product(a, b):
    return a @ b


def _blas(a, b) -> list[bool]:
    lowered = c.source_of(pb.jit(_product, backend="c").lower(a, b).ir)
    return [s.blas for f in lowered.module.funcs for s in walk(f.body) if isinstance(s, Gemm)]


@pytest.mark.parametrize(("a_b", "boundary"), [
    (((16, 64), (64, 64)), 1 << 16),  # 16 rows, B as it is: "direct"
    (((16, 512), (512, 16)), 1 << 15),  # B narrower than two vectors: copied in panels
    (((4, 256), (256, 256)), 1 << 20),  # one tile of rows
])
def test_the_kind_of_a_product_picks_its_crossover(a_b, boundary):
    (m, k), (_, n) = a_b
    kind = products.product_kind(float32, m, n, False)
    assert products.GEMM_INLINE_MAX_WORK[kind] == boundary
    ladder = tuning.CROSSOVER_LADDERS[kind]
    works = [a * b * c for a, b, c, _ in ladder]
    assert works == [works[0] << i for i in range(len(works))]  # each twice the last
    assert works[0] < m * n * k <= works[-1]  # the measurement decides this one
    assert all(products.product_kind(float32, *shape[:2], shape[3]) == kind
               for shape in ladder)  # the race times products of this kind


@pytest.mark.parametrize(("inline", "blas", "default", "most"), [
    ([1, 2, 4, 8], [2, 3, 3, 5], 8, 2),  # BLAS wins from the third work on
    ([1, 2, 4, 8], [2, 3, 5, 9], 1, 8),  # never: the ladder's top
    ([1, 2, 4, 8], [0.5, 1, 2, 4], 8, 1),  # always: its foot (inline below the ladder)
    ([1, 2, 4, 8, 16], [2, 3, 3, 5, 17], 16, 2),  # one bad timing of BLAS's moves nothing
    ([1, 2, 4, 8], [2, 3, 4.1, 5], 8, 2),  # within the margin: a tie, BLAS's
])
def test_the_crossover_makes_the_least_time_over_the_ladder(inline, blas, default, most):
    """The inline kernel must win by ``tuning.MARGIN``; a tie is BLAS's."""
    seconds = {1 << i: {"inline": t, "blas": u}
               for i, (t, u) in enumerate(zip(inline, blas, strict=True))}
    assert tuning.choose_crossover(seconds, default) == most


def test_the_default_stays_unless_the_race_beats_it_by_the_margin():
    # all inline (its times made 5% longer): 1.05 * 2.11 * 4.21; BLAS past the first
    # work: 1.05 * 2.1 * 4.1, 3% less
    seconds = {1: {"inline": 1.0, "blas": 2.0}, 2: {"inline": 2.0, "blas": 2.1},
               4: {"inline": 4.0, "blas": 4.1}}
    assert tuning.choose_crossover(seconds, 4) == 4
    seconds[4]["blas"] = 3.0  # now 29% less
    assert tuning.choose_crossover(seconds, 4) == 1


@needs_cc
@pytest.mark.parametrize("direct", [1 << 15, 1 << 17])
def test_lowering_uses_the_measured_crossover_once_measured(measuring, monkeypatch, direct):
    """The first product whose lowering the race decides starts it and goes by the
    default meanwhile; once it ends, the 16x64x64 product (2^16 multiply-adds) is a
    BLAS call where the race put the crossover below it, inline where above; it equals
    NumPy either way."""
    go = threading.Event()
    race, runs = _forced(direct, go)
    monkeypatch.setattr(tuning, "measure_crossover", race)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 64), np.float32), rng.standard_normal((64, 64), np.float32)
    assert _blas(a, b) == [False]  # the default, 2^16, while the race runs
    go.set()
    tuning.wait_later()
    assert runs == ["float32"]
    assert products.measured_crossover(float32)["direct"] == direct
    assert _blas(a, b) == [direct < 1 << 16]
    np.testing.assert_allclose(pb.jit(_product, backend="c")(a, b),
                               a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_products_outside_every_ladder_start_no_race(measuring, monkeypatch):
    def race(*args):
        raise AssertionError("measured")

    monkeypatch.setattr(tuning, "measure_crossover", race)
    small = np.ones((16, 8), np.float32), np.ones((8, 32), np.float32)  # 2^12
    large = np.ones((128, 128), np.float32), np.ones((128, 128), np.float32)  # 2^21
    assert (_blas(*small), _blas(*large)) == ([False], [True])
    assert not tuning._later


_LATER_PROCESS = """
import json
from pullback.backends.c.build import tuning
from pullback.backends.c.lower import products
from pullback.ir.types import float32

def race(*args):
    raise AssertionError("measured again")

tuning.measure_crossover = race
print(json.dumps(dict(products.measured_crossover(float32))))
"""


@needs_cc
def test_the_measured_crossover_is_cached_for_later_processes(measuring, monkeypatch):
    race, runs = _forced(1 << 14)
    monkeypatch.setattr(tuning, "measure_crossover", race)
    assert products.measured_crossover(float32) == {}  # started, not waited for
    tuning.wait_later()
    assert products.measured_crossover(float32)["direct"] == 1 << 14
    later = subprocess.run([sys.executable, "-c", textwrap.dedent(_LATER_PROCESS)],
                           capture_output=True, text=True, check=False)
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["direct"] == 1 << 14
    assert runs == ["float32"]


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_race_times_both_kernels_on_every_product(measuring, dtype):
    name = f"pbkernels_{dtype}"
    kernels = compiler.library_path(name, libraries.LIBRARIES[name][0])
    ladders = {"direct": ((16, 32, 16, False), (16, 32, 32, False)),
               "panels": ((16, 32, 16, True),)}
    record = tuning.measure_crossover(kernels, compiler.openblas_library(),
                                      compiler.BLAS_PREFIX, dtype, ladders)
    assert set(record["seconds"]) == set(ladders) == set(record["choice"])
    assert list(record["seconds"]["direct"]) == [1 << 13, 1 << 14]
    assert all(0 < t < 0.01 for kind in record["seconds"].values()
               for race in kind.values() for t in race.values())
    defaults = tuning.CROSSOVER_DEFAULTS  # where the race does not beat them
    assert record["choice"]["direct"] in (1 << 13, 1 << 14, defaults["direct"])
    assert record["choice"]["panels"] in (1 << 13, defaults["panels"])


@needs_cc
def test_modules_build_with_the_vector_width_measured_on_an_avx512_cpu(tmp_path,
                                                                      monkeypatch):
    """Where the CPU has AVX-512, the width is measured (not taken from its vendor) with
    the probes, once, and the module's compile gets the measured flag."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "cpu_id", lambda: AVX512)
    monkeypatch.setattr(compiler, "_probes", {})
    widths = []

    def measure(argv, flags, mvec):
        widths.append(argv)
        return {"choice": "512", "seconds": {"default": 2e-3, "512": 1e-3}}

    commands = []

    def compile_(command, *args, **kwargs):
        commands.append(command)
        raise RuntimeError("compiled")

    monkeypatch.setattr(tuning, "measure_vector_width", measure)
    monkeypatch.setattr(compiler, "_compile", compile_)
    with pytest.raises(RuntimeError, match="compiled"):
        compiler.build_module("int x;", "pb_width_test")
    assert tuning.VECTOR_FLAG in commands[0]
    monkeypatch.setattr(compiler, "_probes", {})  # as a later process: read from the cache
    with pytest.raises(RuntimeError, match="compiled"):
        compiler.build_module("int y;", "pb_width_test")
    assert tuning.VECTOR_FLAG in commands[1] and len(widths) == 1


@needs_cc
def test_a_module_lowered_before_the_measurement_is_not_reused_after_it(measuring, monkeypatch):
    """The call index keys a module by the crossovers cached so far: the module a first
    process lowered by the defaults while the race ran is not what a later process,
    which finds the race's answer, loads (asking the key starts no race)."""
    monkeypatch.setattr(tuning, "measure_crossover", pytest.fail)
    before = index._settings()
    assert not tuning._later
    race, runs = _forced(1 << 14)
    monkeypatch.setattr(tuning, "measure_crossover", race)
    assert products.measured_crossover(float32) == {}
    tuning.wait_later()
    monkeypatch.setattr(crossover, "_measured", {})  # a later process
    after = index._settings()
    assert after != before and after[-1][0]["direct"] == 1 << 14
