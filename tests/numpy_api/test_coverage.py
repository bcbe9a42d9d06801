"""The committed coverage document is the one the registries generate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pullback.numpy_api import CALLABLES, coverage

DOC = Path(__file__).resolve().parents[2] / "docs" / "numpy_coverage.md"


def test_document_is_current():
    made_with = f"Made with NumPy {coverage.numpy_series()}:"
    if made_with not in DOC.read_text():
        pytest.skip(f"the document was made with another NumPy than {np.__version__}")
    assert DOC.read_text() == coverage.render(), (
        "docs/numpy_coverage.md is stale: python -m pullback.numpy_api.coverage > "
        "docs/numpy_coverage.md"
    )


def test_enough_callables_are_mapped():
    assert len(CALLABLES) >= 150
    assert f"**{len(coverage._listed())} distinct callables**" in coverage.render()


def test_every_callable_is_listed_once_under_its_module():
    groups = coverage.callables_by_module()
    private = [o for o in CALLABLES if (getattr(o, "__module__", None) or "").startswith(
        "pullback.") and o.__name__.startswith("_")]  # helpers registered onto primitives
    assert sum(len(v) for v in groups.values()) == len(CALLABLES) - len(private)
    assert not any("._" in e for v in groups.values() for e in v)
    assert list(groups)[:2] == ["numpy", "numpy.linalg"]
    assert "`np.absolute` (also `abs`)" in groups["numpy"]
    assert "`math.sqrt`" in groups["math"]
    assert "`builtins.round`" in groups["builtins"]
