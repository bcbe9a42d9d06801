"""Products of few rows by a large B (an RNN step's ``h @ w_hh``) ask the runtime with
their shape whether the packed kernels compute them (runtime.h's ``pb_packed_gemm``:
OpenBLAS packs all of B on every call), and equal NumPy in every layout whoever computes
them: the tuning's choice, or ``PULLBACK_GEMM``."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

LAYOUTS = {"nn": (lambda a, b: a @ b, lambda m: ((m, 256), (256, 1024))),
           "nt": (lambda a, b: a @ b.T, lambda m: ((m, 256), (1024, 256))),
           "tn": (lambda a, b: a.T @ b, lambda m: ((256, m), (256, 1024)))}
#: rows per setting: a module reads PULLBACK_GEMM at its first call, so each its own
ROWS = {None: 32, "packed": 31, "blas": 33}


def test_the_runtime_is_asked_with_the_product_shape():
    fn, shapes = LAYOUTS["nn"]
    sa, sb = shapes(32)
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    text = c.source_of(pb.jit(fn, backend="c").lower(a, b).ir).text
    assert "pb_packed_gemm(32, 1024, 256)" in text


@pytest.mark.parametrize("gemm", [None, "packed", "blas"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_few_row_products_equal_numpy(layout, dtype, gemm, monkeypatch):
    if gemm is None:
        monkeypatch.delenv("PULLBACK_GEMM", raising=False)
    else:
        monkeypatch.setenv("PULLBACK_GEMM", gemm)
    fn, shapes = LAYOUTS[layout]
    sa, sb = shapes(ROWS[gemm])
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
    got = pb.jit(fn, backend="c")(a, b)
    want = fn(a.astype(np.float64), b.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
