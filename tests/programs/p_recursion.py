"""Recursive programs: recursion on static shapes and ints, recursion whose depth depends
on data or on a tolerance, mutual recursion and recursive closures."""

from __future__ import annotations

import numpy as np

from programs.registry import program


def _bisect(c, lo, hi, tol):
    mid = 0.5 * (lo + hi)
    if hi - lo < tol:
        return mid
    if mid**3 + mid - c > 0:
        return _bisect(c, lo, mid, tol)
    return _bisect(c, mid, hi, tol)


@program(lambda rng: (np.float64(rng.uniform(-20, 20)), 1e-10),
         lambda rng: (np.float32(rng.uniform(1, 5)), 1e-3))
def recursive_bisection(c, tol):
    """Root of x^3 + x = c; the recursion depth is log2(bracket / tol)."""
    return _bisect(c, -abs(c) - 1, abs(c) + 1, tol)


def _dynamic_power(x, n):
    if n == 0:
        return np.ones_like(x)
    half = _dynamic_power(x, n // 2)
    return half * half * x if n % 2 == 1 else half * half


@program(lambda rng: (rng.uniform(0.5, 1.2, 5), np.int64(rng.integers(0, 20))),
         lambda rng: (rng.uniform(-1, 1, (2, 2)).astype(np.float32), np.int64(7)),
         lambda rng: (rng.standard_normal(3), np.int32(0)),
         differentiable=(0,))
def power_with_dynamic_exponent(x, n):
    """Squaring recursion on a NumPy int: its depth is log2(n), known only at run time."""
    return _dynamic_power(x, n)


def _horner(c, x):
    if c.shape[0] == 1:
        return c[0] * np.ones_like(x)
    return c[0] + x * _horner(c[1:], x)


@program(lambda rng: (rng.standard_normal(6), rng.uniform(-1, 1, 4)),
         lambda rng: (rng.standard_normal(3, dtype=np.float32),
                      rng.uniform(-1, 1, (2, 2)).astype(np.float32)),
         differentiable=(0, 1))
def recursive_horner(c, x):
    """Ascending coefficients, one recursion level per coefficient (static depth)."""
    return _horner(c, x)


def _search(a, v, lo, hi):
    if lo >= hi:
        return lo
    mid = (lo + hi) // 2
    if a[mid] < v:
        return _search(a, v, mid + 1, hi)
    return _search(a, v, lo, mid)


@program(lambda rng: (np.sort(rng.standard_normal(16)), rng.standard_normal(5) * 2),
         lambda rng: (np.sort(rng.integers(-50, 50, 9)), rng.integers(-60, 60, 4)))
def recursive_binary_search(a, queries):
    """Insertion points by recursive bisection: Python-int bounds under data branches."""
    found = []
    for v in queries:
        found.append(_search(a, v, 0, a.shape[0]))
    return np.array(found), np.searchsorted(a, queries)


def _tree_reduce(op, xs):
    if len(xs) == 1:
        return xs[0]
    mid = len(xs) // 2
    return op(_tree_reduce(op, xs[:mid]), _tree_reduce(op, xs[mid:]))


@program(lambda rng: ([rng.standard_normal(4) for _ in range(5)],),
         lambda rng: ([rng.standard_normal((2, 3), dtype=np.float32) for _ in range(8)],),
         differentiable=(0,))
def tree_reductions(xs):
    """Balanced pairwise reductions of a list of arrays with different combining ops."""
    return (_tree_reduce(np.add, xs), _tree_reduce(np.logaddexp, xs),
            _tree_reduce(lambda a, b: a * np.tanh(b), xs))


def _is_even(n):
    return True if n == 0 else _is_odd(n - 1)


def _is_odd(n):
    return False if n == 0 else _is_even(n - 1)


@program(lambda rng: (np.int64(rng.integers(0, 30)),),
         lambda rng: (np.int32(11),),
         lambda rng: (6,))
def parity_by_mutual_recursion(n):
    return _is_even(n), _is_odd(n + 3)


def _female(n):
    return n + 1 if n == 0 else n - _male(_female(n - 1))  # F(0) = 1, in n's type


def _male(n):
    return n if n == 0 else n - _female(_male(n - 1))  # M(0) = 0


@program(lambda rng: (np.int64(rng.integers(3, 9)),),
         lambda rng: (np.int32(0),))
def hofstadter_sequences(n):
    """Hofstadter's female and male sequences: mutual, nested, data-dependent recursion."""
    return _female(n), _male(n)


def _gcd(a, b):
    return a if b == 0 else _gcd(b, a % b)


@program(lambda rng: (np.int64(rng.integers(1, 1000)), np.int64(rng.integers(1, 1000))),
         lambda rng: (np.int32(1071), np.int32(462)),
         lambda rng: (84, -36))
def euclid_gcd(a, b):
    """gcd and lcm by Euclid's recursion, on NumPy ints (dynamic) or Python ints (static)."""
    g = _gcd(a, b)
    return g, a // g * b


def _simpson(f, a, b, fa, fm, fb, whole, tol):
    m = 0.5 * (a + b)
    lm, rm = 0.5 * (a + m), 0.5 * (m + b)
    flm, frm = f(lm), f(rm)
    left = (m - a) / 6 * (fa + 4 * flm + fm)
    right = (b - m) / 6 * (fm + 4 * frm + fb)
    if abs(left + right - whole) <= 15 * tol:
        return left + right + (left + right - whole) / 15
    return (_simpson(f, a, m, fa, flm, fm, left, tol / 2)
            + _simpson(f, m, b, fm, frm, fb, right, tol / 2))


@program(lambda rng: (np.float64(rng.uniform(0.5, 2)), np.float64(rng.uniform(1, 4)), 1e-8),
         lambda rng: (np.float64(4.0), np.float64(0.5), 1e-6))
def adaptive_simpson(a, b, tol):
    """Integrate e^(-a x^2) cos(b x) over [0, 2]; the subdivision depth follows the error."""
    def f(x):
        return np.exp(-a * x * x) * np.cos(b * x)

    lo, hi = 0.0, 2.0
    fa, fm, fb = f(lo), f(0.5 * (lo + hi)), f(hi)
    whole = (hi - lo) / 6 * (fa + 4 * fm + fb)
    return _simpson(f, lo, hi, fa, fm, fb, whole, tol)


def _merge_sort(x):
    n = x.shape[0]
    if n <= 1:
        return x
    left, right = _merge_sort(x[: n // 2]), _merge_sort(x[n // 2:])
    out = np.empty_like(x)
    i = j = 0
    for k in range(n):
        if j >= right.shape[0] or (i < left.shape[0] and left[i] <= right[j]):
            out[k] = left[i]
            i += 1
        else:
            out[k] = right[j]
            j += 1
    return out


@program(lambda rng: (rng.standard_normal(11),),
         lambda rng: (rng.standard_normal(6, dtype=np.float32),),
         lambda rng: (rng.integers(-9, 9, 8, dtype=np.int32),))
def merge_sort(x):
    """Recursive on static halves; the merge walks two dynamic cursors."""
    return _merge_sort(x)


def _laplace_det(a):
    n = a.shape[0]
    if n == 1:
        return a[0, 0]
    minors = [np.concatenate([a[1:, :j], a[1:, j + 1:]], axis=1) for j in range(n)]
    return sum([(-1) ** j * a[0, j] * _laplace_det(m) for j, m in enumerate(minors)])


@program(lambda rng: (rng.standard_normal((4, 4)),),
         lambda rng: (rng.standard_normal((3, 3), dtype=np.float32),),
         differentiable=(0,))
def laplace_determinant(a):
    return _laplace_det(a), np.linalg.det(a)


def _collatz_steps(n):
    return 0 if n == 1 else 1 + _collatz_steps(n // 2 if n % 2 == 0 else 3 * n + 1)


@program(lambda rng: (np.int64(rng.integers(1, 20)),),
         lambda rng: (np.int64(18),),
         lambda rng: (np.int32(1),))
def recursive_collatz(n):
    return _collatz_steps(n)


def _heron(a, x, tol):
    nxt = 0.5 * (x + a / x)
    return nxt if np.max(np.abs(nxt - x)) < tol else _heron(a, nxt, tol)


@program(lambda rng: (rng.uniform(0.1, 50, 4), 1e-12),
         lambda rng: (rng.uniform(1, 2, 3).astype(np.float32), 1e-4),
         differentiable=(0,))
def recursive_heron_sqrt(a, tol):
    """Heron's method as a tail recursion that stops once the update is below ``tol``."""
    return _heron(a, a, tol)


def _block_stats(a):
    rows, cols = a.shape
    if rows * cols <= 4:
        return a.sum(), a.max()
    if rows >= cols:
        halves = a[: rows // 2], a[rows // 2:]
    else:
        halves = a[:, : cols // 2], a[:, cols // 2:]
    (s0, m0), (s1, m1) = _block_stats(halves[0]), _block_stats(halves[1])
    return s0 + s1, np.maximum(m0, m1)


@program(lambda rng: (rng.standard_normal((6, 5)),),
         lambda rng: (rng.standard_normal((4, 8), dtype=np.float32),),
         differentiable=(0,))
def quadtree_block_stats(a):
    """Sum and max by recursively halving the longer side of a matrix."""
    return _block_stats(a)


@program(lambda rng: (rng.standard_normal(8), np.int64(2), np.int64(7)),
         lambda rng: (rng.standard_normal(13, dtype=np.float32), np.int64(0), np.int64(5)),
         lambda rng: (rng.standard_normal(6), np.int64(4), np.int64(5)))
def segment_tree_range_max(x, lo, hi):
    """max(x[lo:hi]) for dynamic bounds, by a recursive closure over static node ranges."""
    empty = x.dtype.type(-np.inf)  # the identity of max, a scalar like np.max returns

    def query(a, b):
        if hi <= a or b <= lo:
            return empty
        if lo <= a and b <= hi:
            return np.max(x[a:b])
        mid = (a + b) // 2
        return np.maximum(query(a, mid), query(mid, b))

    return query(0, x.shape[0])


def _lambert_tail(x2, k, depth):
    if depth == 0:
        return 2 * k + 1
    return (2 * k + 1) - x2 / _lambert_tail(x2, k + 1, depth - 1)


@program(lambda rng: (rng.uniform(-1.2, 1.2, 6), 8),
         lambda rng: (rng.uniform(-0.5, 0.5, 3).astype(np.float32), 4),
         differentiable=(0,))
def continued_fraction_tan(x, depth):
    """Lambert's continued fraction for tan, evaluated to a static depth."""
    return x / _lambert_tail(x * x, 0, depth), np.tan(x)


def _exp_by_squaring(x):
    if np.max(np.abs(x)) < 0.01:
        return 1 + x + x * x / 2 + x**3 / 6 + x**4 / 24
    half = _exp_by_squaring(x / 2)
    return half * half


@program(lambda rng: (rng.standard_normal(5) * 3,),
         lambda rng: (rng.standard_normal((2, 2), dtype=np.float32),),
         differentiable=(0,))
def scaling_and_squaring_exp(x):
    """exp(x) = exp(x/2)^2 until |x| is tiny, then Taylor: depth grows with max |x|."""
    return _exp_by_squaring(x)
