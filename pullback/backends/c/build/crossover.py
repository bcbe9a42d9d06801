"""The inline-kernel/OpenBLAS crossover measured on this machine, per float type
(``tuning.measure_crossover``).  Lowering asks for it and so starts the measurement in
the background; a module's index key reads what is cached and starts nothing, so that
code lowered by the defaults before the measurement is not reused after it."""

from __future__ import annotations

from collections.abc import Mapping

from . import compiler, libraries, tuning

#: The crossovers found measured, by dtype name, for the rest of the process.
_measured: dict[str, Mapping[str, int]] = {}


def measured(dtype: str, start: bool = True) -> Mapping[str, int]:
    """The most work each kind of product of ``dtype`` runs inline, as measured (once per
    compiler, flags, kernels, OpenBLAS and CPU); empty until then, the measurement
    started unless ``start`` is false (``tuning.measured_later``)."""
    found = _measured.get(dtype)
    if found is None:
        try:
            record = _measurement(dtype, start)
        except compiler.BuildError:  # no compiler or no OpenBLAS: nothing to race
            return {}
        if record is None:
            return {}
        found = _measured[dtype] = record["choice"]
    return found


def cached() -> list[Mapping[str, int]]:
    """The crossovers measured so far, per float type (empty where not yet), starting
    nothing: part of a module's index key (``call/index.py``)."""
    return [measured(dtype, start=False) for dtype in ("float32", "float64")]


def _measurement(dtype: str, start: bool) -> dict | None:
    argv, version = compiler._found()
    name = f"pbkernels_{dtype}"
    source = libraries.LIBRARIES[name][0]
    cflags = compiler._cflags()
    openblas = compiler.openblas_library()
    key = [list(argv), version, cflags, source, libraries.HEADERS["kernels.h"],
           tuning.blas_measured(openblas),
           tuning.cpu_id(), tuning.CROSSOVER_LADDERS, tuning.CROSSOVER_DEFAULTS]
    if not start:
        return tuning.cached("crossover", key)

    def measure() -> dict:  # the kernels' library, built or joining a module's build of it
        (kernels,) = compiler._start([compiler._library(argv, version, tuple(cflags), name,
                                                        source, dict(libraries.HEADERS))])
        return tuning.measure_crossover(kernels.result(), openblas, compiler.BLAS_PREFIX,
                                        dtype)

    return tuning.measured_later("crossover", key, measure)
