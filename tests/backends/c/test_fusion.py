"""Fusion in the generated C keeps NumPy's answers: pointwise equations over one shape
share a loop even when other equations sit between them, several full reductions
accumulate in that loop, a loop stores only what later code reads, and a value later
loops read is computed again there when that is cheaper than storing it."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.build.threads import parallel_min

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

N = 777  # the extent of the loops counted below; no other loop of these programs has it
RNG = np.random.default_rng(3)
X = RNG.standard_normal(N)
W = RNG.standard_normal((5, 5))


def _native(fn, *args):
    jitted = pb.jit(fn, backend="c")
    staged, _ = jitted.specialise(*args)
    assert staged.runner is not None
    return jitted(*args), staged.runner.source


def _loops(source: str, n: int = N, start: int = 0) -> list[str]:
    """The text of each loop over the elements from ``start`` up to ``n``."""
    lines = source.splitlines()
    out = []
    for k, line in enumerate(lines):
        if re.search(rf"for \(int64_t (\w+) = {start}; \1 < {n}; \1\+\+\)", line):
            j, depth = k, line.count("{") - line.count("}")
            while depth > 0:
                j += 1
                depth += lines[j].count("{") - lines[j].count("}")
            out.append("\n".join(lines[k:j + 1]))
    return out


def _stores(source: str, n: int = N) -> int:
    """Elements the loops over ``n`` elements write to buffers."""
    return sum(len(re.findall(r"\bv\d+\[\w+\] = ", text)) for text in _loops(source, n))


def _central_difference(f, x, eps=1e-6):
    g = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = eps
        g[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def interleaved(x, w):
    a = np.tanh(x)
    m = w @ w  # another shape: stays in place, after the loop
    b = a * 2.0 + np.exp(x)
    n = np.sin(m)
    return b - a, n


def test_pointwise_equations_around_others_share_one_loop():
    (got, n), source = _native(interleaved, X, W)
    want, want_n = interleaved(X, W)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(n, want_n, rtol=1e-12, atol=1e-15)
    assert len(_loops(source)) == 1
    assert _stores(source) == 1  # only the result


def after_a_product(x, w):
    a = np.cos(x)
    y = (a[:25].reshape(5, 5) @ w).reshape(25)  # reads the loop's value: after it
    b = np.pad(y, (0, N - 25)) + a  # reads the product: a second loop
    return b * x


def test_an_equation_reading_a_later_value_does_not_join():
    got, source = _native(after_a_product, X, W)
    np.testing.assert_allclose(got, after_a_product(X, W), rtol=1e-12, atol=1e-15)
    # cos(x) for the product is computed before it; the loop reading the product (the
    # pad read in place) comes after it, in two stretches: the product's 25 elements,
    # then the padding, with no test per element; it computes cos again
    head, (tail,) = _loops(source, 25)[-1], _loops(source, N, start=25)
    product = re.search(r"= (v\d+)\[i\];", head)
    assert product and source.index(f", {product[1]});") < source.index(head)
    assert "?" not in head + tail and "cos(" in tail


def several(x):
    y = np.sin(x) * x
    return np.sum(y), np.max(y), np.min(x * 3.0), np.prod(1.0 + y / 10.0), np.sum(x)


def test_several_reductions_accumulate_in_one_loop():
    got, source = _native(several, X)
    for g, w in zip(got, several(X), strict=True):
        assert g == pytest.approx(w, rel=1e-12)
    assert len(_loops(source)) == 1
    assert _stores(source) == 0  # nothing is kept: only the reduced values are read


def reduced_and_kept(x):
    y = np.exp(x * 0.5)
    s = np.sum(y)
    return s, y @ y, y - 1.0  # y is read by a product after the loop


def test_a_reduced_value_read_after_the_loop_is_stored_once():
    (s, dot, z), source = _native(reduced_and_kept, X)
    want = reduced_and_kept(X)
    assert s == pytest.approx(want[0], rel=1e-12)
    assert dot == pytest.approx(want[1], rel=1e-12)
    np.testing.assert_allclose(z, want[2], rtol=1e-12, atol=1e-15)
    assert len(_loops(source)) == 1
    assert _stores(source) == 2  # y for the product, and the result y - 1


def softmax(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def centred(x):
    m = np.sum(x) / x.size
    d = x - m  # reads the sum: a loop of its own, after the first
    return d * d, np.sum(d * d)


def test_a_reduction_read_in_its_block_ends_a_loop():
    got, source = _native(softmax, X)
    np.testing.assert_allclose(got, softmax(X), rtol=1e-12, atol=1e-15)
    assert len(_loops(source)) == 3  # the max, then e and its sum, then the division
    (sq, total), source = _native(centred, X)
    np.testing.assert_allclose(sq, centred(X)[0], rtol=1e-12, atol=1e-15)
    assert total == pytest.approx(centred(X)[1], rel=1e-12)
    assert len(_loops(source)) == 2


def broadcasts(x, s):
    t = np.sum(x) * s  # a 0-d value defined before the second loop
    return x * s + s, np.maximum(x, t) * np.float64(2.0) + t


def test_broadcast_scalars_join_runs():
    (a, b), source = _native(broadcasts, X, 1.5)
    want = broadcasts(X, 1.5)
    np.testing.assert_allclose(a, want[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(b, want[1], rtol=1e-12, atol=1e-15)
    assert len(_loops(source)) == 2


def mixed(x, k):
    y = x.astype(np.float32) * np.float32(2.0)
    z = y.astype(np.float64) + k
    pos = x > 0.0
    return z, np.sum(k), np.max(k), np.min(k * 2), np.any(pos), np.all(pos), np.sum(y)


def test_mixed_dtypes_in_one_loop():
    k = RNG.integers(-50, 50, N).astype(np.int32)
    got, source = _native(mixed, X, k)
    want = mixed(X, k)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-7)
    for g, w in zip(got[1:6], want[1:6], strict=True):
        assert g == w
    assert got[6] == pytest.approx(want[6], rel=1e-6)
    assert len(_loops(source)) == 1


def extremes(x):
    y = x * 2.0
    return np.max(y), np.min(y), np.sum(y), np.max(x), np.min(x + 1.0)


# the long length is measured on the machine, so it is chosen in the test: collection must
# name the same tests in every xdist worker
@pytest.mark.parametrize("length", ["short", "threads"])
@pytest.mark.parametrize("where", ["first", "middle", "last", "all", "none"])
def test_max_and_min_in_a_run_keep_nan(length, where):
    n = 7 if length == "short" else parallel_min() * 2
    x = np.linspace(-3.0, 3.0, n)
    if where == "all":
        x[:] = np.nan
    elif where != "none":
        x[{"first": 0, "middle": n // 2, "last": n - 1}[where]] = np.nan
    got, source = _native(extremes, x)
    assert len(_loops(source, n)) == 1
    with np.errstate(invalid="ignore"):
        want = extremes(x)
    # NaN where NumPy has; the sums of n terms differ by rounding in another order (on
    # threads, in blocks): by far less than 1e-12 of the sum of their magnitudes
    spread = np.nansum(np.abs(2.0 * x)) * 1e-12
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=max(1e-9, spread))


def test_max_and_min_of_infinities():
    for x in (np.full(parallel_min() * 2, -np.inf), np.full(5, np.inf)):
        got, _ = _native(extremes, x)
        with np.errstate(invalid="ignore"):
            np.testing.assert_equal(got, extremes(x))


def f(x):
    return np.sum(np.tanh(x) * (1.0 / (1.0 + np.exp(-x))) + 0.5 * x * x)


def test_value_and_grad_is_one_loop_storing_only_the_gradient():
    x = np.linspace(-2.0, 2.0, N)
    (value, grad), source = _native(pb.value_and_grad(f), x)
    assert value == pytest.approx(f(x), rel=1e-12)
    t, s = np.tanh(x), 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(grad, (1 - t * t) * s + t * s * (1 - s) + x, rtol=1e-12)
    np.testing.assert_allclose(grad, _central_difference(f, x), atol=1e-6)
    assert len(_loops(source)) == 1
    assert _stores(source) == 1
    assert "pb_arena" not in source and "pb_alloc" not in source.split("pb_call")[0]


def log_sum(x):
    return np.log(np.sum(x / (1.0 + np.exp(-x))))


def test_cheap_forward_values_are_recomputed_in_the_backward_loop():
    x = np.linspace(0.5, 2.0, N)
    (value, grad), source = _native(pb.value_and_grad(log_sum), x)
    assert value == pytest.approx(log_sum(x), rel=1e-12)
    s = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(grad, (s + x * s * (1 - s)) / np.sum(x * s), rtol=1e-12)
    np.testing.assert_allclose(grad, _central_difference(log_sum, x), atol=1e-8)
    # the backward loop needs the sum, so it is a second loop; it computes the sigmoid
    # again instead of reading it back
    assert len(_loops(source)) == 2
    assert _stores(source) == 1
    assert source.count("expf(") + source.count("exp(") == 2


def two_readers(x, y):
    e = np.exp(x)  # read by a slice and by a loop computing a product's operand
    return np.sum(e[::2]), np.cos(e) @ y


def test_a_value_read_by_two_loops_is_computed_in_each():
    y = RNG.standard_normal(N)
    got, source = _native(two_readers, X, y)
    for g, w in zip(got, two_readers(X, y), strict=True):
        assert g == pytest.approx(w, rel=1e-12)
    assert _stores(source) == 1  # cos(e) for the product; e itself nowhere
    assert source.count("exp(") == 2


def expensive(x):
    y = np.exp(np.sin(np.exp(np.cos(np.log1p(np.sin(np.exp(np.cos(x))))))))
    y = np.tanh(np.arctan(np.sinh(np.cos(y)))) + x
    return np.sum(y) * y  # the product needs the sum: y is stored, not recomputed


def test_an_expensive_value_is_stored_not_recomputed():
    x = np.linspace(0.5, 2.0, N)
    got, source = _native(expensive, x)
    np.testing.assert_allclose(got, expensive(x), rtol=1e-12, atol=1e-15)
    assert len(_loops(source)) == 2
    assert _stores(source) == 2
    assert source.count("tanh(") == 1


def in_a_loop(x, n):
    for _ in range(n):
        a = np.tanh(x)
        s = np.sum(a)
        x = x - a * s / N + np.exp(-a)  # a dies here, recomputed or not
    return x


def test_fused_loops_inside_a_loop_body():
    got, _ = _native(in_a_loop, X, 4)
    np.testing.assert_allclose(got, in_a_loop(X, 4), rtol=1e-12)


def layer(w1, w2, x):
    h = np.tanh(x @ w1)
    return np.sum((h @ w2) ** 2)


def test_a_value_stored_for_a_product_is_read_not_recomputed():
    rng = np.random.default_rng(5)
    w1, w2, x = rng.standard_normal((8, 16)), rng.standard_normal((16, 4)), \
        rng.standard_normal((32, 8))
    got, source = _native(pb.grad(layer), w1, w2, x)
    h = np.tanh(x @ w1)
    dh = 2 * (h @ w2) @ w2.T
    np.testing.assert_allclose(got, x.T @ (dh * (1 - h * h)), rtol=1e-12)
    # h has a buffer for the products: the backward reads it instead of computing tanh
    assert source.count("tanh(") == 1


def shift_steps(x, n):
    """An RK-like update whose stages read the state shifted by one element."""
    y = np.zeros_like(x)
    for _ in range(n):
        k1 = x * np.concatenate((np.ones(1), y[:-1]))
        y1 = y + 0.5 * k1
        k2 = x * np.concatenate((np.ones(1), y1[:-1]))  # y1 dies here
        y = y + 0.25 * (k1 + k2)
    return y


def test_a_shifted_concatenation_is_read_in_place_and_not_written_over():
    got, source = _native(shift_steps, X, 3)
    np.testing.assert_allclose(got, shift_steps(X, 3), rtol=1e-13)
    # no loop of its own (a copy of N - 1 elements) and no buffer for it: each stage
    # reads the state's elements from their neighbours' positions
    assert _loops(source, N - 1) == []
    # the second stage reads the first at a shifted index, computing it there
    # (plan/fusion.SHIFTED_MAX): the step is one loop, in stretches from the first
    # elements (the concatenations' ones) to the rest, with no test per element
    stages = _loops(source, N, start=2)
    assert len(stages) == 1 and len(_loops(source, N, start=1)) == 0
    assert not any("?" in text for text in _loops(source, 1) + stages)
    # the step writing its result over a buffer that dies there never takes one it
    # reads shifted
    for text in stages:
        shifted = set(re.findall(r"(v\d+)\[i - 1\]", text))
        written = set(re.findall(r"(v\d+)\[i\] = ", text))
        assert not shifted & written


def neighbours(x, w):
    y = np.exp(x)
    left = np.concatenate((np.zeros((1, w.shape[1])), (y @ w)[:-1]))
    right = np.concatenate(((y @ w)[1:], np.zeros((1, w.shape[1]))))
    return np.sum(np.tanh(left - 2.0 * (y @ w) + right) ** 2)


def test_shifted_rows_and_their_gradient():
    x = RNG.standard_normal((N, 5)) * 0.3
    got, source = _native(neighbours, x, W)
    assert got == pytest.approx(neighbours(x, W), rel=1e-12)
    g, gsource = _native(pb.grad(neighbours), x, W)
    # no loop copies N - 1 rows: the forward's concatenations (of zeros and a slice)
    # and the backward's pads of the slices' cotangents are read where used, as the
    # same element of a block of whole rows further on
    for text in (source, gsource):
        assert f"< {N - 1};" not in text and "% 5" not in text
        assert " ? " not in text.split("static PyObject *pb_printer")[0]  # in stretches
    step = 1e-6
    for k in [(0, 0), (3, 2), (N - 1, 4), (N // 2, 1)]:
        e = np.zeros_like(x)
        e[k] = step
        fd = (neighbours(x + e, W) - neighbours(x - e, W)) / (2 * step)
        assert g[k] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_a_concatenation_read_by_a_product_keeps_its_buffer():
    def f(a, b, w):
        return np.sum(np.concatenate((a, b)) @ w)

    a, b = RNG.standard_normal((3, 5)), RNG.standard_normal((4, 5))
    got, source = _native(f, a, b, W)
    assert got == pytest.approx(f(a, b, W), rel=1e-12)
