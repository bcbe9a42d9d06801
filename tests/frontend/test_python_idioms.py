"""Python as it is written (issue 20 items 9-11): functions as values (the ``operator``
module, ``functools.reduce``, callees held in containers or chosen at run time),
orderings (``sorted``, ``min``/``max`` with ``key=``, ``list.sort``, ``reversed``), the
``dataclasses``/NamedTuple helpers, and ``sum``/``any``/``all``/``math.prod``/``math.fsum``
of run-time values.  Each program runs on both backends and must return what CPython and
NumPy return, type and dtype included; derivatives against central differences."""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import NamedTuple

import numpy as np
import pytest

import pullback as pb

BACKENDS = ["interp", "c"]


def same(got, want, exact: bool = False) -> None:
    """Equal values of equal types (NumPy scalars, Python numbers, arrays and dtypes);
    unless ``exact``, floats within a few ulp (C's vector math and dot products round
    differently from NumPy's)."""
    assert pb.tree_structure(got) == pb.tree_structure(want), (got, want)
    for g, w in zip(pb.tree_leaves(got), pb.tree_leaves(want), strict=True):
        assert type(g) is type(w), (g, w)
        if isinstance(w, np.ndarray):
            assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        floating = np.issubdtype(np.asarray(w).dtype, np.floating)
        if exact or not floating:
            np.testing.assert_array_equal(g, w)
            if floating:
                np.testing.assert_array_equal(np.signbit(g), np.signbit(w))  # -0.0 too
        else:
            np.testing.assert_allclose(g, w, rtol=1e-15, atol=0)


def agrees(fn, *args, backend: str) -> None:
    want = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    same(pb.jit(fn, backend=backend)(*args), want, exact=backend == "interp")


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def derivatives_agree(fn, x: np.ndarray, backend: str) -> None:
    """``pb.grad`` and ``pb.jvp`` of the scalar ``fn`` against central differences."""
    want = numeric_grad(fn, x)
    np.testing.assert_allclose(pb.jit(pb.grad(fn), backend=backend)(x), want, rtol=1e-6,
                               atol=1e-8)
    t = np.linspace(0.5, -0.7, x.size).reshape(x.shape)
    _, tangent = pb.jit(lambda x, t: pb.jvp(fn, (x,), (t,)), backend=backend)(x, t)
    np.testing.assert_allclose(tangent, np.sum(want * t), rtol=1e-6, atol=1e-8)


X = np.array([0.3, -1.2, 2.5, -1.2])


# -- item 9: functions as values -------------------------------------------------------


def operators_on_arrays(x):
    a = operator.add(x, x[0])
    b = operator.mul(x, 3.0) - operator.sub(x, 1.0)
    c = operator.truediv(x, 2.0) + operator.mod(x, 0.7) + operator.pow(x, 2)
    d = operator.neg(x) + operator.abs(x) + operator.pos(x)
    m = operator.matmul(x, x)
    return a, b, c, d, m, operator.lt(x, 0.5), operator.ge(x[1], x[3])


def operators_on_python_numbers(x):
    s = float(x[0])
    n = int(x.shape[0])
    return (operator.add(s, 1), operator.floordiv(n, 3), operator.mod(-7, n),
            operator.truediv(n, 2), operator.pow(s, 2), operator.neg(s), operator.eq(s, s),
            operator.truth(s), operator.not_(x[0] > 0), operator.xor(n, 6))


def getters(x):
    pair = {"w": x * 2.0, "b": x[0]}
    first, last = operator.itemgetter(0, -1)(x)
    return (operator.itemgetter("w")(pair), first, last, operator.attrgetter("T")(x[None]),
            operator.attrgetter("shape", "ndim")(x), operator.methodcaller("sum")(x),
            operator.methodcaller("clip", min=-1.0, max=1.0)(x), operator.getitem(x, 2),
            operator.contains(pair, "w"), "b" not in pair, operator.is_(pair["w"], pair["w"]))


