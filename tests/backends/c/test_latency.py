"""Tiered execution (``pullback/tiered.py``): a first call the interpreter runs quickly runs
there, its native code builds on a thread, and later calls (or ``wait``) wait for it and
run natively.  Dear interpreter runs (long scalar loops, ``while`` loops) compile before
their first call; a large module of theirs builds quickly first, and optimised on a
thread while calls run the quick one."""

from __future__ import annotations

import time

import numpy as np
import pytest

import pullback as pb
from pullback import api, tiered
from pullback.backends import interp
from pullback.errors import CompileError


@pytest.fixture(autouse=True)
def _tiered(monkeypatch):
    monkeypatch.setenv("PULLBACK_TIERED", "1")


def _affine(x):
    return 2.0 * x + 1.0


def _scalar_loop(x):
    s = 0.0
    for i in range(100_000):
        s = s + x[i % 4]
    return s


def _halvings(x):
    while x > 1.0:
        x = x / 2.0
    return x


def test_first_call_runs_on_the_interpreter_then_natively():
    f = pb.jit(_affine, backend="c")
    x = np.arange(6.0)
    np.testing.assert_array_equal(f(x), 2.0 * x + 1.0)
    staged, _ = f.specialise(x)
    assert staged.runner is None and tiered.pending(staged) and tiered.started(staged)
    np.testing.assert_array_equal(f(x), 2.0 * x + 1.0)  # waits for the build
    assert staged.runner is not None and not tiered.pending(staged)
    assert f._spec.fast is not None  # the native fast entry from the next call on


def test_wait_starts_a_build_no_call_started():
    f = pb.jit(_affine, backend="c")
    staged, _ = f.specialise(np.ones(2))
    assert tiered.pending(staged) and not tiered.started(staged)
    f.wait()
    assert staged.runner is not None


def test_dear_interpreter_runs_compile_first():
    x = np.arange(4.0)
    loop = pb.jit(_scalar_loop, backend="c")
    assert loop(x) == _scalar_loop(x)
    assert loop.specialise(x)[0].runner is not None
    whiles = pb.jit(_halvings, backend="c")
    assert whiles(np.float64(37.0)) == _halvings(37.0)
    assert whiles.specialise(np.float64(37.0))[0].runner is not None


def test_estimate_follows_the_structure():
    ir = pb.make_ir
    x = np.arange(4.0)
    assert interp.estimate(ir(_affine)(x)) < tiered.BUDGET_S
    assert interp.estimate(ir(_scalar_loop)(x)) > tiered.BUDGET_S
    assert interp.estimate(ir(_halvings)(np.float64(3.0))) is None


def test_off_by_setting(monkeypatch):
    monkeypatch.setenv("PULLBACK_TIERED", "0")
    f = pb.jit(lambda x: x - 3.0, backend="c")
    f(np.ones(3))
    assert f.specialise(np.ones(3))[0].runner is not None


def test_what_a_build_raises_is_raised_by_wait(monkeypatch):
    from pullback.backends import c

    def broken(func, donated=None, **_):
        raise CompileError("the build broke")

    monkeypatch.setattr(c, "compile_func", broken)
    f = pb.jit(lambda x: x * 5.0, backend="c")
    np.testing.assert_array_equal(f(np.ones(2)), 5.0)
    with pytest.raises(CompileError, match="the build broke"):
        f.wait()
    np.testing.assert_array_equal(f(np.ones(2)), 5.0)  # the interpreter runs it on


def test_unsupported_warns_when_the_build_is_waited_for(monkeypatch):
    from pullback.backends import c

    def declined(func, donated=None, **_):
        raise c.Unsupported("no code for this yet")

    monkeypatch.setattr(c, "compile_func", declined)
    f = pb.jit(lambda x: x * 7.0, backend="c")
    f(np.ones(2))
    with pytest.warns(RuntimeWarning, match="no code for this yet"):
        api.finish_builds()
    assert f.specialise(np.ones(2))[0].runner is None


def test_first_call_faults_as_plain_python():
    f = pb.jit(lambda x, i: x[i], backend="c")
    with pytest.raises(IndexError):
        f(np.ones(3), np.int64(5))
    f.wait()
    with pytest.raises(IndexError):
        f(np.ones(3), np.int64(5))


_TANH_STEPS = """
import numpy as np


def tanh_steps(x, n):
    s = x * 0.0
    for i in range(n):  # a run-time trip count: built before the first call
        s = s + np.tanh(x + s) * i
    return s + {salt}
"""


