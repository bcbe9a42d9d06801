"""Issue 20 items 7 and 8: Python containers of run-time values handed to NumPy, and
more of NumPy's API, compiled on both backends and differentiated.

Every case runs the program under ``pb.jit`` on the interpreter and in C against NumPy
(values and dtype), and its float derivatives (``pb.grad`` of a weighted sum, ``pb.jvp``
in a random direction) against float64 central differences.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pullback as pb

BACKENDS = ("interp", "c")
EPS = 1e-6
RTOL = {np.dtype(np.float32): 1e-6}  # float32 sums may be ordered differently from NumPy's


def agree(f, *args) -> None:
    """``f`` compiled on each backend returns what NumPy returns, dtype included."""
    want = f(*args)
    for backend in BACKENDS:
        got = pb.jit(f, backend=backend)(*args)
        for g, w in zip(_leaves(got), _leaves(want), strict=True):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype, (backend, g.dtype, w.dtype)
            assert g.shape == w.shape, (backend, g.shape, w.shape)
            tol = RTOL.get(w.dtype, 1e-12)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=backend)


def _leaves(x):
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _leaves(e)]
    return [x]


def _weighted(f, weights):
    """A scalar of ``f``'s outputs: each weighted elementwise by a fixed random array."""
    def scalar(*args):
        total = 0.0
        for out, w in zip(_leaves(f(*args)), weights, strict=True):
            total = total + np.sum(out * w)
        return total
    return scalar


def _moved(args, direction, step):
    return [a + step * d for a, d in zip(args, direction, strict=True)]


