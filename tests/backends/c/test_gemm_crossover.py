"""Where the inline kernel hands a product to BLAS (issue 24): a product of a few rows
stays inline up to more work (OpenBLAS is slow on such an A) than one of 16 rows or more
(``GEMM_INLINE_MAX_WORK``, the defaults: conftest.py pins them); either way it equals NumPy,
for every row count about the boundary (odd sizes, so the kernels' edge tiles run)."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Gemm, walk
from pullback.backends.c.lower import products

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(24)


def _product(a, b):
    return a @ b


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [1, 5, products.GEMM_FEW_ROWS, products.GEMM_FEW_ROWS + 1, 33])
def test_the_product_runs_where_measured_faster_and_equals_numpy(m, dtype):
    n, k = 200, 131  # m * n * k past GEMM_INLINE_MAX_WORK from 3 rows up
    a, b = (RNG.standard_normal(s).astype(dtype) for s in ((m, k), (k, n)))
    jitted = pb.jit(_product, backend="c")
    gemms = [s for f in c.source_of(jitted.lower(a, b).ir).module.funcs
             for s in walk(f.body) if isinstance(s, Gemm)]
    work = m * n * k
    blas = work > products.GEMM_INLINE_MAX_WORK["few" if m <= products.GEMM_FEW_ROWS
                                                else "direct"]
    assert [g.blas for g in gemms] == [blas]
    assert blas == (m > products.GEMM_FEW_ROWS)  # both sides of the boundary are run
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(jitted(a, b), a.astype(np.float64) @ b, rtol=tol,
                               atol=tol * np.sqrt(k))
