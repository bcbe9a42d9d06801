"""The package as a new user meets it: every public name is documented for ``help()``,
the version is ``pb.__version__`` (one source, the installed metadata agrees), and small
NumPy behaviours hold on both backends (``np.sign`` of a negative zero is +0.0)."""

from __future__ import annotations

import inspect
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import pullback as pb

ROOT = Path(__file__).resolve().parents[1]


def _doc(obj) -> str | None:
    """The docstring ``help(obj)`` leads with: a function's or class's own, an
    instance's class's (``pb.vjp``, ``pb.float64``)."""
    if inspect.isroutine(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
        return obj.__doc__
    return type(obj).__doc__


@pytest.mark.parametrize("name", pb.__all__)
def test_every_public_name_has_a_docstring(name):
    doc = _doc(getattr(pb, name))
    assert doc and doc.strip(), f"pb.{name} has no docstring"


def test_the_version_has_one_source():
    assert pb.__version__ == metadata.version("pullback")
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "pullback.__version__"}
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["pullback"]
    assert (ROOT / "pullback" / "py.typed").is_file()


def sign(x):
    return np.sign(x)


def scaled_sign(x):
    return np.sign(x) * 2.0  # the sign inside a fused kernel


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("fn", [sign, scaled_sign])
def test_sign_of_a_negative_zero_is_positive_zero(fn, backend):
    values = [np.float64(-0.0), np.float32(-0.0), -0.0,
              np.array([-0.0, 0.0, -2.0, np.nan, 3.0, -np.inf]),
              np.array([-0.0, 1.5, -0.0], np.float32)]
    for x in values:
        got, want = pb.jit(fn, backend=backend)(x), fn(x)
        assert type(got) is type(want) and np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