def inplace_operators(x):
    y = x.copy()
    z = operator.iadd(y, 1.0)  # the same array, updated in place
    operator.imul(z, 2.0)
    s = operator.iadd(x[0], 1.0)  # a scalar: a new value
    operator.setitem(y, 0, -5.0)
    return y, z is y, s


def folds(x):
    total = functools.reduce(operator.add, [x, x * 2.0, x * 3.0])
    product = functools.reduce(operator.mul, (x[i] for i in range(4)), 1.0)
    nested = functools.reduce(lambda acc, v: acc * v + 1.0, [x[0], x[1], x[2]])
    rows = functools.reduce(lambda a, b: a * b, x.reshape(2, 2))  # an array's rows
    return total, product, nested, rows, functools.reduce(operator.add, [], 0.5)


def _double(y):
    return y * 2.0


def _shift(y):
    return y - 1.0


def held_in_containers(x):
    table = {"double": _double, "shift": _shift, "sin": np.sin}
    pipeline = (np.tanh, _double, table["shift"])
    y = x
    for f in pipeline:
        y = f(y)
    return y, table["sin"](x), [g(x[1]) for g in table.values()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [operators_on_arrays, operators_on_python_numbers, getters,
                                inplace_operators, folds, held_in_containers])
def test_functions_as_values(fn, backend):
    agrees(fn, X.copy(), backend=backend)


def test_operator_functions_on_run_time_values_are_staged_not_refused():
    # before: "add has no Python source, so it cannot be called on run-time values"
    same(pb.jit(lambda x: operator.add(x, x))(X), X + X)
    same(pb.jit(lambda x: operator.itemgetter(1)(x))(X), X[1])


def test_reduce_of_an_empty_sequence_raises_what_python_raises():
    with pytest.raises(TypeError, match="reduce\\(\\) of empty iterable"):
        pb.jit(lambda x: functools.reduce(operator.add, x[:0]))(X)


def _doublings(x, n):
    for _ in range(n):
        x = x * 2.0
    return x


@pytest.mark.parametrize("n", [np.array([1, 2]), np.array([[3]]), 2.5])
def test_range_of_a_non_integer_raises_what_python_raises(n):
    with pytest.raises(TypeError) as plain:
        _doublings(X, n)
    with pytest.raises(TypeError) as staged:
        pb.jit(_doublings)(X, n)
    assert str(staged.value).split("'")[0] == str(plain.value).split("'")[0]


def chosen_at_run_time(x):
    y = (_double if x[0] < 0 else _shift)(x)  # a conditional expression as the callee
    f = np.sin if x[1] > 0 else np.cos
    if x[2] > 1.0:
        g = _double
    else:
        g = np.exp
    h = _double if x[0] > 0 else np.tanh if x[1] > 0 else _shift  # nested
    return y, f(x), g(x[1]), h(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x", [X, -X, np.array([1.0, 2.0, 0.5, 0.0]),
                               np.array([-1.0, -2.0, 0.5, 0.0])])
def test_callee_chosen_at_run_time_stages_both_calls(x, backend):
    agrees(chosen_at_run_time, x.copy(), backend=backend)


def _chosen_loss(x):
    y = (_double if x[0] < 0 else np.sin)(x)
    return np.sum(y * y) + (np.exp if x[1] > 0 else np.tanh)(x[2])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x", [X, -X])
def test_derivatives_through_a_callee_chosen_at_run_time(x, backend):
    derivatives_agree(_chosen_loss, x.copy(), backend)


def test_callees_chosen_at_run_time_must_return_one_type():
    def f(x):
        return (np.sum if x[0] > 0 else _double)(x)

    with pytest.raises(pb.CompileError, match="on one path but"):
        pb.jit(f)(X)


def test_a_callee_chosen_at_run_time_in_a_rolled_loop_stays_in_its_iteration():
    def f(x):
        g, y, k = _double, x[0], 0
        while y < 100.0 and k < 50:
            if y < 0:
                g = _shift
            y = g(y) + 1.0
            k += 1
        return y

    with pytest.raises(pb.CompileError, match="chosen by a run-time condition in a loop"):
        pb.jit(f)(X)


