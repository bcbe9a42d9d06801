"""Memory planning in the generated C keeps NumPy's answers: buffers freed after their
last read (reads inside loops and branches included), results written over operands
that die, carried arrays updated in place with no allocation per iteration, buffers
that are read again never overwritten, the pool of freed buffers shared by calls and
threads, and AD tapes that grow."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((6, 5))
W = RNG.standard_normal((5, 5)) / 3
#: Distinct operands, so that no two products below are one value after CSE.
XS = tuple(RNG.standard_normal((6, 5)) for _ in range(4))


def _native(fn, *args, **static):
    jitted = pb.jit(fn, backend="c", static_argnames=tuple(static))
    staged, _ = jitted.specialise(*args, **static)
    assert staged.runner is not None
    return jitted(*args, **static), staged.runner.source


def _loop_texts(source: str) -> list[str]:
    """The text of each C loop of a staged ``for`` / ``while`` (the outermost ones)."""
    lines = source.splitlines()
    loops, k = [], 0
    while k < len(lines):
        text = lines[k].strip()
        if text.startswith("for (;;)") or (text.startswith("for (") and "+= st" in text):
            depth, j = 0, k
            while True:
                depth += lines[j].count("{") - lines[j].count("}")
                j += 1
                if depth == 0:
                    break
            loops.append("\n".join(lines[k:j]))
            k = j
        else:
            k += 1
    return loops


def _allocations(text: str) -> int:
    return sum(text.count(f) for f in ("pb_alloc(", "pb_copy(", "memcpy("))


def _buffers(source: str) -> int:
    """Buffers the C code declares (in the call's arena or allocated)."""
    return len(re.findall(r"\*v\d+ = \(\w+ \*\)(?:\(pb_arena|pb_alloc)", source))


def axpb_for(x, a, b, n):
    for _ in range(n):
        x = x * a + b
    return x


def axpb_while(x, a, b):
    y = x @ W
    while np.max(y) < 50.0:
        y = y * a + b
    return y


def test_a_carried_array_updates_in_place_with_no_allocation_per_iteration():
    # a run-time trip count: a short loop of constant bounds runs counted, as element
    # loops do (loops/counted.py), and this looks for the program's loops
    got, source = _native(axpb_for, X, 0.5, 1.0, np.int64(7))
    np.testing.assert_allclose(got, axpb_for(X, 0.5, 1.0, 7), rtol=1e-14)
    got, source2 = _native(axpb_while, X, 1.25, 0.5)
    np.testing.assert_allclose(got, axpb_while(X, 1.25, 0.5), rtol=1e-14)
    loops = _loop_texts(source) + _loop_texts(source2)
    assert len(loops) == 2
    assert all(_allocations(text) == 0 and "pb_free" not in text for text in loops)
    # the while loop's operand dies at the loop: it moves in, no copy at all
    assert "pb_copy(" not in source2


def chains(x):
    a = np.tanh(x @ W)  # tanh over the product's buffer
    b = np.tanh(a @ W) * 2.0 + a.sum()
    return b - 1.0


def test_pointwise_results_reuse_dying_operands():
    got, source = _native(chains, X)
    np.testing.assert_allclose(got, chains(X), rtol=1e-13)
    # two products need two buffers; tanh and the chain after it need none
    assert _buffers(source) == 2


def products(x):
    a = x @ W
    b = a @ W
    c = b @ W
    d = c @ W
    return np.sin(d @ W)


def test_buffers_with_disjoint_lives_share_the_arena():
    got, source = _native(products, X)
    np.testing.assert_allclose(got, products(X), rtol=1e-13)
    (arena,) = re.findall(r"pb_arena = \(char \*\)pb_alloc\(ctx, (\d+)\)", source)
    # five products of 30 doubles (256 bytes each, 64-byte aligned), two alive at a time
    assert _buffers(source) == 5 and int(arena) == 2 * 256


def reread(x1, x2):
    a = x1 @ W
    y = a * 2.0  # one loop computes y and z: y takes a's buffer, stored after z reads a
    z = y + a
    s = y.T @ z  # y is read after z
    g = x2 @ W
    u = np.exp(g)  # u takes g's buffer
    v = u - 3.0  # v must not take u's: it is read below
    return np.sin(z), np.sin(y), s, u.T @ v


def test_a_buffer_read_later_is_not_overwritten():
    got, _ = _native(reread, XS[0], XS[1])
    for g, w in zip(got, reread(XS[0], XS[1]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def through_cond(x1, x2, x3, x4, p):
    a = x1 @ W
    b = a * 3.0
    if p > 0:
        b = b * 2.0 + 1.0  # b dies at the cond: the branch owns and updates it
    c = x2 @ W + 1.0
    if p > 1:
        c = np.tanh(c)
    else:
        c = c @ W
    d = x3 @ W
    e = d * 2.0 if p > 0 else d  # d is read after the cond: it must stay intact
    f = x4 @ W
    g = f * 2.0 if p > 0 else f + f  # f is two operands of the cond: no branch owns it
    return b, c, e, np.sin(d), g


@pytest.mark.parametrize("p", [0.0, 1.5, 2.5])
def test_operands_handed_to_cond_branches(p):
    got, _ = _native(through_cond, *XS, p)
    for g, w in zip(got, through_cond(*XS, p), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def through_loops(x1, x2, x3, x4, n):
    y = x1 @ W
    z = y  # the loop's operand is also read after it
    for _ in range(n):
        z = z * 0.5 + 1.0
    a = x2 @ W
    b = a  # the same array carried twice
    for _ in range(n):
        a = a * 2.0
        b = b + 1.0
    e = x2 @ W.T
    f = e
    for _ in range(n):
        f = f * 2.0 + e  # the body reads e, f's first value
    c = x3 @ W
    d = c + 1.0
    for _ in range(n):
        c, d = d, c * 2.0  # carries swap buffers
    m = x4 @ W
    acc = np.zeros_like(m)
    for i in range(n):
        acc = acc + m * i  # m passes through the loop untouched
    k = m.reshape(-1)  # a view of m
    h = np.cos(k)
    return z, np.sin(y), a, b, c, d, f, acc, h, k + 1.0


def test_carries_alias_only_when_safe():
    got, source = _native(through_loops, *XS, n=4)
    for g, w in zip(got, through_loops(*XS, 4), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    assert all(_allocations(text) == 0 for text in _loop_texts(source))


def late_reads(x1, x2, x3, x4, p, n):
    a = x1 @ W
    t = np.sin(a).sum()  # a's last straight-line read
    q = np.exp(x2 @ W)  # a buffer of a's size: it must not take a's
    acc = x1 * 0.0
    for _ in range(n):
        acc = acc + a  # ... because the loop body reads a later
    b = x3 @ W
    s = b.sum()
    r = np.cos(x4 @ W)  # likewise for b, which a branch reads
    if p > 0:
        out = acc * b
    else:
        out = acc - b
    return out + t + s, q, r


@pytest.mark.parametrize("p", [-1.0, 1.0])
def test_reads_inside_nested_blocks_keep_buffers_alive(p):
    got, _ = _native(late_reads, *XS, p, n=3)
    for g, w in zip(got, late_reads(*XS, p, 3), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def updates(x1, x2, i):
    a = x1 @ W
    a[i] = 5.0  # a dies at the update: written in place
    b = x2 @ W
    b[[5, 4, 3, 2, 1, 0]] = b  # b is also the update: it needs a copy
    return a, b


def test_updates_in_place_only_of_dying_operands():
    got, source = _native(updates, XS[0], XS[1], 2)
    for g, w in zip(got, updates(XS[0], XS[1], 2), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def big(x):
    return np.tanh(x @ W[:4, :4]) * 2.0 + x


#: Compiled element functions (``tanh`` here) are within 4 ulp of NumPy's: glibc's vector
#: math library's bound (docs/backend.md).
VECTOR_MATH_ULP = 4


def _within_documented_ulps(got: np.ndarray, x: np.ndarray) -> bool:
    """Whether ``got`` is ``big(x)`` within what the documented bounds allow: the vector
    ``tanh``'s ulps, a product whose four terms may be summed in another order (its error
    within 4 eps of the sum of the terms' magnitudes, passed on by tanh' <= 1), doubled,
    and the last addition's rounding.  ``tanh(...) * 2 + x`` cancels near zero, where a
    relative tolerance would be no bound at all."""
    want = big(x)
    eps = np.finfo(np.float64).eps
    tanh = np.tanh(x @ W[:4, :4])
    product = 4 * eps * (np.abs(x) @ np.abs(W[:4, :4]))
    bound = 2 * (VECTOR_MATH_ULP * np.spacing(np.abs(tanh)) + product) + \
        np.spacing(np.abs(want))
    return bool(np.all(np.abs(got - want) <= bound))


def test_calls_and_threads_share_the_pool():
    """Repeated calls reuse pooled buffers; concurrent calls take a pool each."""
    jitted = pb.jit(big, backend="c")
    inputs = [RNG.standard_normal((20000, 4)) for _ in range(6)]
    for x in inputs * 2:
        assert _within_documented_ulps(jitted(x), x)
    errors = []

    def worker(k):
        for r in range(20):
            j = (k + r) % len(inputs)
            if not _within_documented_ulps(jitted(inputs[j]), inputs[j]):
                errors.append((k, r))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def grow(x):
    s = np.sum(x)
    while s < 1000.0:
        x = x * 1.01
        s = np.sum(x)
    return s


def test_a_tape_grows_over_many_pushes():
    x = np.linspace(0.1, 1.0, 300)
    n = 0
    s = x.sum()
    while s < 1000.0:
        s *= 1.01
        n += 1
    assert n > 100  # hundreds of 2.4 kB pushes: the tape grows many times
    g = pb.jit(pb.grad(grow), backend="c")(x)
    np.testing.assert_allclose(g, np.full_like(x, 1.01 ** n), rtol=1e-12)
