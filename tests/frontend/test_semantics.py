"""Semantics the corpus does not pin down on its own: effects in program order, views,
entangled aliases, and what jit hands back."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb


def report(x):
    for i in range(x.shape[0]):
        if x[i] > 0:
            print(f"x[{i}] = {x[i]:.2f}")
        else:
            print("skip", i)
    print("total", x.sum())
    return x.sum()


def test_print_runs_at_run_time_in_program_order(capsys):
    x = np.array([1.5, -1.0, 2.25])
    report(x)
    want = capsys.readouterr().out
    f = pb.jit(report)
    f(x)
    assert capsys.readouterr().out == want
    f(x)  # cached: printing is still a run-time effect
    assert capsys.readouterr().out == want


def transpose_write(m):
    t = m.T
    t[0, 1] = 7.0
    r = m.reshape(-1)
    r[0] = -1.0
    return m


def test_views_from_transpose_and_reshape_write_through():
    m = np.arange(6.0).reshape(2, 3)
    want = transpose_write(m.copy())
    got = pb.jit(transpose_write)(m.copy())
    np.testing.assert_array_equal(got, want)


def reshape_of_strided(m):
    v = m[:, ::2].reshape(-1)
    m[0, 0] = 9.0
    return v.sum()


def test_reshape_of_a_strided_view_may_alias_and_is_refused_after_a_write():
    with pytest.raises(pb.UnsupportedError, match="share memory"):
        pb.jit(reshape_of_strided)(np.ones((2, 4)))


def assert_positive(x):
    assert x.min() > 0, f"min is {x.min()}"
    return np.log(x)


def test_assert_message_formats_run_time_values():
    f = pb.jit(assert_positive)
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), np.log([1.0, 2.0]))
    with pytest.raises(AssertionError, match=r"min is -3\.0"):
        f(np.array([1.0, -3.0]))


def scalars(x, a):
    return x.sum(), a * 2, float(x[0]), int(x.shape[0]), x[0] > 0


def test_result_kinds_match_python():
    x = np.array([1.0, 2.0])
    got, want = pb.jit(scalars)(x, 1.5), scalars(x, 1.5)
    assert [type(g) for g in got] == [type(w) for w in want]
    assert got == want


TABLE = np.array([1.0, 2.0, 3.0])


def scale_by_table(x):
    return x * TABLE


def overwrite_table(x):
    TABLE[0] = 0.0
    return x * TABLE


def test_global_arrays_are_read_and_written_as_python_does():
    x = np.ones(3)
    np.testing.assert_array_equal(pb.jit(scale_by_table)(x), scale_by_table(x))
    try:
        np.testing.assert_array_equal(pb.jit(overwrite_table)(x), [0.0, 2.0, 3.0])
        assert TABLE[0] == 0.0  # written through, as plain Python writes it
    finally:
        TABLE[0] = 1.0


def checked(x, n):
    if x.sum() > 0:
        assert n > 5, "n too small"
        return x
    return -x


def test_static_assert_failure_on_a_run_time_path_fails_only_there():
    f = pb.jit(checked)
    np.testing.assert_array_equal(f(-np.ones(2), 3), np.ones(2))
    with pytest.raises(AssertionError, match="n too small"):
        f(np.ones(2), 3)


def clamp_index(v, n):
    return min(np.floor(v * n).astype(np.int64), n / 1)


def relu_like(x):
    return max(x.sum(), 0), min(x.max(), 1.0)


def test_builtin_min_max_of_run_time_values_of_two_dtypes_is_refused():
    with pytest.raises(pb.UnsupportedError, match="different dtypes"):
        pb.jit(clamp_index)(np.float64(0.3), 3)
    x = np.array([0.5, -2.0])
    assert pb.jit(relu_like)(x) == relu_like(x)


def triangular_sum(x, n):
    for i in range(n):
        for j in range(n - 1 / i):  # a float bound, reached only after 1 / 0
            x = x + j
    return x


def test_errors_in_a_loop_body_are_raised_when_the_loop_runs_in_python_order():
    f = pb.jit(triangular_sum)
    np.testing.assert_array_equal(f(np.ones(2), np.int64(0)), np.ones(2))
    with pytest.raises(ZeroDivisionError):
        triangular_sum(np.ones(2), np.int64(2))
    with pytest.raises(ZeroDivisionError):
        f(np.ones(2), np.int64(2))


def _make_scaled(f):
    def g(x):
        return 2.0 * f(x)
    return g


_INNER = _make_scaled(np.sin)
_OUTER = _make_scaled(lambda x: _INNER(x) + 1.0)


def _closures_of_one_code(x):
    return _OUTER(x)


def _closures_made_while_staged(x):
    def make_scaled(f):
        def g(x):
            return 2.0 * f(x)
        return g
    inner = make_scaled(np.sin)
    outer = make_scaled(lambda x: inner(x) + 1.0)
    return outer(x)


@pytest.mark.parametrize("fn", [_closures_of_one_code, _closures_made_while_staged])
def test_a_closure_calling_another_closure_of_its_code_is_not_recursion(fn):
    """Two closures of one ``def`` are different functions: one calling the other is an
    ordinary call, not a recursion that never ends."""
    x = np.float64(0.5)
    assert pb.jit(fn)(x) == fn(x)


def _grads_of_rows(a):
    out = np.empty(a.shape)
    for c in range(a.shape[0]):
        out[c] = pb.grad(lambda v: np.sum(v * v))(a[c])
    return out


def test_a_view_passed_to_a_transform_is_read_by_the_caller(monkeypatch):
    """``a[c]`` with a loop's ``c`` is read before the gradient's function is staged: its
    index arithmetic stays in the loop body (the verifier used to find it in ``@g``)."""
    monkeypatch.setenv("PULLBACK_VERIFY", "1")
    a = np.random.default_rng(0).standard_normal((2, 4, 3))
    np.testing.assert_allclose(pb.jit(_grads_of_rows)(a), 2 * a)


def test_a_write_on_the_one_branch_that_does_not_fail_is_kept():
    """The other branch fails (at run time, where it runs): the cond then has one live
    branch, whose writes to the argument must still come out of it (found by fuzzing)."""
    def cond_mut(x):
        if x[0] > 0:
            x[1] = 10.0
        else:
            x[3] = -10.0  # out of bounds: an IndexError where this branch runs
        return x.sum()

    for backend in ("interp", "c"):
        x, y = np.array([0.5, 0.1, 0.2]), np.array([0.5, 0.1, 0.2])
        assert pb.jit(cond_mut, backend=backend)(x) == cond_mut(y)
        np.testing.assert_array_equal(x, y)
        with pytest.raises(IndexError):
            pb.jit(cond_mut, backend=backend)(-x)


def _int_of_first(x):
    return int(x[0]) + 1


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_int_of_a_run_time_float_raises_what_python_raises(backend):
    """int() truncates; NaN is a ValueError, an infinity an OverflowError, as in Python;
    a value an int64 cannot hold is an OverflowError naming the line (Python's int would
    be exact), never INT64_MIN (issue 19, item 5)."""
    f = pb.jit(_int_of_first, backend=backend)
    for v in (2.7, -3.5, -9.2e18):
        assert f(np.array([v])) == _int_of_first(np.array([v]))
    with pytest.raises(ValueError, match="NaN"):
        f(np.array([np.nan]))
    for v in (np.inf, -np.inf):
        with pytest.raises(OverflowError, match="infinity"):
            f(np.array([v]))
    for v in (1e20, -1e19, 9.3e18):
        with pytest.raises(OverflowError, match=r"test_semantics\.py:\d+"):
            f(np.array([v]))
