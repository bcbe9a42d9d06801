"""Matrix products in the generated C: every layout the backend maps to a row-major
product (either operand transposed, batched, vector-matrix, matrix-vector), in float and
int dtypes, equals NumPy on both sides of the size where BLAS takes over from the inline
kernel; ``acc + a @ b`` where ``acc`` dies is one product added into ``acc``'s buffer,
and an ``acc`` still read later is left as it was."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c import build, lower_ops

pytestmark = pytest.mark.skipif(not build.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(11)


def _native(fn, *args):
    jitted = pb.jit(fn, backend="c")
    staged, _ = jitted.specialise(*args)
    assert staged.runner is not None
    return jitted(*args), staged.runner.source


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


def _call(source, dtype):
    """The (m, n, k, trans_a, trans_b) of the source's one product, and whether BLAS
    computes it."""
    inline = re.findall(rf"pb_gemm_{dtype}\((\d+), (\d+), (\d+), [^,]+, (\d), [^,]+, (\d),",
                        source)
    blas = re.findall(r"cblas_[sd]gemm\(CblasRowMajor, Cblas(\w+), Cblas(\w+), (\d+), "
                      r"(\d+), (\d+),", source)
    assert len(inline) + len(blas) == 1, (inline, blas)
    if inline:
        m, n, k, ta, tb = map(int, inline[0])
        return (m, n, k, ta, tb), False
    ta, tb, m, n, k = blas[0]
    return (int(m), int(n), int(k), int(ta == "Trans"), int(tb == "Trans")), True


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_equals_numpy_on_both_sides_of_the_blas_limit(layout, size, dtype):
    fn, shapes, flags = LAYOUTS[layout]
    m, n, k = SMALL if size == "small" else LARGE
    a, b = _operands(shapes(m, n, k), dtype)
    got, source = _native(fn, a, b)
    _assert_close(got, a, b, fn)
    assert _call(source, dtype) == ((m, n, k, *flags), size == "large")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_int_products_are_exact_and_never_go_to_blas(layout, dtype):
    fn, shapes, flags = LAYOUTS[layout]
    a, b = _operands(shapes(*LARGE), dtype)
    got, source = _native(fn, a, b)
    _assert_close(got, a, b, fn)
    assert _call(source, dtype) == ((*LARGE, *flags), False)


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
    got, source = _native(f, a, b)
    _assert_close(got, a, b, f)
    assert "cblas" in source or "pb_gemm_" in source


def _plus_one(a, b):
    return a @ b + 1.0


def test_small_products_emit_no_blas_call_and_large_ones_do():
    small, large = 32, 128
    assert small ** 3 <= min(lower_ops.GEMM_INLINE_MAX_WORK.values())
    assert large ** 3 > max(lower_ops.GEMM_INLINE_MAX_WORK.values())
    for n, blas in ((small, False), (large, True)):
        a, b = _operands([(n, n), (n, n)], "float32")
        got, source = _native(_plus_one, a, b)
        assert ("scipy_cblas_sgemm" in source) is blas
        assert ("pb_gemm_float32" in source) is not blas
        np.testing.assert_allclose(got, a @ b + 1.0, rtol=1e-4, atol=1e-4 * n)


def _weight_gradient(hs, dzs, dw):
    for t in range(hs.shape[0]):
        dw = dw + hs[t].T @ dzs[t]
    return dw


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [16, 160])  # inline kernel, BLAS with beta = 1
def test_an_accumulated_product_adds_into_the_dying_sum(dtype, m):
    hs, dzs = _operands([(5, 24, m), (5, 24, m)], dtype)
    dw0 = _operands([(m, m)], dtype)[0]
    got, source = _native(_weight_gradient, hs, dzs, dw0)
    want = dw0.astype(np.float64) + np.einsum("tki,tkj->ij", hs.astype(np.float64), dzs)
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    accumulating = re.findall(rf"pb_gemm_{dtype}\([^;]*, 1\);", source) + \
        re.findall(r"cblas_[sd]gemm\([^;]*, 1\.0, [^,]+, \d+\);", source)
    assert len(accumulating) == 1
    assert "(0x0.0p+0)" not in source  # no pass adding the product (as zeros) after it


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
    (s, twice), source = _native(_sum_still_read, acc, a, b)
    np.testing.assert_allclose(s, acc + a @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(twice, acc * 2.0)
    assert not re.findall(r"pb_gemm_float64\([^;]*, 1\);", source)
    got, source = _native(_sum_is_an_operand, acc, b)
    np.testing.assert_allclose(got, acc + acc @ b, rtol=1e-12, atol=1e-12)
    assert not re.findall(r"pb_gemm_float64\([^;]*, 1\);", source)
    got, _ = _native(_sum_of_a_loop_carry, acc / 8, a / 8, b / 8)
    want = acc / 8
    for _ in range(3):
        want = want @ (b / 8) + want
        want = (a / 8) @ (b / 8) + want
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


#: Past every block edge of the packed kernel: two column blocks (PB_NC), two depth
#: blocks (PB_KC), row blocks (PB_MC) and tiles (PB_MR, two vectors) cut short.
PACKED = (131, 2100, 300)


@pytest.mark.parametrize("gemm", ["packed", "blas"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_large_products_equal_numpy_with_packed_kernels_and_blas(layout, dtype, gemm,
                                                                 monkeypatch):
    """``PULLBACK_GEMM`` picks the runtime's packed kernels (where the CPU has AVX-512)
    or BLAS; the first call of a module reads it."""
    monkeypatch.setenv("PULLBACK_GEMM", gemm)
    fn, shapes, _ = LAYOUTS[layout]
    m, n, k = PACKED
    a, b = _operands(shapes(m + (gemm == "blas"), n, k), dtype)
    got, source = _native(fn, a, b)
    assert "pb_gemm_packed_" in source and "cblas_" in source
    _assert_close(got, a, b, fn)
    acc = _operands([(m + (gemm == "blas"), n)], dtype)[0]
    total = pb.jit(lambda acc, a, b: acc + fn(a, b), backend="c")(acc, a, b)
    want = acc.astype(np.float64) + fn(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(total, want, rtol=1e-3 if dtype == "float32" else 1e-10,
                               atol=1e-3 if dtype == "float32" else 1e-10)
