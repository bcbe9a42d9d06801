"""Matrix products in the generated C: every layout the backend maps to a row-major
product (either operand transposed, batched, vector-matrix, matrix-vector), in float and
int dtypes, equals NumPy on both sides of the size where BLAS takes over from the inline
kernel; a product's epilogue (``w - lr * (a @ b)``, ``acc + a @ b``) is computed by the
product as it stores its result, into ``acc``'s buffer where ``acc`` dies there, and an
``acc`` still read later is left as it was."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Const, Gemm, Sym, walk
from pullback.backends.c.lower import products

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(11)


def _native(fn, *args):
    """``fn(*args)`` compiled, and the products of its loop IR."""
    jitted = pb.jit(fn, backend="c")
    module = c.source_of(jitted.lower(*args).ir).module
    return jitted(*args), [s for f in module.funcs for s in walk(f.body) if isinstance(s, Gemm)]


def _nn(a, b):
    return np.einsum("ik,kj->ij", a, b)


def _nt(a, b):
    return np.einsum("ik,jk->ij", a, b)


def _tn(a, b):
    return np.einsum("ki,kj->ij", a, b)


def _tt(a, b):
    return np.einsum("ki,jk->ij", a, b)


#: Per layout: the product, its operands' shapes for an m x n result of k terms, and
#: the transpose flags the kernel or BLAS call gets.
LAYOUTS = {
    "NN": (_nn, lambda m, n, k: ((m, k), (k, n)), (0, 0)),
    "NT": (_nt, lambda m, n, k: ((m, k), (n, k)), (0, 1)),
    "TN": (_tn, lambda m, n, k: ((k, m), (k, n)), (1, 0)),
    "TT": (_tt, lambda m, n, k: ((k, m), (n, k)), (1, 1)),
}
#: (m, n, k): below the inline kernel's limit for every layout (with edge rows and
#: columns), then above it for every layout.
SMALL, LARGE = (13, 37, 29), (96, 160, 72)


def _operands(shapes, dtype):
    if np.dtype(dtype).kind == "i":
        return [RNG.integers(-50, 50, s).astype(dtype) for s in shapes]
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


def _assert_close(got, a, b, fn):
    """Equal to the float64 product within the tolerance of summing in ``got``'s dtype."""
    want = fn(a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == fn(a, b).dtype
    if got.dtype.kind == "i":
        np.testing.assert_array_equal(got, want.astype(got.dtype))
        return
    scale = fn(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    eps = np.finfo(got.dtype).eps
    assert np.all(np.abs(got - want) <= 4 * a.shape[-1] * eps * scale + 1e-30)


def _call(gemms, dtype):
    """The (m, n, k, trans_a, trans_b) of the one product, and whether it is large (BLAS
    or the packed kernels compute it)."""
    (g,) = gemms
    assert g.dtype.name == dtype
    return (g.m, g.n, g.k, int(g.trans_a), int(g.trans_b)), g.blas


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_equals_numpy_on_both_sides_of_the_blas_limit(layout, size, dtype):
    fn, shapes, flags = LAYOUTS[layout]
    m, n, k = SMALL if size == "small" else LARGE
    a, b = _operands(shapes(m, n, k), dtype)
    got, gemms = _native(fn, a, b)
    _assert_close(got, a, b, fn)
    assert _call(gemms, dtype) == ((m, n, k, *flags), size == "large")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_int_products_are_exact_and_never_go_to_blas(layout, dtype):
    fn, shapes, flags = LAYOUTS[layout]
    a, b = _operands(shapes(*LARGE), dtype)
    got, gemms = _native(fn, a, b)
    _assert_close(got, a, b, fn)
    assert _call(gemms, dtype) == ((*LARGE, *flags), False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("sa", "sb"), [
    ((4, 9, 33), (4, 33, 40)),  # batched
    ((3, 2, 70, 20), (3, 2, 20, 90)),  # two batch axes, large enough for BLAS
    ((33,), (33, 40)),  # vector @ matrix
    ((40, 33), (33,)),  # matrix @ vector
    ((300,), (300, 200)),  # a long vector @ matrix, past the inline limit
])
def test_batched_and_vector_products_equal_numpy(sa, sb, dtype):
    def f(a, b):
        return a @ b

    a, b = _operands([sa, sb], dtype)
    got, gemms = _native(f, a, b)
    _assert_close(got, a, b, f)
    assert len(gemms) == 1


def _plus_one(a, b):
    return a @ b + 1.0


def test_small_products_emit_no_blas_call_and_large_ones_do():
    small, large = 32, 128
    assert small ** 3 <= min(products.GEMM_INLINE_MAX_WORK.values())
    assert large ** 3 > max(products.GEMM_INLINE_MAX_WORK.values())
    for n, blas in ((small, False), (large, True)):
        a, b = _operands([(n, n), (n, n)], "float32")
        got, gemms = _native(_plus_one, a, b)
        assert [g.blas for g in gemms] == [blas]
        np.testing.assert_allclose(got, a @ b + 1.0, rtol=1e-4, atol=1e-4 * n)


def _weight_gradient(hs, dzs, dw):
    for t in range(hs.shape[0]):
        dw = dw + hs[t].T @ dzs[t]
    return dw


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [16, 160])
def test_an_accumulated_product_adds_into_the_dying_sum(dtype, m):
    hs, dzs = _operands([(5, 24, m), (5, 24, m)], dtype)
    dw0 = _operands([(m, m)], dtype)[0]
    got, gemms = _native(_weight_gradient, hs, dzs, dw0)
    want = dw0.astype(np.float64) + np.einsum("tki,tkj->ij", hs.astype(np.float64), dzs)
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    (g,) = gemms
    assert g.addend is g.c and g.alpha is None


def _sum_still_read(acc, a, b):
    s = acc + a @ b
    return s, acc * 2.0


def _sum_is_an_operand(acc, b):
    return acc + acc @ b


def _sum_of_a_loop_carry(acc, a, b):
    for _ in range(3):
        acc = acc @ b + acc
        acc = a @ b + acc
    return acc


def test_an_accumulator_read_later_or_read_by_the_product_is_not_overwritten():
    acc, a, b = _operands([(20, 32), (20, 32), (32, 32)], "float64")
    (s, twice), gemms = _native(_sum_still_read, acc, a, b)
    np.testing.assert_allclose(s, acc + a @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(twice, acc * 2.0)
    assert [g.addend is not None and g.addend is not g.c for g in gemms] == [True]
    got, gemms = _native(_sum_is_an_operand, acc, b)
    np.testing.assert_allclose(got, acc + acc @ b, rtol=1e-12, atol=1e-12)
    assert [g.addend is not None and g.addend is not g.c for g in gemms] == [True]
    got, _ = _native(_sum_of_a_loop_carry, acc / 8, a / 8, b / 8)
    want = acc / 8
    for _ in range(3):
        want = want @ (b / 8) + want
        want = (a / 8) @ (b / 8) + want
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


#: Past every block edge of the packed kernel: two column blocks (PB_NC), two depth
#: blocks (PB_KC), row blocks (PB_MC) and tiles (PB_MR, two vectors) cut short; and a
#: result narrower than half a tile, which the kernel computes transposed.
PACKED = {"blocks": (131, 2100, 300), "narrow": (1100, 7, 300)}


@pytest.mark.parametrize("gemm", ["packed", "blas"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("shape", list(PACKED))
def test_large_products_equal_numpy_with_packed_kernels_and_blas(shape, layout, dtype, gemm,
                                                                 monkeypatch):
    """``PULLBACK_GEMM`` picks the runtime's packed kernels (where the CPU has AVX-512)
    or BLAS; the first call of a module reads it."""
    monkeypatch.setenv("PULLBACK_GEMM", gemm)
    fn, shapes, _ = LAYOUTS[layout]
    m, n, k = PACKED[shape]
    a, b = _operands(shapes(m + (gemm == "blas"), n, k), dtype)
    got, gemms = _native(fn, a, b)
    assert [g.blas for g in gemms] == [True]
    _assert_close(got, a, b, fn)
    acc = _operands([(m + (gemm == "blas"), n)], dtype)[0]
    tol = 1e-3 if dtype == "float32" else 1e-10
    product = fn(a.astype(np.float64), b.astype(np.float64))
    total = pb.jit(lambda acc, a, b: acc + fn(a, b), backend="c")(acc, a, b)
    np.testing.assert_allclose(total, acc + product, rtol=tol, atol=tol)
    step = pb.jit(lambda acc, a, b, lr: acc - lr * fn(a, b), backend="c")(acc, a, b, 0.25)
    np.testing.assert_allclose(step, acc - 0.25 * product, rtol=tol, atol=tol)
    assert not np.shares_memory(step, acc)


def _sgd(w, x, d, lr):
    return w - lr * (x.T @ d)


def _scaled_right(w, x, d):
    return (x.T @ d) * -2.0 + w


def _two_updates(w, v, x, d):
    g = x.T @ d
    return w - 0.5 * g, v + g  # the product is read twice: no epilogue


def _subtracted_from(w, x, d):
    return (x.T @ d) - w


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("n", [12, 96])  # inline kernel, BLAS or packed kernels
def test_a_scaled_product_added_to_an_array_is_one_product_with_alpha_and_addend(n, dtype):
    """``w - lr * (x.T @ d)``: the product computes the update as it stores its result,
    reading ``w`` (left as it was); no array of the product is stored."""
    w = _operands([(n, n + 3)], dtype)[0]
    k = 40 if n == 12 else 200
    x, d = _operands([(k, n), (k, n + 3)], dtype)
    lr = 3 if dtype == "int64" else 0.125
    want = w - lr * (x.astype(np.float64).T @ d)
    got, gemms = _native(_sgd, w, x, d, lr)
    (g,) = gemms
    assert isinstance(g.addend, Sym) and g.addend.name.startswith("p")  # w, a parameter
    assert g.alpha is not None and g.blas is (n == 96 and dtype != "int64")
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if dtype == "int64":  # times -2.0 is a float64 array: no epilogue
        return
    got, gemms = _native(_scaled_right, w, x, d)
    (g,) = gemms
    assert isinstance(g.alpha, Const) and g.alpha.value == -2.0 and g.addend is not None
    np.testing.assert_allclose(got, w - 2.0 * (x.astype(np.float64).T @ d), rtol=tol,
                               atol=tol)


def test_a_product_read_twice_or_subtracted_from_keeps_its_own_array():
    w, v = _operands([(24, 27), (24, 27)], "float64")
    x, d = _operands([(40, 24), (40, 27)], "float64")
    (new_w, new_v), gemms = _native(_two_updates, w, v, x, d)
    assert [(g.addend, g.alpha) for g in gemms] == [(None, None)]
    np.testing.assert_allclose(new_w, w - 0.5 * (x.T @ d), rtol=1e-12)
    np.testing.assert_allclose(new_v, v + x.T @ d, rtol=1e-12)
    got, gemms = _native(_subtracted_from, w, x, d)
    assert [(g.addend, g.alpha) for g in gemms] == [(None, None)]
    np.testing.assert_allclose(got, x.T @ d - w, rtol=1e-12, atol=1e-12)  # cancellation


def _empty_sum(w, a, b, n):
    return w + a[:, :n] @ b[:n, :]


def test_a_product_of_no_terms_is_its_addend_or_zeros():
    w, a, b = _operands([(6, 7), (6, 5), (5, 7)], "float64")
    got, gemms = _native(_empty_sum, w, a, b, 0)
    assert [(g.k, g.addend is not None) for g in gemms] == [(0, True)]
    np.testing.assert_array_equal(got, w)
    got = pb.jit(lambda a, b: a[:, :0] @ b[:0, :], backend="c")(a, b)
    np.testing.assert_array_equal(got, np.zeros((6, 7)))
