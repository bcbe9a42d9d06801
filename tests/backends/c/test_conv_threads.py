"""Convolution blocks run at once on a team of threads (issue 24, ``lower/convolutions.py``):
with two threads and the blocks shrunk so that whole blocks share the team and a shorter
rest follows, values equal the definition written out in NumPy and the gradients in both
operands (the input's: blocks of images; the weight's: blocks of channels whose products
add up per thread) equal float64 central differences; the loop IR has the team's loop,
OpenBLAS's thread count is what it was after the call, and a child forked after the
team ran runs the blocks too (alone)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.ir import Loop, walk
from pullback.backends.c.lower import convolutions
from pullback.nn import functional as F

from ...nn.test_linear_conv import conv_reference
from .test_conv_blocks import check_directions
from .test_limits import last_json, run

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(24)
TEAM = 2

#: x shape, w shape, keywords, the reference's stride, (lo, hi) pads, dilation, block
#: bytes (of 8-byte elements: halved for float32, the same blocks).  32 output channels:
#: the blocks' products go to BLAS, 4: to the runtime's kernel.  "images": 3 images a
#: block (7 = 3 + 3 + 1), products put in place after; "one_image": a block per image,
#: written in place (48 blocks: threads sharing a scratch buffer would overwrite each
#: other's); "strided": padded unevenly, dilated and strided.  Each weight gradient runs
#: in blocks of channels (the images).
CASES = {
    "images": ((7, 3, 10, 10), (32, 3, 3, 3), {"padding": 1}, (1, 1), ((1, 1), (1, 1)),
               (1, 1), 1 << 16),
    "one_image": ((48, 3, 10, 10), (4, 3, 3, 3), {"padding": 1}, (1, 1),
                  ((1, 1), (1, 1)), (1, 1), 1 << 15),
    "strided": ((9, 4, 11, 10), (32, 4, 2, 3),
                {"dilation": (2, 1), "stride": (1, 2), "padding": ((1, 0), (0, 2))},
                (1, 2), ((1, 0), (0, 2)), (2, 1), 1 << 14),
}


@pytest.fixture(autouse=True)
def team(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks on two threads whatever the machine's threshold, in a private cache."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(convolutions, "team_size", lambda: TEAM)
    monkeypatch.setattr(convolutions, "runs_parallel", lambda n: True)


def _case(name: str, dtype: type) -> tuple:
    xs, ws, kw, stride, pads, dilation, block = CASES[name]
    x, w = RNG.normal(size=xs).astype(dtype), RNG.normal(size=ws).astype(dtype)
    return x, w, kw, conv_reference(x, w, stride, pads, dilation, 1), \
        block * x.itemsize // 8


def _blas_threads() -> int:
    lib = ctypes.CDLL(str(compiler.openblas_library()))
    return lib[f"{compiler.BLAS_PREFIX}openblas_get_num_threads"]()


def _teams(jitted, *args) -> int:
    """The loops of the module that run blocks on the team."""
    module = c.source_of(jitted.lower(*args).ir).module
    return sum(isinstance(s, Loop) and any(c.startswith(f"num_threads({TEAM} <")
                                           for c in s.reductions)
               for f in module.funcs for s in walk(f.body))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", CASES)
def test_conv_blocks_on_a_team_are_the_definition(name, dtype, monkeypatch) -> None:
    x, w, kw, want, block = _case(name, dtype)
    monkeypatch.setattr(convolutions, "BLOCK_BYTES", block)
    before = _blas_threads()
    jitted = pb.jit(lambda a, b: F.conv(a, b, **kw), backend="c")
    got = jitted(x, w)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert _blas_threads() == before
    assert _teams(jitted, x, w) == 1


@pytest.mark.parametrize("name", CASES)
def test_conv_blocks_on_a_team_differentiate(name, monkeypatch) -> None:
    """Both operands' gradients against central differences of the NumPy definition
    along three random directions each."""
    x, w, kw, out, block = _case(name, np.float64)
    monkeypatch.setattr(convolutions, "BLOCK_BYTES", block)
    _, _, _, stride, pads, dilation, _ = CASES[name]
    weights = RNG.normal(size=out.shape)

    def loss(a, b):
        return np.sum(F.conv(a, b, **kw) * weights)

    def reference(a, b):
        return np.sum(conv_reference(a, b, stride, pads, dilation, 1) * weights)

    jitted = pb.jit(pb.grad(loss, argnums=(0, 1)), backend="c")
    grads = jitted(x, w)
    assert _teams(jitted, x, w) >= 2  # the input's and the weight's gradients
    check_directions(grads, (x, w), reference, RNG)


#: Blocks on a team in the parent, then in a forked child (whose loops run alone:
#: libgomp's threads do not survive fork, and a team of two would wait for them).
FORK = """
import json, multiprocessing
import numpy as np
import pullback as pb
from pullback.backends.c.lower import convolutions
from pullback.nn import functional as F

convolutions.team_size = lambda: 2
convolutions.runs_parallel = lambda n: True
convolutions.BLOCK_BYTES = 1 << 15

def conv(a, b):
    return F.conv(a, b, padding=1)

rng = np.random.default_rng(0)
x, w = rng.standard_normal((16, 3, 10, 10)), rng.standard_normal((32, 3, 3, 3))
jitted = pb.jit(conv, backend="c")

def work(k):
    return jitted(x * k, w).tolist()

if __name__ == "__main__":
    parent = work(1.0)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.map(work, [2.0])[0]
    print(json.dumps([parent, child]))
"""


def test_a_child_forked_after_blocks_on_a_team_runs_them(tmp_path) -> None:
    parent, child = last_json(run(tmp_path, FORK, {"PULLBACK_NUM_THREADS": "2",
                                                    "PULLBACK_CACHE_DIR": str(tmp_path)}))
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((16, 3, 10, 10)), rng.standard_normal((32, 3, 3, 3))
    for got, k in ((parent, 1.0), (child, 2.0)):
        want = conv_reference(x * k, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