@pytest.fixture
def quick(monkeypatch, tmp_path):
    """Quick builds as a user gets them (no ``-O`` in PULLBACK_CFLAGS, as the suite's),
    for modules of any size; a function whose C no cache holds yet (a literal of its
    own)."""
    import importlib.util

    from pullback.backends.c import pipeline

    monkeypatch.delenv("PULLBACK_CFLAGS", raising=False)
    monkeypatch.setattr(pipeline, "QUICK_LINES", 1)
    path = tmp_path / "salted.py"
    path.write_text(_TANH_STEPS.format(salt=(time.time_ns() % 1_000_003) / 1_000_003))
    spec = importlib.util.spec_from_file_location("salted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tanh_steps


def test_a_large_module_builds_quickly_then_optimised(quick):
    f = pb.jit(quick, backend="c")
    x, n = np.linspace(-1.0, 1.0, 7), np.int64(4)
    first = f(x, n)
    np.testing.assert_allclose(first, quick(x, n), rtol=1e-14)
    staged, _ = f.specialise(x, n)
    built_quickly = staged.runner
    assert built_quickly.upgrade is not None and tiered.upgrading(staged)
    assert tiered.started(staged)  # from the end of the first call
    assert f._spec.fast is None  # calls look for the upgrade until it is taken
    f.wait()
    optimised = staged.runner
    assert optimised is not built_quickly and optimised.upgrade is None
    assert optimised.file != built_quickly.file and not tiered.pending(staged)
    np.testing.assert_array_equal(f(x, n), first)  # the same bits at either level
    assert f._spec.fast is not None


def test_calls_do_not_wait_for_the_optimised_build(quick, monkeypatch):
    from pullback.backends.c import pipeline

    release = __import__("threading").Event()
    build_module = pipeline.build_module

    def slow(*args, quick=False, **kwargs):
        if not quick:
            assert release.wait(30)
        return build_module(*args, quick=quick, **kwargs)

    monkeypatch.setattr(pipeline, "build_module", slow)
    f = pb.jit(quick, backend="c")
    x, n = np.ones(3), np.int64(2)
    for _ in range(3):
        np.testing.assert_allclose(f(x, n), quick(x, n), rtol=1e-14)
    staged, _ = f.specialise(x, n)
    assert tiered.upgrading(staged) and staged.runner.upgrade is not None
    release.set()
    f.wait()
    assert staged.runner.upgrade is None


def test_a_failed_optimised_build_keeps_the_quick_code(quick, monkeypatch):
    from pullback.backends.c import pipeline
    from pullback.backends.c.build.compiler import BuildError

    build_module = pipeline.build_module

    def failing(*args, quick=False, **kwargs):
        if not quick:
            raise BuildError("the optimiser broke")
        return build_module(*args, quick=quick, **kwargs)

    monkeypatch.setattr(pipeline, "build_module", failing)
    f = pb.jit(quick, backend="c")
    x, n = np.ones(3), np.int64(2)
    f(x, n)
    built_quickly = f.specialise(x, n)[0].runner
    with pytest.warns(RuntimeWarning, match="the optimiser broke"):
        f.wait()
    assert f.specialise(x, n)[0].runner is built_quickly
    np.testing.assert_allclose(f(x, n), quick(x, n), rtol=1e-14)


def test_the_index_records_the_optimised_module(quick, monkeypatch):
    monkeypatch.setenv("PULLBACK_VERIFY", "0")  # (the index is not used while verifying)
    x, n = np.ones(3), np.int64(2)
    f = pb.jit(quick, backend="c")
    f(x, n)
    f.wait()
    optimised = f.specialise(x, n)[0].runner
    f._spec.cache.clear()  # staged anew, as in a new process: found through the index
    f._spec.fast = None
    f(x, n)
    found = f.specialise(x, n)[0].runner
    assert found is not optimised and found.file == optimised.file
    assert found.upgrade is None


@pytest.mark.parametrize("setting", [("PULLBACK_CFLAGS", "-O2"), ("PULLBACK_TIERED", "0")])
def test_no_quick_build_where_the_level_is_set_or_tiering_is_off(quick, monkeypatch,
                                                                   setting):
    monkeypatch.setenv(*setting)
    f = pb.jit(quick, backend="c")
    x, n = np.ones(3), np.int64(2)
    f(x, n)
    staged, _ = f.specialise(x, n)
    assert staged.runner.upgrade is None and not tiered.pending(staged)


def test_quick_builds_the_ways_users_call(quick):
    """jit(grad(f)), grad(jit(f)), a jitted helper called from jitted code and a transform
    built in a loop: each gives float64 central differences' gradient (or plain Python's
    value) on the quick code and, after ``finish_builds``, the same bits optimised."""
    from .differences import central_difference

    n = np.int64(3)
    x = np.linspace(-1.0, 1.0, 5)

    def loss(v, k):
        return np.sum(quick(v, k) ** 2)

    want = central_difference(lambda v: loss(v, 3), x)
    helper = pb.jit(quick, backend="c")
    ways = {
        "jit(grad)": pb.jit(pb.grad(loss), backend="c"),
        "grad(jit)": pb.grad(pb.jit(loss, backend="c")),
        "helper": pb.jit(lambda v, k: helper(v, k) * 2.0, backend="c"),
    }
    first = {"jit(grad)": ways["jit(grad)"](x, n)}
    assert ways["jit(grad)"].specialise(x, n)[0].runner.upgrade is not None  # quick code
    first.update((name, f(x, n)) for name, f in ways.items() if name not in first)
    for _ in range(2):  # built inline, each time (a call may take the upgrade)
        first["loop"] = pb.jit(pb.grad(loss), backend="c")(x, n)
    for name in ("jit(grad)", "grad(jit)", "loop"):
        np.testing.assert_allclose(first[name], want, rtol=1e-6, atol=1e-8, err_msg=name)
    np.testing.assert_allclose(first["helper"], 2.0 * quick(x, n), rtol=1e-14)
    api.finish_builds()
    for name, f in ways.items():
        np.testing.assert_array_equal(f(x, n), first[name], err_msg=name)
