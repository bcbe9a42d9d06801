"""What ``pb.jit`` refuses, and how it says so; and the front-end features users lean on.

A refusal is a ``CompileError`` that points at the user's own line and column and shows
that line with a caret.  Each offending line below carries a ``# <- here`` marker, so the
expected position is read from the source and the tests survive edits to this file.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pullback as pb
from pullback.frontend.regions import MergeError

MARK = "# <- here"


def marked(fn: Callable) -> tuple[int, str]:
    """The line number and text of the one line of ``fn``'s source carrying ``MARK``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [(start + k, text) for k, text in enumerate(lines) if MARK in text]
    assert len(hits) == 1, f"{fn.__name__} needs exactly one {MARK!r} marker"
    return hits[0]


def refused(kind: type[pb.CompileError], fn: Callable, args: tuple, token: str,
            where: Callable | None = None) -> pb.CompileError:
    """Compile ``fn`` on ``args``: it must raise ``kind`` at the marked line of ``where``
    (default ``fn``), at the column where ``token`` starts, and show that line and a caret."""
    where = where or fn
    line, text = marked(where)
    col = text.index(token)
    with pytest.raises(kind) as info:
        pb.jit(fn)(*args)
    e = info.value
    assert e.loc is not None, f"no location in:\n{e}"
    assert (e.loc.file, e.loc.line, e.loc.col) == (where.__code__.co_filename, line, col), \
        f"expected line {line} col {col}:\n{e}"
    assert f"    {text.rstrip()}\n    {' ' * col}^" in str(e)
    return e


X = np.array([0.5, -1.5, 2.0, 3.0])
M = np.arange(6.0).reshape(2, 3)


# -- refused constructs ----------------------------------------------------------------


def row_sums(x):
    for row in x:
        yield row.sum()  # <- here


def test_generators_are_refused():
    refused(pb.UnsupportedError, row_sums, (M,), "yield")


async def scaled_later(x):  # <- here
    return 2.0 * x


def test_async_functions_are_refused():
    refused(pb.UnsupportedError, scaled_later, (X,), "async")


def safe_log(x):
    try:  # <- here
        y = np.log(x)
    except FloatingPointError:
        y = np.zeros_like(x)
    return y


def test_try_except_around_run_time_code_is_refused():
    refused(pb.UnsupportedError, safe_log, (X,), "try")


LAST_TOTAL = 0.0


def record_total(x):
    global LAST_TOTAL
    LAST_TOTAL = x.sum()  # <- here
    return x / LAST_TOTAL


def test_global_write_of_a_run_time_value_is_refused():
    refused(pb.UnsupportedError, record_total, (X,), "LAST_TOTAL =")
    assert LAST_TOTAL == 0.0


def running_total(rows):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v.sum()  # <- here

    for row in rows:
        add(row)
    return total


def test_nonlocal_write_of_a_run_time_value_is_refused():
    e = refused(pb.UnsupportedError, running_total, (M,), "total =")
    assert "'total'" in e.message


def positive_part(x):
    kept = x[x > 0]  # <- here
    return kept.sum()


def test_boolean_mask_indexing_is_refused():
    refused(pb.UnsupportedError, positive_part, (X,), "x[x > 0]")


def above_half(x):
    idx = np.nonzero(x > 0.5)  # <- here
    return idx


def test_nonzero_is_refused():
    refused(pb.UnsupportedError, above_half, (X,), "np.nonzero")


def first_rows(x, n):
    rows = [x[i] for i in range(int(n))]  # <- here
    return np.stack(rows)


def test_int_of_run_time_value_as_range_bound_is_refused():
    refused(pb.ConcretizationError, first_rows, (M, np.int64(2)), "[x[i]")


def padded(x, n):
    out = np.zeros(int(n))  # <- here
    out[: len(x)] = x
    return out


def test_int_of_run_time_value_as_shape_is_refused():
    refused(pb.ConcretizationError, padded, (X, np.float64(6.0)), "np.zeros")


def zero_list(x):
    return [0.0] * int(x[0])  # <- here


def test_int_of_run_time_value_as_list_length_is_refused():
    refused(pb.ConcretizationError, zero_list, (np.array([3.0]),), "[0.0]")


RATES = {0.5: 0.01, 1.0: 0.02}


def rate_for(x):
    return RATES[float(x[0])] * x  # <- here


def test_float_of_run_time_value_as_dict_key_is_refused():
    refused(pb.ConcretizationError, rate_for, (np.array([0.5, 1.0]),), "RATES[")


def pick_label(x):
    labels = ("all negative", "some positive")
    return labels[bool((x > 0).any())]  # <- here


def test_bool_of_run_time_value_as_tuple_index_is_refused():
    refused(pb.ConcretizationError, pick_label, (X,), "labels[")


def ways(k):
    return math.factorial(k[0])  # <- here


def test_c_function_on_run_time_values_is_refused():
    refused(pb.UnsupportedError, ways, (np.array([4, 2]),), "math.factorial")


