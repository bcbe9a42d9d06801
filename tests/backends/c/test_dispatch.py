"""The fast call path: a call whose arguments match a compiled specialisation goes
straight to native code (``Jitted._spec.fast``); every other call takes the general path and
still returns what plain Python returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.call import convention
from pullback.backends.c.emit.entry import BIG_RESULT
from pullback.errors import UnsupportedError


def add_one(x):
    return x + 1


def scaled_total(x, s):
    return (x * s).sum()


def pair(x, y):
    return np.sum(x * y), x - y


def as_list(x, y):
    return [x * y, y - x]


def nested(x, y):
    return np.sum(x * y), (x - y, [x * 2, float(np.max(y))])


def python_float(x):
    return float(np.max(x))


def index_at(x, i):
    return x[i] * 2.0


def zebra_apple(zebra, apple):
    """Flattened arguments follow names (apple, zebra), calls follow positions."""
    return zebra - 2.0 * apple


def positive(x):
    assert np.all(x > 0), "x must be positive"
    return x * 2


def nonnegative(x):
    assert np.all(x > 0), "x must not be negative"
    return x * 2


X = np.arange(10.0, dtype=np.float32)
Y = np.linspace(-1.0, 1.0, 10).astype(np.float32)


def _fast(fn, *args):
    """Compile ``fn`` natively and check its second call takes the fast path."""
    jitted = pb.jit(fn, backend="c")
    first = jitted(*args)
    assert jitted._spec.fast is not None, "expected a fast entry after the first call"
    return jitted, first


def _same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.asarray(got).shape == np.asarray(want).shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("fn,args", [
    (add_one, (X,)),
    (scaled_total, (X, 2.5)),
    (pair, (X, Y)),
    (as_list, (X, Y)),
    (nested, (X, Y)),
    (python_float, (Y,)),
    (zebra_apple, (X, Y)),
])
def test_fast_path_equals_python(fn, args):
    jitted, first = _fast(fn, *args)
    assert (jitted._spec.fast.nest is not None) == (fn is nested)  # results nested in Python
    _same(first, fn(*args))
    _same(jitted(*args), fn(*args))
    other = tuple(a * 3 if isinstance(a, np.ndarray) else a for a in args)
    _same(jitted(*other), fn(*other))


def test_fast_results_are_fresh():
    jitted, _ = _fast(add_one, X)
    a, b = jitted(X), jitted(X)
    assert a is not b and a.flags.writeable and a.flags.owndata
    a[0] = 100.0
    np.testing.assert_array_equal(b, X + 1)


@pytest.mark.parametrize("other", [
    np.arange(12.0, dtype=np.float32),  # another shape
    np.arange(10.0),  # another dtype
    np.arange(20.0, dtype=np.float32)[::2],  # not contiguous
    np.arange(10.0, dtype=np.float32).reshape(2, 5),  # another rank
    np.float32(3.0),  # a NumPy scalar
])
def test_other_arguments_take_the_general_path(other):
    jitted, _ = _fast(add_one, X)
    _same(jitted(other), add_one(other))
    _same(jitted(X), add_one(X))


def test_byte_swapped_arrays_are_refused_not_misread():
    jitted, _ = _fast(add_one, X)
    with pytest.raises(UnsupportedError, match="dtype >f4"):
        jitted(np.arange(10.0, dtype=">f4"))


def test_float_parameter_accepts_only_python_floats():
    jitted, _ = _fast(scaled_total, X, 2.5)
    _same(jitted(X, 4.0), scaled_total(X, 4.0))
    _same(jitted(X, np.float64(4.0)), scaled_total(X, np.float64(4.0)))  # strongly typed
    _same(jitted(X, np.float32(4.0)), scaled_total(X, np.float32(4.0)))
    _same(jitted(X, 4), scaled_total(X, 4))  # an int is static
    _same(jitted(x=X, s=1.5), scaled_total(X, 1.5))  # keywords


def repeat(n, x, scale):
    for _ in range(n):
        x = x * scale + 1.0
    return x


def test_python_scalars_a_specialisation_is_for_are_checked_on_the_fast_path():
    jitted, first = _fast(repeat, 3, X, 0.5)
    _same(first, repeat(3, X, 0.5))
    assert jitted._spec.fast.guard == (3, ((0, int, 3),))  # n is part of the specialisation
    _same(jitted(3, Y, 2.0), repeat(3, Y, 2.0))
    for n in (4, True, 3, 0, 4):  # another value, type: compiled (or found) again
        _same(jitted(n, X, 0.25), repeat(n, X, 0.25))
    assert jitted._spec.fast.guard[1] == ((0, int, 4),)
    _same(jitted(4, X, 0.25), repeat(4, X, 0.25))
    with pytest.raises(TypeError):
        jitted(4, X)


def test_same_array_twice_is_one_parameter():
    jitted, _ = _fast(pair, X, Y)
    _same(jitted(X, X), pair(X, X))
    _same(jitted(Y, X), pair(Y, X))


def test_faults_raise_through_the_fast_path():
    jitted, _ = _fast(index_at, X, np.int64(3))
    _same(jitted(X, np.int64(-2)), index_at(X, np.int64(-2)))
    with pytest.raises(IndexError, match="out of bounds"):
        jitted(X, np.int64(30))
    jitted, _ = _fast(positive, X + 1)
    with pytest.raises(AssertionError, match="x must be positive"):
        jitted(X - 1)


def test_same_code_keeps_its_own_messages():
    """Two functions compiling to the same C apart from their messages each raise their
    own (a module's hooks are shared by every function loaded from it)."""
    first, _ = _fast(positive, X + 1)
    second, _ = _fast(nonnegative, X + 1)
    with pytest.raises(AssertionError, match="x must be positive"):
        first(X - 1)
    with pytest.raises(AssertionError, match="x must not be negative"):
        second(X - 1)


def test_call_rejects_a_bad_form():
    staged, _ = pb.jit(add_one, backend="c").specialise(X)
    call = staged.runner.call
    with pytest.raises(TypeError):
        call((X,), b"\x00")
    with pytest.raises(ValueError, match="place"):
        call((X,), convention.form(convention.LIST, [(convention.ARRAY, 7)],
                                     [convention.ARRAY]))
    assert call((X, X), staged.runner.list_form) is NotImplemented


def test_native_is_the_default_backend(monkeypatch):
    monkeypatch.delenv("PULLBACK_BACKEND", raising=False)
    jitted = pb.jit(add_one)
    _same(jitted(X), add_one(X))
    assert jitted.backend == "c" and jitted._spec.fast is not None


def test_without_a_compiler_the_interpreter_runs(monkeypatch):
    monkeypatch.delenv("PULLBACK_BACKEND", raising=False)
    monkeypatch.setenv("PULLBACK_CC", "/nonexistent/pullback-cc")

    def scaled_mean(x, a):  # compiled nowhere else (specialisations are shared)
        return np.mean(x) * a

    jitted = pb.jit(scaled_mean)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # said once per process
        _same(jitted(X, 0.5), scaled_mean(X, 0.5))
    assert jitted.specialise(X, 0.5)[0].runner is None and jitted._spec.fast is None


_THREADS_CHILD = """
import ctypes, json, os
import numpy as np
import pullback as pb
from pullback.backends.c.build import compiler
from tests.backends.c.test_dispatch import add_one

pb.jit(add_one, backend="c")(np.ones(3))
blas = ctypes.CDLL(str(next((compiler._openblas() / "lib").glob("libscipy_openblas*.so"))))
omp = ctypes.CDLL("libgomp.so.1")
print(json.dumps([blas.scipy_openblas_get_num_threads(), omp.omp_get_max_threads()]))
"""


@pytest.mark.parametrize(("threads", "gemm"), [("1", "blas"), ("3", "blas"), ("2", "packed")])
def test_num_threads_sets_loops_and_blas(threads, gemm):
    """Also: idle OpenMP threads spin a while, then sleep (not so long where OpenBLAS
    computes the large products that they starve its threads; a little where the packed
    kernels do, to meet their next barrier)."""
    env = {**os.environ, "PULLBACK_NUM_THREADS": threads, "OMP_DISPLAY_ENV": "VERBOSE",
           "PULLBACK_GEMM": gemm}
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY",
                 "GOMP_SPINCOUNT"):
        env.pop(name, None)
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", _THREADS_CHILD], cwd=root, env=env,
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout.splitlines()[-1]) == [int(threads), int(threads)]
    spins = compiler.BLAS_SPIN if gemm == "blas" else compiler.SPIN
    assert f"GOMP_SPINCOUNT = '{spins}'" in proc.stderr


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_big_results_take_memory_numpy_freed_from_earlier_ones():
    """A result of at least ``BIG_RESULT`` bytes reuses the memory of one the caller
    dropped (no fresh pages to fault in); live results never share memory, and other
    arrays keep NumPy's own allocator."""
    from numpy._core.multiarray import get_handler_name

    n = BIG_RESULT // 8 + 1
    x = np.linspace(0, 1, n)
    f = pb.jit(lambda x: x * 2.0 + 1.0, backend="c")
    first = f(x)
    assert get_handler_name(first) == "pullback_kept"
    assert get_handler_name(np.empty(n)) == get_handler_name() == "default_allocator"
    where = _address(first)
    del first
    second = f(x)
    assert _address(second) == where
    third = f(x + 1.0)
    assert _address(third) != where
    np.testing.assert_array_equal(second, x * 2.0 + 1.0)
    np.testing.assert_array_equal(third, (x + 1.0) * 2.0 + 1.0)
    small = pb.jit(lambda x: x * 2.0, backend="c")(np.ones(4))
    assert get_handler_name(small) == "default_allocator"


def test_value_and_grad_and_other_pytrees_of_results_take_the_fast_path():
    from collections import namedtuple

    vg = pb.jit(pb.value_and_grad(scaled_total, argnums=(0, 1)), backend="c")
    want = vg(X, 2.5)
    assert vg._spec.fast is not None
    got = vg(X, 2.5)
    assert type(got) is tuple and type(got[1]) is tuple
    _same(got, want)
    Pair = namedtuple("Pair", "total diff")
    jitted = pb.jit(lambda x, y: Pair(np.sum(x), {"b": x - y, "a": [x + y]}), backend="c")
    first = jitted(X, Y)
    assert jitted._spec.fast is not None
    again = jitted(X, Y)
    assert type(again) is Pair and type(again.diff) is dict and list(again.diff) == ["b", "a"]
    _same(again.total, first.total)
    _same(again.diff["a"], first.diff["a"])
    _same(again.diff["b"], np.asarray(X - Y))