def derivatives(f, *args, seed=0) -> None:
    """``pb.grad`` and ``pb.jvp`` of ``f`` at float64 ``args`` agree with central
    differences, on both backends for the gradient."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, np.float64) if np.ndim(a) else float(a) for a in args]
    weights = [rng.standard_normal(np.shape(o)) for o in _leaves(f(*args))]
    scalar = _weighted(f, weights)
    for i in range(len(args)):
        def partial(x, i=i):
            return scalar(*args[:i], x, *args[i + 1:])
        fd = np.zeros(np.shape(args[i]))
        for k in np.ndindex(fd.shape):
            e = np.zeros(np.shape(args[i]))
            e[k] = EPS
            fd[k] = (partial(args[i] + e) - partial(args[i] - e)) / (2 * EPS)
        for backend in BACKENDS:
            got = pb.jit(pb.grad(partial), backend=backend)(args[i])
            np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6, err_msg=backend)
    direction = [rng.standard_normal(np.shape(a)) if np.ndim(a) else float(rng.standard_normal())
                 for a in args]
    _, tangent = pb.jvp(f, args, direction)
    plus, minus = f(*_moved(args, direction, EPS)), f(*_moved(args, direction, -EPS))
    for t, p, m in zip(_leaves(tangent), _leaves(plus), _leaves(minus), strict=True):
        np.testing.assert_allclose(t, (np.asarray(p) - np.asarray(m)) / (2 * EPS),
                                   rtol=1e-6, atol=1e-6)


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- item 7: containers of run-time values -------------------------------------------------


@pytest.mark.parametrize("f", [
    lambda a: np.sum([1, a * a, 2]),
    lambda a: np.mean([a, 2.0 * a, a]),
    lambda a: np.linalg.norm([a, 2.0]),
    lambda a: np.prod((a, a + 1.0)),
    lambda a: np.max([a, -a]),
    lambda a: np.array([a, 1.0]),
    lambda a: np.asarray([[a, 1], [2, a]]),
], ids=["sum", "mean", "norm", "prod-tuple", "max", "array", "nested"])
@pytest.mark.parametrize("a", [1.5, -0.5])
def test_list_of_scalars(f, a):
    agree(f, a)
    derivatives(f, a)


def test_list_of_scalars_takes_numpys_dtype():
    agree(lambda n: np.sum([n, 2, 3]), 4)           # a Python int: int64
    agree(lambda n: np.mean([n, 2]), 4)              # float64 from ints
    agree(lambda x: np.sum([x, 1]), np.float32(2))   # float32 stays float32
    agree(lambda x: np.sum([x, 1.5]), np.float32(2))  # a Python float is float64 here


@pytest.mark.parametrize("f", [
    lambda x: np.std([x, 2 * x, x * x], axis=0),
    lambda x: np.sum((x, x)),                       # one array used twice
    lambda x: np.asarray((x, np.sin(x))),
    lambda x: np.dot([x[0], x[1]], x[:2]),
    lambda x: np.where([True, False, True], x, [x[0], 0.0, 1.0]),
    lambda x: [x[1], x[1], 1.0] @ x,                     # an operator's list operand
    lambda x: np.outer(x, x) @ (x[0], 2.0, x[2]),
], ids=["std", "sum-duplicated", "asarray-tuple", "dot", "where", "matmul-list",
        "matmul-tuple"])
def test_list_of_arrays(f):
    x = arr(3)
    agree(f, x)
    derivatives(f, x)


JOINS = {
    "vstack": np.vstack, "hstack": np.hstack, "dstack": np.dstack,
    "column_stack": np.column_stack, "concatenate": np.concatenate,
    "concatenate-last": lambda x: np.concatenate(x, axis=-1),
    "concatenate-none": lambda x: np.concatenate(x, axis=None),
    "stack": np.stack, "stack-last": lambda x: np.stack(x, axis=-1),
}


@pytest.mark.parametrize("name", JOINS)
@pytest.mark.parametrize("shape", [(3,), (3, 2), (2, 3, 4), (1, 2, 2, 3)])
def test_join_one_array_iterates_its_rows(name, shape):
    f = JOINS[name]
    x = arr(*shape)
    try:
        f(x)
    except ValueError:  # concatenate of 0-d rows
        for backend in BACKENDS:
            with pytest.raises(ValueError, match="zero-dimensional"):
                pb.jit(f, backend=backend)(x)
        return
    agree(f, x)
    if shape == (2, 3, 4):
        derivatives(lambda y: f(y) ** 2, x)


def test_row_stack_and_int_rows():
    if hasattr(np, "row_stack"):  # removed in NumPy 2.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            agree(lambda x: np.row_stack(x), arr(2, 3))
    agree(np.vstack, np.arange(6).reshape(2, 3))
    agree(lambda x: np.vstack(x, dtype=np.float32), np.arange(6).reshape(2, 3))


def test_join_one_array_errors():
    with pytest.raises(TypeError, match="0-d"):
        pb.jit(np.vstack)(np.float64(1.0))
    with pytest.raises(ValueError, match="at least one array"):
        pb.jit(np.hstack)(np.zeros((0, 3)))


# -- item 8: more of the API -----------------------------------------------------------------


def test_isclose_and_allclose():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 2.0])
    y = np.array([1.0 + 1e-9, np.nan, np.inf, np.inf, 0.0, 2.1])
    agree(np.isclose, x, y)
    agree(lambda a, b: np.isclose(a, b, equal_nan=True), x, y)
    agree(lambda a, b: np.isclose(a, b, rtol=0.1, atol=0.0), x, y)
    agree(lambda a, b: np.isclose(a, b[0]), x, y)
    agree(lambda a, b: np.isclose(a, 3), np.arange(5), y)         # ints compare in float64
    agree(np.allclose, x[:1], y[:1])                                # a Python bool
    agree(lambda a, b: np.allclose(a, b, equal_nan=True), x[:3], x[:3])
    agree(lambda a, b: np.allclose(a, b), x, y)


def test_real_imag_conjugate_of_real_values():
    x = arr(2, 3)
    for f in (np.real, np.imag, lambda a: np.conjugate(a), lambda a: np.conj(a),
              lambda a: a.real + a.imag, lambda a: a.conj() * a.conjugate()):
        agree(f, x)
        derivatives(f, x)
    agree(np.real, 1.5)                                  # a Python float stays one
    agree(lambda a: np.conjugate(a), np.arange(3))
    agree(lambda a: np.imag(a.astype(np.float32)), x)
    with pytest.raises(pb.UnsupportedError, match="int8"):  # NumPy's bool loop is int8
        pb.jit(lambda a: np.conjugate(a > 0))(x)


@pytest.mark.parametrize("f", [
    lambda x: np.select([x < -0.5, x > 0.5], [x, x * x]),
    lambda x: np.select([x < 0, x < 1], [x, np.sin(x)], default=x + 1),  # overlapping
    lambda x: np.select([x < 0], [x], 1.5),
    lambda x: np.select([x[0] > 0], [x], x[1]),                       # broadcasting
], ids=["two", "first-wins", "default", "broadcast"])
def test_select(f):
    x = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 2.0])
    agree(f, x)
    derivatives(f, x + 0.1)


def test_select_dtype_and_errors():
    agree(lambda x: np.select([x > 0], [x]), arr(4).astype(np.float32))
    agree(lambda x: np.select([x > 0], [np.arange(4)], 0.5), arr(4))
    with pytest.raises(TypeError, match="boolean"):
        pb.jit(lambda x: np.select([x], [x]))(arr(3))
    with pytest.raises(ValueError, match="same length"):
        pb.jit(lambda x: np.select([x > 0], [x, x]))(arr(3))


def test_polyval():
    p, x = arr(4), arr(5, seed=1)
    agree(np.polyval, p, x)
    derivatives(np.polyval, p, x)
    agree(lambda x: np.polyval([3, 0, 1], x), x)
    agree(lambda x: np.polyval([1, 2], x), x.astype(np.float32))     # int coefficients: f64
    agree(lambda a: np.polyval([a, 2.0, a], 1.5), 0.3)
    derivatives(lambda a: np.polyval([a, 2.0, a], 1.5), 0.3)


@pytest.mark.parametrize("f", [
    lambda y, x: np.trapezoid(y),
    lambda y, x: np.trapezoid(y, dx=0.25),
    lambda y, x: np.trapezoid(y, x),
    lambda y, x: np.trapezoid(y.reshape(2, 3), x[:2], axis=0),
    lambda y, x: np.trapezoid(y.reshape(2, 3), x.reshape(2, 3)),
], ids=["unit", "dx", "x", "axis0", "x-2d"])
def test_trapezoid(f):
    y, x = arr(6), np.cumsum(np.abs(arr(6, seed=2)))
    agree(f, y, x)
    derivatives(f, y, x)


def test_trapezoid_ints_and_short():
    agree(np.trapezoid, np.arange(5))
    agree(np.trapezoid, np.ones(1))


def test_interp_values_at_knots_and_outside():
    xp = np.array([0.0, 0.5, 0.5, 1.5, 3.0])   # a repeated knot
    fp = np.array([1.0, -2.0, 4.0, 0.5, 2.0])
    x = np.array([-1.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.9, 3.0, 4.0, np.nan])
    agree(np.interp, x, xp, fp)
    agree(lambda a, b, c: np.interp(a, b, c, left=-9.0, right=b[0]), x, xp, fp)
    agree(lambda a, b, c: np.interp(a[2], b, c), x, xp, fp)
    agree(lambda a, b, c: np.interp(a, b[:1], c[:1]), x, xp, fp)
    agree(lambda a, b, c: np.interp(a, [0, 1, 2], [0, 1, 4]), x, xp, fp)
    with pytest.raises(ValueError, match="same length"):
        pb.jit(np.interp)(x, xp, fp[:3])
    with pytest.raises(pb.UnsupportedError, match="period"):
        pb.jit(lambda a, b, c: np.interp(a, b, c, period=2.0))(x, xp, fp)


def test_interp_derivatives():
    xp = np.array([0.0, 0.5, 1.5, 3.0])
    fp = np.array([1.0, -2.0, 0.5, 2.0])
    x = np.array([-1.0, 0.2, 1.0, 2.0, 4.0])   # away from the knots
    derivatives(np.interp, x, xp, fp)


@pytest.mark.parametrize("f", [
    lambda f, t: np.gradient(f),
    lambda f, t: np.gradient(f, 0.5),
    lambda f, t: np.gradient(f, t),
    lambda f, t: np.gradient(f, edge_order=2),
    lambda f, t: np.gradient(f, t, edge_order=2),
    lambda f, t: np.gradient(f, t[1] - t[0]),          # a run-time step
], ids=["unit", "step", "coords", "edge2", "coords-edge2", "runtime-step"])
def test_gradient_1d(f):
    y, t = arr(6), np.cumsum(np.abs(arr(6, seed=3))) + 0.5
    agree(f, y, t)
    derivatives(f, y, t)


def test_gradient_nd_and_dtypes():
    a = arr(3, 4)
    agree(np.gradient, a)                                     # a tuple per axis
    agree(lambda f: np.gradient(f, 2.0, 0.5), a)
    agree(lambda f: np.gradient(f, axis=1), a)
    agree(lambda f: np.gradient(f, [0.0, 1.0, 3.0], axis=0), a)   # static coordinates
    agree(lambda f: np.gradient(f, np.arange(3.0) * 2, axis=0), a)  # static, uniform
    agree(np.gradient, np.arange(5) ** 2)                    # ints: float64
    agree(np.gradient, a.astype(np.float32))
    derivatives(lambda f: np.gradient(f, 2.0, 0.5, edge_order=2), a)
    cube, t = arr(2, 5, 3), np.cumsum(np.arange(1.0, 6.0))
    agree(lambda f, t: np.gradient(f, t, axis=1, edge_order=2), cube, t)  # a middle axis
    agree(lambda f, t: np.gradient(f, 1.0, t, 2.0), cube, t)
    with pytest.raises(ValueError, match="too small"):
        pb.jit(lambda f: np.gradient(f, edge_order=2))(np.ones(2))


@pytest.mark.parametrize("f", [
    lambda m, y: np.cov(m),
    lambda m, y: np.cov(m, rowvar=False),
    lambda m, y: np.cov(m, bias=True),
    lambda m, y: np.cov(m, ddof=0),
    lambda m, y: np.cov(m[0], y),
    lambda m, y: np.cov(m[0]),
    lambda m, y: np.corrcoef(m),
    lambda m, y: np.corrcoef(m, rowvar=False),
    lambda m, y: np.corrcoef(m[0], y),
], ids=["cov", "cols", "bias", "ddof", "xy", "one-row", "corr", "corr-cols", "corr-xy"])
def test_cov_and_corrcoef(f):
    m, y = arr(3, 5), arr(5, seed=4)
    agree(f, m, y)
    derivatives(f, m, y)


def test_cov_dtypes_and_refusals():
    agree(np.cov, np.arange(6).reshape(2, 3))                 # ints: float64
    agree(np.cov, arr(2, 4).astype(np.float32))
    agree(lambda m: np.cov(m, dtype=np.float32), arr(2, 4))
    with pytest.raises(pb.UnsupportedError, match="weights"):
        pb.jit(lambda m: np.cov(m, aweights=np.ones(4)))(arr(2, 4))


def test_ix_indexes_an_open_mesh():
    a = arr(4, 5)
    rows, cols = np.array([2, 0, 2]), np.array([1, 4])
    agree(lambda a, r, c: a[np.ix_(r, c)], a, rows, cols)
    agree(lambda a, r, c: np.ix_(r, [0, 3], c), a, rows, cols)
    agree(lambda a, r, c: a[np.ix_(r, [True, False, False, True, True])], a, rows, cols)
    derivatives(lambda a: a[np.ix_([1, 1, 3], [0, 2])] ** 2, a)   # a repeated row
    with pytest.raises(pb.UnsupportedError, match="boolean"):
        pb.jit(lambda a: a[np.ix_(a[:, 0] > 0, [0])])(a)


def test_meshgrid():
    x, y = arr(3), arr(2, seed=1)
    for f in (np.meshgrid, lambda x, y: np.meshgrid(x, y, indexing="ij"),
              lambda x, y: np.meshgrid(x, y, sparse=True)):
        agree(f, x, y)
        derivatives(lambda x, y, f=f: [g * g for g in f(x, y)], x, y)


def test_rollaxis_and_dsplit():
    a = arr(2, 3, 4)
    for f in (lambda a: np.rollaxis(a, 2), lambda a: np.rollaxis(a, 2, 1),
              lambda a: np.rollaxis(a, 0, 3), lambda a: np.rollaxis(a, -1, -2),
              lambda a: np.rollaxis(a, 1, 1), lambda a: np.dsplit(a, 2),
              lambda a: np.dsplit(a, [1, 3])):
        agree(f, a)
        derivatives(lambda a, f=f: [p * p for p in _leaves(f(a))], a)
    with pytest.raises(np.exceptions.AxisError):
        pb.jit(lambda a: np.rollaxis(a, 0, 5))(a)
    with pytest.raises(ValueError, match="3 or more"):
        pb.jit(lambda a: np.dsplit(a, 2))(arr(2, 4))


def _is_partition(got, x, kths, axis=-1):
    """``got`` is a partition of ``x`` at ``kths`` as NumPy promises one."""
    want = np.sort(x, axis=axis)
    got, want = np.moveaxis(got, axis, -1), np.moveaxis(want, axis, -1)
    for k in np.atleast_1d(kths) % got.shape[-1]:
        np.testing.assert_array_equal(got[..., k], want[..., k])
        assert (got[..., :k] <= got[..., k:k + 1]).all()
        assert (got[..., k + 1:] >= got[..., k:k + 1]).all()
    np.testing.assert_array_equal(np.sort(got, axis=-1), want)


@pytest.mark.parametrize("kth,axis", [(2, -1), ([0, 3], -1), (-1, -1), (1, 0), (4, None)])
def test_partition(kth, axis):
    x = np.array([[3.0, 1.0, 2.0, 1.0, 5.0], [0.0, -1.0, 7.0, 7.0, 2.0]])  # ties
    for backend in BACKENDS:
        got = pb.jit(lambda a: np.partition(a, kth, axis=axis), backend=backend)(x)
        assert got.dtype == x.dtype
        _is_partition(got, x if axis is not None else x.ravel(), kth,
                      axis if axis is not None else -1)
        order = pb.jit(lambda a: np.argpartition(a, kth, axis=axis), backend=backend)(x)
        assert order.dtype == np.argpartition(x, kth, axis=axis).dtype
        flat = x if axis is not None else x.ravel()
        _is_partition(np.take_along_axis(flat, order, axis=axis if axis is not None else -1),
                      flat, kth, axis if axis is not None else -1)
    # the order within each side is the sort's, not NumPy's: differentiate a sorted view
    sorted_cube = lambda a: np.sort(np.partition(a, kth, axis=axis), axis=axis) ** 3  # noqa: E731
    derivatives(sorted_cube, x + 0.1 * np.arange(10).reshape(2, 5))  # no ties
    with pytest.raises(ValueError, match="out of bounds"):
        pb.jit(lambda a: np.partition(a, 9))(x)


def test_item():
    a, i = arr(2, 3), np.arange(6).reshape(2, 3)
    for f in (lambda a, i: a[:1, :1].item(), lambda a, i: a.item(4), lambda a, i: a.item(1, 2),
              lambda a, i: i.item((1, -1)), lambda a, i: (a > 0).item(5),
              lambda a, i: a.astype(np.float32).item(2), lambda a, i: a.item(int(i[1, 0]))):
        agree(f, a, i)
        want = f(a, i)
        assert type(pb.jit(f, backend="c")(a, i)) is type(want)
    derivatives(lambda a: a.item(4) * a.item(0, 0), a)
    with pytest.raises(ValueError, match="size 1"):
        pb.jit(lambda a: a.item())(a)
    with pytest.raises(IndexError):
        pb.jit(lambda a: a.item(6))(a)


@pytest.mark.parametrize("f", [
    lambda a, b: np.einsum(a, [0, 1], b, [1, 2]),
    lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [2, 0]),
    lambda a, b: np.einsum(a, [0, 1], a, [0, 1], []),
    lambda a, b: np.einsum(a, [Ellipsis, 1], [1, Ellipsis]),
    lambda a, b: np.einsum(b, [40, 3], [3]),
], ids=["matmul", "explicit-out", "same-operand-twice", "ellipsis", "lowercase-label"])
def test_einsum_sublist_form(f):
    a, b = arr(2, 3), arr(3, 4, seed=1)
    agree(f, a, b)
    derivatives(f, a, b)


@pytest.mark.parametrize("f", [
    lambda x, y: np.r_[x, 0.0, x],
    lambda x, y: np.r_[x, 0:3],
    lambda x, y: np.r_[-1:1:5j, x],
    lambda x, y: np.r_[x[0], 2, 3],
    lambda x, y: np.r_[y, y],
    lambda x, y: np.c_[x, x * 2],
    lambda x, y: np.c_[y.T, x, 0:3],
    lambda x, y: np.c_[y, y],
], ids=["r-scalars", "r-slice", "r-linspace", "r-0d", "r-2d", "c-1d", "c-mixed", "c-2d"])
def test_r_and_c(f):
    x, y = arr(3), arr(2, 3, seed=1)
    agree(f, x, y)
    derivatives(f, x, y)


def test_r_dtypes_and_directives():
    agree(lambda x: np.r_[x.astype(np.float32), 1.5], arr(3))     # a scalar is weak
    agree(lambda x: np.r_[x.astype(np.int32), 1], arr(3))
    agree(lambda x: np.r_[x, np.float64(1.5)], arr(3).astype(np.float32))
    with pytest.raises(pb.UnsupportedError, match="directive"):
        pb.jit(lambda x: np.r_["0,2", x, x])(arr(3))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_modes_differentiate(mode):
    x = arr(3, 4)
    f = lambda a: np.pad(a, ((1, 2), (4, 0)), mode=mode) ** 2  # noqa: E731
    agree(f, x)
    derivatives(f, x)


PAD_MODES = [
    ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"}),
    ("maximum", {}), ("minimum", {"stat_length": 2}), ("mean", {}),
    ("mean", {"stat_length": (1, 3)}), ("median", {}), ("linear_ramp", {}),
    ("linear_ramp", {"end_values": (5, -2)}),
]


@pytest.mark.parametrize("mode,kw", PAD_MODES, ids=[f"{m}-{k}" for m, k in PAD_MODES])
@pytest.mark.parametrize("width", [(2, 3), ((1, 2), (9, 0))], ids=["narrow", "wider-than-axis"])
def test_pad_more_modes(mode, kw, width):
    x, ints = arr(3, 4), np.arange(12).reshape(3, 4) ** 2   # ints: means round half to even
    f = lambda a: np.pad(a, width, mode=mode, **kw)  # noqa: E731
    agree(f, x)
    agree(f, ints)
    derivatives(f, x)  # (x has no ties, where max/min/median would be one-sided)


def test_pad_refusals():
    x = arr(3)
    with pytest.raises(ValueError, match="empty axis"):
        pb.jit(lambda a: np.pad(a, 1, mode="maximum"))(np.zeros(0))
    with pytest.raises(ValueError, match="stat_length of 0"):
        pb.jit(lambda a: np.pad(a, 1, mode="maximum", stat_length=0))(x)
    with pytest.raises(ValueError, match="unsupported keyword"):
        pb.jit(lambda a: np.pad(a, 1, mode="edge", stat_length=1))(x)
    with pytest.raises(pb.UnsupportedError, match="not supported"):
        pb.jit(lambda a: np.pad(a, 1, mode="empty"))(x)


def _write_split(x):
    a, b = np.split(x, 2)
    a[0] = 9.0
    b += 1.0
    return x


def _write_dsplit(x):
    pieces = np.dsplit(x, [1])
    pieces[1][0, 0, 0] = -3.0
    return x * 1


def _write_rolled(x):
    y = np.rollaxis(x, 2)
    y[1] = 4.0
    return x


def _write_real(x):
    x.real[0] = 5.0
    np.real(x)[1] = 7.0
    return x * 1


@pytest.mark.parametrize("f,shape", [(_write_split, (4,)), (_write_dsplit, (2, 2, 3)),
                                     (_write_rolled, (2, 2, 3)), (_write_real, (3,))])
def test_writes_through_views_reach_the_base(f, shape):
    """np.split's pieces, np.rollaxis and a real array's .real are views, as in NumPy."""
    x = arr(*shape)
    for backend in BACKENDS:
        mine, theirs = x.copy(), x.copy()
        np.testing.assert_array_equal(pb.jit(f, backend=backend)(mine), f(theirs))
        np.testing.assert_array_equal(mine, theirs)


def test_imag_of_a_real_array_is_read_only():
    def write(x):
        x.imag[0] = 1.0
        return x

    for backend in BACKENDS:
        with pytest.raises(ValueError, match="read-only"):
            pb.jit(write, backend=backend)(arr(3))


@pytest.mark.parametrize("fn", [np.convolve, np.correlate], ids=["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(5, 3), (3, 5), (4, 4), (1, 3)])
def test_convolve_and_correlate_modes(fn, mode, n, m):
    a, v = arr(n), arr(m, seed=1)
    f = lambda a, v: fn(a, v, mode=mode)  # noqa: E731
    agree(f, a, v)
    derivatives(f, a, v)