_EXEC_NAMESPACE: dict[str, Any] = {}
exec("def doubled(x):\n    return 2.0 * x\n", _EXEC_NAMESPACE)


def via_exec(x):
    return _EXEC_NAMESPACE["doubled"](x) + 1.0  # <- here


def test_function_made_by_exec_is_refused():
    e = refused(pb.UnsupportedError, via_exec, (X,), "_EXEC_NAMESPACE")
    assert "doubled" in e.message


def halve_until(x, n):
    if n == 0:
        return x
    return halve_until(0.5 * x, n - 2)  # <- here


def halve_three_times(x):
    return halve_until(x, 3)


def test_unbounded_static_recursion_is_refused():
    refused(pb.UnsupportedError, halve_three_times, (X,), "halve_until(", where=halve_until)


def maybe_single(x):
    if x.sum() > 0:
        y = x.astype(np.float32)
    else:
        y = 2.0 * x  # <- here
    return y


def test_different_dtypes_in_branches_of_a_run_time_if_are_refused():
    e = refused(MergeError, maybe_single, (X,), "y =")
    assert "'y'" in e.message


def grow_until(x):
    s = np.float32(1.0)
    while s < 100:
        s = s * x.sum()  # <- here
    return s


def test_loop_carried_dtype_change_is_refused():
    e = refused(MergeError, grow_until, (X,), "s =")
    assert "'s'" in e.message


def zero_first(x, z):
    if x.sum() > 0:
        target = x
    else:
        target = z
    target[0] = 0.0  # <- here
    return x, z


def zero_first_of_either(x, z):
    target = x if x.sum() > 0 else z
    target[0] = 0.0  # <- here
    return x, z


@pytest.mark.parametrize("fn", [zero_first, zero_first_of_either])
def test_write_through_branch_dependent_alias_is_refused(fn):
    refused(pb.UnsupportedError, fn, (X.copy(), -X), "target[0]")


def saw_positive(x):
    for v in x:
        if v > 0:
            found = True
    return found


def test_variable_set_on_some_run_time_paths_raises_unbound_local_error_like_python():
    f = pb.jit(saw_positive)
    assert f(np.array([-1.0, 2.0])) is saw_positive(np.array([-1.0, 2.0]))
    with pytest.raises(UnboundLocalError, match="'found'"):
        saw_positive(np.array([-1.0, -2.0]))
    with pytest.raises(UnboundLocalError, match="'found'"):
        f(np.array([-1.0, -2.0]))


def partial_sums(x):
    out = []
    s = 0.0
    while s < 5.0:
        s = s + x.sum()
        out.append(s)  # <- here
    return out


def test_append_to_outer_list_in_run_time_loop_is_refused():
    refused(pb.UnsupportedError, partial_sums, (np.abs(X),), "out.append")


def test_message_names_the_function():
    e = refused(pb.UnsupportedError, positive_part, (X,), "x[x > 0]")
    assert e.loc.func == "positive_part"
    assert f"{e.loc} in positive_part:" in str(e)
    e = refused(pb.UnsupportedError, running_total, (M,), "total =")
    assert e.loc.func == "add"


# -- run-time errors -------------------------------------------------------------------


def checked_log(x):
    assert x.min() > 0, f"min is {x.min()}"
    return np.log(x)


def test_failed_assert_on_data_raises_at_run_time():
    f = pb.jit(checked_log)
    np.testing.assert_allclose(f(np.abs(X)), checked_log(np.abs(X)))
    with pytest.raises(AssertionError) as info:
        f(X)
    assert str(info.value) == "min is -1.5"
    assert len(f._spec.cache) == 1


def element(x, i):
    return x[i]


def test_out_of_bounds_dynamic_index_raises_index_error_at_run_time():
    f = pb.jit(element)
    assert f(X, np.int64(-1)) == X[-1]
    for i in (np.int64(4), np.int64(-5)):
        with pytest.raises(IndexError, match="out of bounds"):
            f(X, i)
    assert len(f._spec.cache) == 1


# -- source locations and where functions come from ------------------------------------


def scaled_norm(x, y):
    z = x * y
    return np.sqrt(z.sum())


def test_make_ir_shows_user_source_locations():
    text = str(pb.make_ir(scaled_norm)(X, X))
    _, start = inspect.getsourcelines(scaled_norm)
    file = scaled_norm.__code__.co_filename
    for line in (start + 1, start + 2):
        assert f"# {file}:{line}:" in text


CELL = """\
def cell_softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()
"""


def test_function_from_an_ipython_cell(monkeypatch):
    name = "<ipython-input-1-abc>"
    monkeypatch.setitem(linecache.cache, name, (len(CELL), None, CELL.splitlines(True), name))
    namespace = {"np": np}
    exec(compile(CELL, name, "exec"), namespace)
    fn = namespace["cell_softmax"]
    np.testing.assert_allclose(pb.jit(fn)(X), fn(X), rtol=1e-12)
    assert f"# {name}:2:" in str(pb.make_ir(fn)(X))


