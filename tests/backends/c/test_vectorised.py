"""Loops the C compiler must vectorise, checked on the module it builds: where libmvec's
vector math is linked, a loop calling ``exp`` that vectorises calls the vector ``exp``
(``_ZGV...exp``) and never the scalar one."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


def gp_kernel(z, noise):
    """The GP likelihood's kernel matrix: written in place over the product's buffer,
    with ``eye``'s diagonal a comparison of the row and column feeding a select (GCC 12
    left this loop scalar under the default ``-ftrapping-math``)."""
    sq = np.sum(z * z, axis=1)
    return 1.5 * np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq) + noise * np.eye(z.shape[0])


@needs_cc
def test_the_kernel_loop_calls_vector_exp_only(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(cache))
    monkeypatch.setenv("PULLBACK_TIERED", "0")
    monkeypatch.delenv("PULLBACK_CFLAGS", raising=False)  # the suite's -O1: as users build
    if not compiler._probed(*compiler._found(), tuple(compiler._cflags()))[1]:
        pytest.skip("no vector math (libmvec) with this compiler")
    z = np.random.default_rng(0).standard_normal((300, 5))
    np.testing.assert_allclose(pb.jit(gp_kernel, backend="c")(z, 0.1), gp_kernel(z, 0.1),
                               rtol=1e-13)
    (module,) = cache.glob("pb_*.so")
    data = module.read_bytes()
    assert b"_ZGV" in data and b"v_exp" in data
    assert b"\x00exp\x00" not in data
