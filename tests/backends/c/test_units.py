"""A large function cut into parts, compiled as several translation units at once."""

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import cache, compiler, units
from pullback.backends.c.emit import parts

from .build_child import module_source

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


@pytest.fixture
def cut(tmp_path, monkeypatch):
    """Every function of more than a few lines cut into parts of a few lines, built as
    three units, in a fresh cache."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PULLBACK_TIERED", "0")
    monkeypatch.setattr(parts, "PART_LINES", 6)
    monkeypatch.setattr(units, "usable_cores", lambda: 3)
    return tmp_path / "cache"


def test_units_deal_every_piece_once_after_the_head():
    text = "\n".join(["head", units.MARK, "a\na\na", units.MARK, "b", units.MARK, "c\nc",
                      units.MARK, "entry"])
    made = units.units(text, 2)
    assert len(made) == 2
    assert all(u.startswith("head\n") for u in made)
    bodies = sorted(line for u in made for line in u.splitlines()[1:])
    assert bodies == sorted("a a a b c c entry".split())
    assert units.units(text, 1) == [text]
    assert units.units("head\nbody", 4) == ["head\nbody"]
    assert len(units.units(text, 9)) == 4  # no empty unit


def mlp_loss(w1, w2, x, y):
    h = np.tanh(x @ w1)
    h = h * (h > 0.1) + 0.5 * np.exp(-h * h)
    out = h @ w2
    d = out - y
    return (d * d).mean() + 0.01 * (w1 * w1).sum() + np.abs(w2).max()


def scalar_loops(x, n):
    total = 0.0
    k = 0
    while k < n:
        total = total + np.sin(x[k % 3]) * k
        k += 1
    best = x[0]
    for i in range(n):
        if x[i % 3] * i > best:
            best = x[i % 3] * i
    return total + best + np.cumsum(x).sum()


def _central(f, args, k, eps=1e-6):
    a = [np.array(v, dtype=np.float64) for v in args]
    g = np.zeros_like(a[k])
    for i in np.ndindex(a[k].shape):
        hi = [v.copy() for v in a]
        lo = [v.copy() for v in a]
        hi[k][i] += eps
        lo[k][i] -= eps
        g[i] = (f(*hi) - f(*lo)) / (2 * eps)
    return g


@needs_cc
def test_a_cut_gradient_gives_numpy_answers(cut):
    rng = np.random.default_rng(0)
    args = (rng.normal(size=(5, 7)), rng.normal(size=(7, 3)), rng.normal(size=(4, 5)),
            rng.normal(size=(4, 3)))
    step = pb.jit(pb.value_and_grad(mlp_loss, argnums=(0, 1)), backend="c")
    source = step.lower(*args).source
    assert source.count(units.MARK) >= 3 and f"{units.PART} int pbf_0_part1(" in source
    assert len(units.units(source, 3)) == 3
    value, (g1, g2) = step(*args)
    np.testing.assert_allclose(value, mlp_loss(*args), rtol=1e-12)
    np.testing.assert_allclose(g1, _central(mlp_loss, args, 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g2, _central(mlp_loss, args, 1), rtol=1e-6, atol=1e-8)


@needs_cc
def test_scalars_carried_across_parts_and_loops_on_data(cut):
    """Variables a part updates that later parts read (loop counters, running totals)
    go by address; loops polling for Ctrl-C poll in each part."""
    x = np.array([0.3, -1.2, 2.0])
    f = pb.jit(scalar_loops, backend="c")
    source = f.lower(x, np.int64(50)).source  # a run-time bound: the loops stay rolled
    assert source.count(units.MARK) >= 2 and "pb_at_" in source and "pb_ticks" in source
    for n in (0, 1, 50):
        np.testing.assert_allclose(f(x, np.int64(n)), scalar_loops(x, n), rtol=1e-12)


@needs_cc
def test_a_cut_module_is_cached_like_any(cut, monkeypatch):
    """One cache entry, found by a second compile of the same function (no new build),
    and a damaged one is rebuilt rather than loaded."""
    x = np.array([0.3, -1.2, 2.0])
    assert pb.jit(scalar_loops, backend="c")(x, 7) == pytest.approx(scalar_loops(x, 7))
    (so,) = cut.glob("pb_*.so")
    built = so.stat().st_mtime_ns
    assert pb.jit(scalar_loops, backend="c")(x, 7) == pytest.approx(scalar_loops(x, 7))
    assert so.stat().st_mtime_ns == built
    assert compiler.build_module(*_cut_module("pb_t_cut")).f(3.0) == 14.0
    (so,) = cut.glob("pb_t_cut-*.so")
    data = so.read_bytes()
    damaged = so.with_name("damaged")
    damaged.write_bytes(data[: len(data) // 2])
    damaged.replace(so)  # a new file: this process's mapping of the old one stays
    monkeypatch.setattr(cache, "_modules", {})  # as in a new process
    with pytest.warns(RuntimeWarning, match="is damaged"):
        assert compiler.build_module(*_cut_module("pb_t_cut")).f(3.0) == 14.0
    assert so.read_bytes() == data


_PARTS = [r"PB_PART double pb_t_twice(double x) { return 2 * x; }",
          r"PB_PART double pb_t_inc(double x) { return x + 1 + BUMP; }"]


def _cut_module(name: str, broken: bool = False) -> tuple[str, str]:
    """A module f(x) = 4x + 2 whose two helpers are pieces of their own."""
    body = r"""
#ifndef PB_PART
#define PB_PART static
#endif
#define BUMP 0
PB_PART double pb_t_twice(double x);
PB_PART double pb_t_inc(double x);
static PyObject *f(PyObject *self, PyObject *args) {
    double x;
    if (!PyArg_ParseTuple(args, "d", &x)) return NULL;
    return PyFloat_FromDouble(pb_t_twice(pb_t_inc(pb_t_twice(x))));
}
"""
    pieces = [*_PARTS[:1], _PARTS[1].replace("BUMP", "BUMP +" if broken else "BUMP")]
    text = module_source(name, "", body)
    head, tail = text.split("static PyMethodDef")
    return "\n".join([head, units.MARK, *(f"{p}\n{units.MARK}" for p in pieces),
                      "static PyMethodDef" + tail]), name


@needs_cc
def test_units_link_into_one_module_and_a_failing_unit_is_said(cut):
    module = compiler.build_module(*_cut_module("pb_t_units"))
    assert module.f(3.0) == 14.0
    assert module.f(0.0) == 2.0
    with pytest.raises(compiler.BuildError, match="unit") as failed:
        compiler.build_module(*_cut_module("pb_t_broken", broken=True))
    assert "source kept in" in str(failed.value)