double, shift = (lambda a: 2.0 * a), (lambda a: a + 1.0)


def test_two_lambdas_on_one_line():
    np.testing.assert_array_equal(pb.jit(double)(X), double(X))
    np.testing.assert_array_equal(pb.jit(shift)(X), shift(X))


def moving_average(x, width):
    kernel = np.ones(width) / width

    def window(i):
        return (x[i:i + width] * kernel).sum()

    return np.array([window(i) for i in range(len(x) - width + 1)])


def make_scaler(factor, offset):
    def scale(x):
        return factor * x + offset

    return scale


class Affine:
    def __init__(self, w, b):
        self.w = w
        self.b = b

    def apply(self, x):
        return self.w @ x + self.b


def affine(x, a, b):
    return a * x + b


def apply_partial(x):
    f = functools.partial(affine, a=3.0)
    return f(x, b=-1.0)


@pytest.mark.parametrize(("fn", "args"), [
    (moving_average, (X, 2)),
    (make_scaler(3.0, np.array([1.0, 2.0, 3.0, 4.0])), (X,)),
    (Affine(M, np.array([0.5, -0.5])).apply, (np.array([1.0, 2.0, 3.0]),)),
    (functools.partial(affine, b=1.0), (X, 2.0)),
    (apply_partial, (X,)),
], ids=["nested", "closure", "method", "partial", "partial-inside"])
def test_callables_compile_and_match_python(fn, args):
    np.testing.assert_allclose(pb.jit(fn)(*args), fn(*args), rtol=1e-12)


# -- the cache and threads -------------------------------------------------------------


def repeat_double(x, n):
    for _ in range(n):
        x = 2.0 * x
    return x


def test_cache_is_keyed_on_shapes_and_static_values():
    f = pb.jit(repeat_double)
    f(X, 2)
    f(X + 1.0, 2)
    assert len(f._spec.cache) == 1
    np.testing.assert_array_equal(f(M, 2), repeat_double(M, 2))
    assert len(f._spec.cache) == 2
    np.testing.assert_array_equal(f(X, 3), repeat_double(X, 3))
    assert len(f._spec.cache) == 3


def damped_waves(x, scale):
    acc = np.zeros_like(x)
    k = 0
    while k < 20:
        acc = acc + np.sin(x * k) * scale / (k + 1)
        k += 1
    return acc


def test_calls_from_two_threads_at_once():
    f = pb.jit(damped_waves)
    inputs = {n: np.linspace(0.0, 1.0, n) for n in (3, 4)}
    barrier = threading.Barrier(len(inputs))
    results: dict[int, list] = {}

    def work(n: int) -> None:
        barrier.wait()
        results[n] = [f(inputs[n], 2.0) for _ in range(3)]

    threads = [threading.Thread(target=work, args=(n,)) for n in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, got in results.items():
        for g in got:
            np.testing.assert_allclose(g, damped_waves(inputs[n], 2.0), rtol=1e-12)
    assert len(results) == len(inputs)
    assert len(f._spec.cache) == len(inputs)


def _scaled_by_a_set(x, s):
    return x * len(s) + sum(s)


def _sliced(x, sl):
    return x[sl]


def test_unhashable_static_arguments_are_keyed_by_value_never_by_id():
    """A set made afresh per call reuses the previous one's id: keyed by id, every call
    returned the first call's result (issue 19, item 1)."""
    f = pb.jit(_scaled_by_a_set)
    x = np.ones(2)
    for n in range(1, 6):
        np.testing.assert_array_equal(f(x, set(range(n))), _scaled_by_a_set(x, set(range(n))))
    g = pb.jit(_sliced)
    for lo in range(3):
        np.testing.assert_array_equal(g(np.arange(5.0), slice(lo, lo + 2)),
                                      np.arange(5.0)[lo:lo + 2])

    class Unhashable:
        __hash__ = None

        def __len__(self):
            return 2

        def __iter__(self):
            return iter([1, 2])

    with pytest.raises(pb.UnsupportedError, match="neither hashable nor a plain container"):
        f(x, Unhashable())


def _squares(m):
    return np.sum(m * m)


_MATRIX = np.matrix([[0.0, 1.0], [2.0, 3.0]])


def _plus_a_matrix(x):
    return x * _MATRIX


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_ndarray_subclasses_are_refused_not_computed_as_plain_arrays(backend):
    """np.matrix's * multiplies matrices and a masked sum skips masked values: computed as
    plain arrays they gave other numbers (issue 19, item 6); also after a plain call made
    the native fast path."""
    f = pb.jit(_squares, backend=backend)
    a = np.arange(4.0).reshape(2, 2)
    assert f(a) == _squares(a)
    for x in (np.matrix(a), np.ma.masked_array(a, mask=[[0, 1], [0, 0]])):
        with pytest.raises(pb.UnsupportedError, match="array subclass"):
            f(x)
    with pytest.raises(pb.UnsupportedError, match="numpy.matrix"):
        pb.jit(_plus_a_matrix, backend=backend)(a)
