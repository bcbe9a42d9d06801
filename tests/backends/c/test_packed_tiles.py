"""The runtime's packed products (runtime/packed.c) called as modules call them: a
panel's tile has its rows rounded up to a multiple of 4, A's panels of 4, 8 or 12 rows
are read in place (a last one of another height packed), B's rows are packed under two
blocks of A or more (else read in place), and a C of few rows times a transposed B is
computed as its transpose.  Each path sums every element as the plain blocked algorithm
does, so the results equal, to the bit, those of a product that takes another path (more
rows or columns, whose extra ones are cut off), and NumPy's in float64 within rounding."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pullback.backends.c.build import compiler, libraries, tuning

pytestmark = [
    pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler"),
    pytest.mark.skipif(not tuning.has_avx512(tuning.cpu_id()),
                       reason="the packed kernels are built only with AVX-512")]

RNG = np.random.default_rng(5)
_TYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double}


def _gemm(dtype: str):
    """``C = op(A) op(B) (+ Cin)`` by the packed library's product of ``dtype``."""
    lib = ctypes.CDLL(str(compiler.library_path(
        "pbpacked", libraries.LIBRARIES["pbpacked"][0])))
    fn = getattr(lib, f"pb_gemm_packed_{dtype}")
    i64, i32, ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
    fn.argtypes = [i64, i64, i64, _TYPES[dtype], ptr, i32, ptr, i32, ptr, ptr]
    fn.restype = i32

    def run(a: np.ndarray, ta: bool, b: np.ndarray, tb: bool, cin: np.ndarray | None,
            alpha: float = 1.0) -> np.ndarray:
        m, k = a.shape[::-1] if ta else a.shape
        n = b.shape[0] if tb else b.shape[1]
        c = np.empty((m, n), dtype)
        assert fn(m, n, k, alpha, a.ctypes.data, int(ta), b.ctypes.data, int(tb),
                  None if cin is None else cin.ctypes.data, c.ctypes.data) == 0
        return c
    return run


def _operand(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _close(got: np.ndarray, want: np.ndarray, k: int) -> None:
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * k * eps * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [32, 20, 8, 4, 30])
@pytest.mark.parametrize("ta", [False, True])
def test_a_short_last_panel_sums_as_a_whole_one(dtype, m, ta):
    """Rows past a multiple of 12 take a tile of 4 or 8 rows (30: 12, 12, then 6 in a
    tile of 8): each row of C equals that row of a product with more rows."""
    gemm, k, n = _gemm(dtype), 300, 70
    big = _operand((k, m + 12) if ta else (m + 12, k), dtype)
    a = np.ascontiguousarray(big[:, :m] if ta else big[:m])
    b, cin = _operand((k, n), dtype), _operand((m, n), dtype)
    got = gemm(a, ta, b, False, cin, 0.5)
    whole = gemm(big, ta, b, False, np.concatenate([cin, cin[:12]]), 0.5)
    np.testing.assert_array_equal(got, whole[:m])
    op_a = a.T if ta else a
    _close(got, cin + 0.5 * (op_a.astype(np.float64) @ b), k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [302, 37])
@pytest.mark.parametrize("n", ["one panel", "several"])
@pytest.mark.parametrize("ta", [False, True])
def test_a_ragged_panel_packed_sums_as_read_in_place(dtype, m, n, ta):
    """A's panels of 4, 8 or 12 rows are read where they lie, a last one of another
    height packed (302 rows: blocks of 120, 120 and 62, the last panel 2 rows; 37: 12,
    12, 12, 1): its rows equal, to the bit, those of a product of two more rows, whose
    last panel of 4 is read in place (past PB_KC, and with B one panel wide or more)."""
    gemm, k = _gemm(dtype), 600
    cols = 64 // np.dtype(dtype).itemsize * (2 if n == "one panel" else 5)
    more = _operand((k, m + 2) if ta else (m + 2, k), dtype)
    a = np.ascontiguousarray(more[:, :m] if ta else more[:m])
    b, cin = _operand((k, cols), dtype), _operand((m + 2, cols), dtype)
    got = gemm(a, ta, b, False, cin[:m].copy())
    np.testing.assert_array_equal(got, gemm(more, ta, b, False, cin)[:m])
    op_a = a.T if ta else a
    _close(got, cin[:m] + op_a.astype(np.float64) @ b, k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_b_packed_under_a_tall_a_sums_as_read_in_place(dtype):
    """250 rows (over two blocks of A) pack B's rows, 100 read them where they lie: the
    rows they share are equal to the bit."""
    gemm, k, n = _gemm(dtype), 300, 70
    a, b, cin = _operand((250, k), dtype), _operand((k, n), dtype), _operand((250, n), dtype)
    tall = gemm(a, False, b, False, cin)
    np.testing.assert_array_equal(gemm(a[:100].copy(), False, b, False, cin[:100].copy()),
                                  tall[:100])
    _close(tall, cin + a.astype(np.float64) @ b, k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", ["tile", "over half"])
@pytest.mark.parametrize("cin", [False, True])
def test_few_rows_times_a_transposed_b_sums_as_the_plain_product(dtype, m, cin):
    """``dz @ W.T`` with dz of at most one tile's width of rows (a recurrent layer's
    state gradient) is computed as ``W dz'``, W read in place: the same bits as the
    plain product of a B laid out untransposed, and with Cin added as it sums."""
    gemm, k, n = _gemm(dtype), 1000, 260
    width = 128 // np.dtype(dtype).itemsize
    rows = width if m == "tile" else width // 2 + 3
    a, w = _operand((rows, k), dtype), _operand((n, k), dtype)
    add = _operand((rows, n), dtype) if cin else None
    got = gemm(a, False, w, True, add, -0.25)
    plain = gemm(a, False, np.ascontiguousarray(w.T), False, add, -0.25)
    np.testing.assert_array_equal(got, plain)
    want = -0.25 * (a.astype(np.float64) @ w.T.astype(np.float64))
    _close(got, want if add is None else add + want, k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_narrow_c_adds_cin_as_it_sums(dtype):
    """A C narrower than half a tile, computed as its transpose, starts from Cin: the
    same bits as those columns of a product wide enough for the plain path."""
    gemm, m, k = _gemm(dtype), 200, 700
    a, b = _operand((m, k), dtype), _operand((k, 64), dtype)
    cin = _operand((m, 64), dtype)
    got = gemm(a, False, np.ascontiguousarray(b[:, :7]), False,
               np.ascontiguousarray(cin[:, :7]), 2.0)
    plain = gemm(a, False, b, False, cin, 2.0)
    np.testing.assert_array_equal(got, plain[:, :7])
