"""The fast paths of run-time recursion in the generated C keep plain Python's answers:
one-element reads ``a[i, j]`` as scalar loads, reverse mode adding an indexed read's
cotangent into one element of a running cotangent that backward functions take over
(buffer donation) instead of returning whole arrays, the AD tape as a chain of chunks,
and ``log2`` of powers of two without libm."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from benchmarks.gradbench.evals.det import det
from pullback.backends.c.build import compiler
from pullback.backends.c.plan.donation import donations
from pullback.ir.core import Module

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(11)


def _c(fn):
    return pb.jit(fn, backend="c")


# -- expansion by minors (the GradBench tool's det): one element read per call ----------


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_expansion_by_minors_values_and_gradient(n):
    a = RNG.standard_normal((n, n))
    assert _c(det)(a) == pytest.approx(np.linalg.det(a), rel=1e-12, abs=1e-12)
    cofactors = np.linalg.det(a) * np.linalg.inv(a).T
    np.testing.assert_allclose(_c(pb.grad(det))(a), cofactors, rtol=1e-10, atol=1e-12)


def test_expansion_by_minors_reads_elements_without_buffers():
    src = _c(det).lower(RNG.standard_normal((4, 4))).source
    body = src[src.index("static int pbf_1(pb_ctx"):]
    body = body[body.index("{"):]
    assert "pb_alloc" not in body  # every a[row, j] is a load into a local


def test_the_backward_takes_its_running_cotangent_over():
    a = RNG.standard_normal((4, 4))
    lowered = _c(pb.grad(det)).lower(a)
    src = lowered.source
    bwd = [line for line in src.splitlines() if line.startswith("static int pbf_")
           and line.rstrip().endswith("{") and "const double *p1" in line]
    assert bwd  # the backward twin of ``det_of_minor``: (cotangent, running cotangent, tape)
    body = src[src.index(bwd[0]):]
    body = body[:body.index("\n}\n")]
    assert "double *q1 = ((double *)p1);" in body  # its own buffer: updated in place
    assert "pb_copy" not in body and "pb_alloc" not in body  # no array per call


# -- donation: who copies --------------------------------------------------------------


def bump(x: np.ndarray, k: np.int64) -> np.ndarray:
    """x + k, one recursive call per unit: the result is an update of the parameter."""
    if k == 0:
        return x * 1.0
    return bump(x, k - 1) + 1.0


def bump_then_read(x: np.ndarray, k: np.int64) -> np.ndarray:
    y = bump(x, k)
    return y * x  # x is read after the call: the caller keeps its buffer


def bump_dying(x: np.ndarray, k: np.int64) -> np.ndarray:
    return bump(x * 2.0, k)  # the operand dies at the call: handed over


@pytest.mark.parametrize("fn", [bump, bump_then_read, bump_dying])
def test_donated_parameters_keep_values(fn):
    x = RNG.standard_normal(7)
    np.testing.assert_allclose(_c(fn)(x, np.int64(4)), fn(x, np.int64(4)), rtol=1e-14)
    np.testing.assert_allclose(_c(fn)(x, np.int64(0)), fn(x, np.int64(0)), rtol=1e-14)


def test_donated_parameters_gradient():
    x = RNG.standard_normal(5)

    def loss(x):
        return np.sum(bump_then_read(x, np.int64(3)) ** 2)

    np.testing.assert_allclose(_c(pb.grad(loss))(x), central_difference(loss, x), rtol=1e-6)


def test_donation_analysis_picks_updated_parameters():
    module = Module.of(pb.jit(pb.grad(det)).lower(RNG.standard_normal((3, 3))).ir)
    picked = {f.name: donations(module).get(id(f), {}) for f in module.funcs.values()}
    # the backward twin takes its running cotangent (parameter 1) over as its result 0;
    # the forward twin only reads the matrix; the entry borrows its arguments
    assert any("bwd" in name and d == {1: 0} for name, d in picked.items())
    assert all(not d for name, d in picked.items() if "bwd" not in name)


# -- indexed reads inside recursion: cotangent windows -------------------------------------


def rsum(x: np.ndarray, i: np.int64) -> np.float64:
    """sum of x[i]**2 * x[1:][i - 1] from i on, one element read per call."""
    if i == x.shape[0]:
        return 0.0
    here = x[i] * x[i]
    if i > 0:
        here = here * x[1:][i - 1]
    return here + rsum(x, i + 1)


def test_window_cotangents_through_recursion():
    x = RNG.standard_normal(9)

    def f(x):
        return rsum(x, np.int64(0))

    assert _c(f)(x) == pytest.approx(f(x), rel=1e-13)
    np.testing.assert_allclose(_c(pb.grad(f))(x), central_difference(f, x), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(pb.jit(pb.grad(f), backend="interp")(x),
                               _c(pb.grad(f))(x), rtol=1e-13)


def pick(m: np.ndarray, i: np.int64, j: np.int64) -> np.float64:
    return m[i, j] * m[j, i]


def test_element_reads_check_bounds():
    m = RNG.standard_normal((3, 4))
    f = _c(pick)
    assert f(m, np.int64(2), np.int64(1)) == pytest.approx(m[2, 1] * m[1, 2])
    assert f(m, np.int64(-1), np.int64(0)) == pytest.approx(m[-1, 0] * m[0, -1])
    with pytest.raises(IndexError):
        f(m, np.int64(3), np.int64(0))


# -- the tape as chunks ------------------------------------------------------------------


def deep(x: np.float64, k: np.int64) -> np.float64:
    """k nested calls, each pushing a few mixed-size residuals."""
    if k == 0:
        return x
    y = deep(x, k - 1)
    flag = y > 0.0
    return np.sin(y) * 0.5 + (y * y if flag else y) * 0.25


def test_a_deep_recursion_crosses_many_tape_chunks():
    # 700 calls with a dozen bytes or more each: the first chunks (4 KiB, 8 KiB...), items
    # of 1 and 8 bytes so that chunk ends are left partly unused
    x = np.float64(0.3)
    k = np.int64(700)
    g = _c(pb.grad(deep))
    want = (deep(x + 1e-7, k) - deep(x - 1e-7, k)) / 2e-7
    assert g(x, k) == pytest.approx(want, rel=1e-5)
    assert g(x, k) == pytest.approx(want, rel=1e-5)  # again: the pool's chunks reused


def unrolled(x: np.ndarray, n: np.int64) -> np.float64:
    total = 0.0
    i = np.int64(0)
    while i < n:
        total = total + np.sin(x[i % x.shape[0]] * total + 1.0)
        i = i + 1
    return total


def test_a_long_loop_tape_over_several_chunks():
    x = RNG.standard_normal(5)
    n = np.int64(150_000)  # ~2.4 MB of residuals
    got = _c(pb.grad(unrolled))(x, n)
    want = pb.jit(pb.grad(unrolled), backend="interp")(x, np.int64(2000))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(_c(pb.grad(unrolled))(x, np.int64(2000)), want, rtol=1e-10)


# -- log2 in scalar code ---------------------------------------------------------------


def log2_of(x: np.float64) -> np.float64:
    return np.log2(x)


def log2_of32(x: np.float32) -> np.float32:
    return np.log2(x)


VALUES = [1.0, 2.0, 0.5, 1024.0, 2.0 ** -1022, 2.0 ** -1074, 2.0 ** 1023, 3.0, 0.1, 1e300,
          0.0, -0.0, -2.0, -1.0, np.inf, -np.inf, np.nan, 6.0, 2.0 ** 52 + 1]


def test_log2_in_scalar_code_matches_numpy():
    f = _c(log2_of)
    with np.errstate(all="ignore"):
        for v in VALUES:
            got, want = f(np.float64(v)), np.log2(np.float64(v))
            assert got == want or (np.isnan(got) and np.isnan(want)), v
    f32 = _c(log2_of32)
    with np.errstate(all="ignore"):
        for v in VALUES:
            x = np.float32(v)
            got, want = f32(x), np.log2(x)
            assert got == pytest.approx(want, rel=1e-6) or (np.isnan(got) and np.isnan(want)) \
                or got == want, v


def test_log2_of_a_one_bit_mask_is_its_bit_index():
    def index(mask: np.int64) -> np.int64:
        return np.int64(np.log2(mask))

    f = _c(index)
    for k in range(62):
        assert f(np.int64(1) << np.int64(k)) == k