def test_a_callee_chosen_at_run_time_can_only_be_called():
    def f(x):
        g = _double if x[0] > 0 else _shift
        return g.__name__

    with pytest.raises(pb.UnsupportedError, match="only calls are staged"):
        pb.jit(f)(X)


# -- item 10: orderings ----------------------------------------------------------------


def sorted_by_static_keys(x):
    params = {"w": x * 2.0, "b": x[0], "a": x[1:3]}
    rows = [(3, "c", x[0]), (1, "z", x[1]), (3, "a", x[2]), (1, "z", x[3])]  # ties
    by_name = [v for _, v in sorted(params.items())]
    by_key = sorted(params.items(), key=operator.itemgetter(0), reverse=True)
    by_lambda = sorted(rows, key=lambda r: r[0])  # stable: ties keep their order
    by_tuple = sorted(rows[:3])  # (3, 'a', ...) < (3, 'c', ...): the arrays never compared
    rows.sort(key=lambda r: (-r[0], r[1]), reverse=True)
    return by_name, by_key, by_lambda, by_tuple, rows, list(reversed(params.items()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sorted_on_static_keys(backend):
    agrees(sorted_by_static_keys, X.copy(), backend=backend)


def test_sorted_refuses_where_run_time_items_decide_the_order():
    def f(x):  # the static parts tie: Python compares the run-time scalars
        return sorted([(1, "z", x[1]), (1, "z", x[3])])

    with pytest.raises(pb.UnsupportedError, match="order of the result would depend on "
                       "the data"):
        pb.jit(f)(X)


def test_sorted_of_run_time_values_is_refused_with_the_line():
    def f(x):
        return sorted([x[0], x[1]])

    with pytest.raises(pb.UnsupportedError, match="np.sort") as info:
        pb.jit(f)(X)
    assert "return sorted([x[0], x[1]])" in str(info.value)


def extremes(x):
    pairs = [(1, x[0]), (3, x[1]), (3, x[2]), (0, x[3])]
    named = {"b": x * 2.0, "a": x}
    return (max(pairs, key=operator.itemgetter(0)),  # first of the tied 3s
            min(pairs, key=lambda p: p[0]), min(named.items())[1],
            max(x[0], x[1], x[2], key=abs),  # run-time keys pick at run time
            min([x[0], x[1], x[3]], key=lambda v: v * v),
            max([(x[0], 1.0), (x[1], 2.0)]), min(x[0], x[1]), max([x[2], x[3], x[0]]),
            max([], key=abs, default=-1.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x", [X, np.array([-2.0, 2.0, 2.0, -2.0]),
                               np.array([np.nan, 1.0, -3.0, 1.0]),
                               np.array([1.0, np.nan, 5.0, np.nan])])
def test_min_max_with_keys_match_python(x, backend):
    agrees(extremes, x.copy(), backend=backend)


def _extreme_loss(x):
    a = max(x[0], x[1], x[2], key=abs)
    b = min([(x[3], x[0]), (x[1], x[2])])
    return a * b[1] + min(x[0], x[3])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x", [np.array([0.3, -1.2, 2.5, -0.7]), np.array([2.0, -1.5, 0.5, 0.25])])
def test_derivatives_through_min_max_with_keys(x, backend):
    derivatives_agree(_extreme_loss, x.copy(), backend)


# -- item 11: dataclasses, NamedTuples, folds of iterables -----------------------------


@dataclasses.dataclass(frozen=True)
class Layer:
    w: np.ndarray
    b: float
    name: str = "dense"


class State(NamedTuple):
    pos: np.ndarray
    t: float


def records(x):
    layer = Layer(x * 2.0, float(x[0]))
    moved = dataclasses.replace(layer, b=float(x[1]) + 1.0, name="out")
    as_dict = dataclasses.asdict(moved)
    as_tuple = dataclasses.astuple(layer)
    as_dict["w"][0] = 100.0  # asdict copies arrays: the layer keeps its own
    names = [f.name for f in dataclasses.fields(Layer)]
    s = State(x, 0.5)
    s2 = s._replace(t=s.t + 1.0)
    return (moved.w, moved.b, moved.name, as_dict, as_tuple, layer.w, names, s2.t, s2.pos,
            s._asdict()["t"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataclass_and_namedtuple_helpers_on_arrays(backend):
    agrees(records, X.copy(), backend=backend)


def test_replace_refuses_what_python_refuses():
    @dataclasses.dataclass
    class Counted:
        x: np.ndarray
        n: int = dataclasses.field(default=0, init=False)

    with pytest.raises(ValueError, match="init=False"):
        pb.jit(lambda x: dataclasses.replace(Counted(x), n=1).x)(X)
    with pytest.raises(ValueError, match="unexpected field names"):
        pb.jit(lambda x: State(x, 1.0)._replace(speed=2.0).pos)(X)


def folds_of_iterables(x):
    rows = x.reshape(2, 2)
    return (sum([x, x * 2.0]), sum(x[i] * i for i in range(4)), sum(rows, 0.5),
            any([x[0] > 0, x[1] > 0]), all(v > -5 for v in x), all([]),
            math.prod([x[0], x[1], x[2]]), math.prod([x, x], start=2.0), math.prod(rows),
            math.prod(range(1, 5)), math.prod([]), math.prod([int(x.shape[0]), 3]),
            min(v * v for v in x), max(rows[0]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x", [X, np.array([0.0, -0.0, np.inf, 1.0])])
def test_sum_any_all_prod_of_iterables(x, backend):
    agrees(folds_of_iterables, x.copy(), backend=backend)


def _product_loss(x):
    return math.prod(x[i] for i in range(4)) + math.prod([x, x]).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_of_math_prod(backend):
    derivatives_agree(_product_loss, X.copy(), backend)


def _fsum_of(x):
    return math.fsum(x[i] for i in range(x.shape[0]))


FSUM_CASES = [
    [1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50],  # cancellation: exactly 1e-100
    [0.1] * 10,  # 1.0 where a plain sum gives 0.9999999999999999
    [2.0**53, 1.0, 2.0**-60],  # half an ulp and a bit: rounds up
    [2.0**53, 1.0, -(2.0**-60)],  # half an ulp less a bit: rounds down
    [2.0**53, 1.0, 0.0, 2.0**-1074],  # a zero between the partials that decide
    [1.0, 2.0**-53, 2.0**-106],
    [1e308, -1e308, 1e308, 0.5],
    [-0.0, -0.0],
    [1.0, -1.0],
    [],
    [math.inf, 1.0, math.inf],
    [math.nan, 1.0, math.inf],
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fsum_is_exactly_rounded_as_python(backend):
    f = pb.jit(_fsum_of, backend=backend)
    rng = np.random.default_rng(3)
    cases = [np.array(c) for c in FSUM_CASES]
    for _ in range(40):
        x = rng.standard_normal(8) * 2.0 ** rng.integers(-60, 60, 8)
        x[4:] = -x[:4] * (1 + rng.integers(0, 3, 4) * 2.0**-52)  # near cancellation
        cases.append(rng.permutation(x))
    for x in cases:
        same(f(x.copy()), math.fsum(x.tolist()), exact=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("items", "error", "message"), [
    ([1e308, 1e308], OverflowError, "intermediate overflow"),
    ([1.0, 1e308, -1e308, 1e308, 1e308], OverflowError, "intermediate overflow"),
    ([math.inf, 1.0, -math.inf], ValueError, "-inf \\+ inf"),
])
def test_fsum_raises_what_python_raises(items, error, message, backend):
    with pytest.raises(error, match=message):
        math.fsum(items)
    with pytest.raises(error, match=message):
        pb.jit(_fsum_of, backend=backend)(np.array(items))


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_of_fsum(backend):
    derivatives_agree(lambda x: math.fsum([x[0] * x[1], x[2], np.sin(x[3])]), X.copy(),
                      backend)


def test_fsum_of_many_run_time_values_is_refused():
    with pytest.raises(pb.UnsupportedError, match="at most 32"):
        pb.jit(_fsum_of)(np.ones(40))
