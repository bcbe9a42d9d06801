"""The benchmark harness's honesty features: the machine recorded with every result, the
caller's BLAS core choice not passed to the measuring processes, and the variant that
keeps results alive (each result held until ``keep`` later calls have returned)."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _harness as H  # noqa: E402


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The harness's state as in a measuring process."""
    monkeypatch.setattr(H, "_state", {"rows": [], "notes": [], "threads": 1, "quick": True,
                                      "unit": "ms", "out": str(tmp_path / "rows.json"),
                                      "env0": {}, "process": "numpy", "asked": []})


def test_cpu_record_names_model_flags_and_count() -> None:
    rec = H.cpu()
    assert rec["cpu"] and rec["cpus"] >= 1
    assert set(rec["cpu_flags"]) <= set(H.CPU_FLAGS)
    line = H.cpu_line({"cpu": "X", "cpu_flags": ["avx2", "fma"], "cpus": 2, "thp": "never"})
    assert line == ("X (2 CPUs; flags: avx2 fma, no AVX-512; transparent huge pages: "
                    "never)")
    assert "no AVX-512" not in H.cpu_line({"cpu": "X", "cpu_flags": ["avx512f"], "cpus": 1})


def test_children_do_not_get_the_callers_blas_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    env = H._thread_env(1, {0})
    assert "OPENBLAS_CORETYPE" not in env and env["OPENBLAS_NUM_THREADS"] == "1"
    assert any("OPENBLAS_CORETYPE=Haswell" in n for n in H._removed_env())


class _Result:
    """A result whose lifetime a weak reference can watch."""


def test_kept_variant_holds_the_last_results_alive(child: None) -> None:
    made: list[weakref.ref] = []

    def fn() -> _Result:
        out = _Result()
        made.append(weakref.ref(out))
        alive = sum(r() is not None for r in made)
        peak[0] = max(peak[0], alive)
        return out

    peak = [0]
    row = H.measure("sys", "grad", fn, keep=3, min_reps=8, max_reps=8, target_s=1e-9)
    assert row["what"] == "grad (kept)" and row["first_s"] is None
    assert peak[0] == 4  # three kept and the one being made
    gc.collect()
    assert all(r() is None for r in made)  # released once the row is measured
    made.clear()
    peak[0] = 0
    H.measure("sys", "grad", fn, min_reps=8, max_reps=8, target_s=1e-9)
    assert peak[0] == 1


def test_each_system_gets_a_process_of_its_own() -> None:
    asked = ["numpy", "jax", "pullback", "jax", "torch", "torch.compile"]
    assert H.processes(asked, None) == ["pullback", "numpy", "jax", "torch", "torch.compile"]
    assert H.processes(asked, "torch,pullback") == ["pullback", "torch"]
    assert H.processes(asked, "jax") == ["jax"]
    assert H.processes([], None) == ["pullback"]


@pytest.mark.parametrize(("process", "measured"), [
    ("pullback", {"pb", "bound"}), ("torch", {"torch"}), ("jax", set()),
    (H.REFERENCE, set())])
def test_a_process_measures_only_its_own_rows(child: None, process: str,
                                              measured: set[str]) -> None:
    H._state["process"] = process
    calls: list[str] = []
    for system, kind in (("pb", "pullback"), ("bound", "bound")):
        H.measure(system, "grad", lambda s=system: calls.append(s), kind=kind, min_reps=1,
                  max_reps=1, target_s=1e-9)
    if H.want("torch"):  # as the scripts guard their peers
        H.measure("torch", "grad", lambda: calls.append("torch"), min_reps=1, max_reps=1,
                  target_s=1e-9)
    assert {r["system"] for r in H._state["rows"]} == set(calls) == measured
    assert H._state["asked"] == ["torch"]


def test_shared_values_reach_later_processes(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("PB_BENCH_SHARED", str(tmp_path))
    assert H.shared("reference") is None
    assert H.share("reference", {"lstm": [2.5, 1.25]}) == {"lstm": [2.5, 1.25]}
    assert H.shared("reference") == {"lstm": [2.5, 1.25]}
