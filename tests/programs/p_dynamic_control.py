"""Control flow that depends on array data: branches, conditional expressions, loops
with data-dependent trip counts, early exits and iterative solvers with tolerances."""

from __future__ import annotations

import numpy as np

from programs.registry import program


@program(lambda rng: (np.float64(rng.uniform(-3, -1.5)),),
         lambda rng: (np.float32(rng.uniform(-0.8, 0.8)),),
         lambda rng: (np.float64(rng.uniform(1.5, 3)),),
         differentiable=(0,))
def smooth_piecewise(x):
    """A C1 Huber-shaped curve, damped: one formula per region of the real line."""
    if x < -1.0:
        y = -x - 0.5
    elif x <= 1.0:
        y = 0.5 * x * x
    else:
        y = x - 0.5
    return y * np.exp(-0.1 * x)


@program(lambda rng: (rng.standard_normal(6) + 2,),
         lambda rng: (rng.standard_normal((2, 3), dtype=np.float32) - 2,),
         differentiable=(0,))
def branch_on_sum(x):
    if x.sum() > 0:
        y = x * 2 - 1
    else:
        y = np.exp(x)
    return y / y.max() if y.max() > 1 else y


@program(lambda rng: (rng.uniform(0.1, 100, 6), 1e-12),
         lambda rng: (rng.uniform(0.5, 4, (2, 2)).astype(np.float32), 1e-5),
         )
def newton_sqrt(a, tol):
    """Vectorised Newton for sqrt(a) until the relative residual is below ``tol``."""
    x = 0.5 * (a + 1)
    iters = 0
    while np.max(np.abs(x * x - a)) > tol * np.max(a):
        x = 0.5 * (x + a / x)
        iters += 1
    return x, iters


@program(lambda rng: (np.float64(rng.uniform(0.5, 3)), np.float64(rng.uniform(-5, 5)), 1e-13),
         lambda rng: (np.float32(1.5), np.float32(-2.0), 1e-5),
         differentiable=(0, 1))
def newton_cubic_root(p, q, tol):
    """The real root of x^3 + p x + q (p > 0), Newton with an iteration cap and a break."""
    x = -q / (p + 1)
    for _ in range(60):
        f = x**3 + p * x + q
        if abs(f) < tol:
            break
        x = x - f / (3 * x * x + p)
    return x


@program(lambda rng: (np.float64(rng.uniform(-20, 20)), 1e-10),
         lambda rng: (np.float32(rng.uniform(1, 5)), 1e-4))
def bisection_root(c, tol):
    """Solve x^3 + x = c on a bracket that surely holds the root."""
    lo, hi = -abs(c) - 1, abs(c) + 1
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if mid**3 + mid - c > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


@program(lambda rng: (rng.uniform(-0.9, 0.9, 5), 1e-12),
         lambda rng: (rng.uniform(0.1, 0.6, 3), 1e-8),
         differentiable=(0,))
def fixed_point_cosine(a, tol):
    """x = a cos(x) by plain iteration; |a| < 1 makes it a contraction."""
    x = np.zeros_like(a)
    gap = np.inf
    while gap > tol:
        nxt = a * np.cos(x)
        gap = np.max(np.abs(nxt - x))
        x = nxt
    return x


@program(lambda rng: (rng.standard_normal((4, 4)) + 8 * np.eye(4), rng.standard_normal(4), 1e-10),
         lambda rng: ((rng.standard_normal((3, 3)) + 5 * np.eye(3)).astype(np.float32),
                      rng.standard_normal(3, dtype=np.float32), 1e-4),
         differentiable=(0, 1))
def jacobi_solve(a, b, tol):
    """Jacobi iteration for a diagonally dominant system, until the residual is small."""
    d = np.diagonal(a)
    off = a - np.diag(d)
    x = np.zeros_like(b)
    while np.linalg.norm(a @ x - b) > tol:
        x = (b - off @ x) / d
    return x


def _forced_decay(t, y, k):
    return -k * y + np.sin(3 * t)


@program(lambda rng: (rng.standard_normal(3), 2.0, 3.0, 1e-3),
         lambda rng: (rng.standard_normal(2), 0.5, 1.0, 1e-4))
def adaptive_heun(y0, k, t_end, tol):
    """Euler/Heun embedded pair with step-size control; the step count depends on data."""
    t, h, y = np.float64(0.0), np.float64(0.1), y0
    steps = 0
    while t < t_end:
        h = min(h, t_end - t)
        f0 = _forced_decay(t, y, k)
        euler = y + h * f0
        heun = y + 0.5 * h * (f0 + _forced_decay(t + h, euler, k))
        err = np.max(np.abs(heun - euler))
        if err <= tol:
            t, y = t + h, heun
            steps += 1
        h = h * np.clip(0.9 * np.sqrt(tol / (err + 1e-14)), 0.2, 2.0)
    return y, steps


@program(lambda rng: (rng.uniform(0, 1, 12), 2.5),
         lambda rng: (rng.uniform(0, 1, 5), 100.0),
         )
def first_crossing(x, threshold):
    """The first index where the running sum passes ``threshold`` (early return), else -1."""
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
        if s > threshold:
            return i, s
    return -1, s


@program(lambda rng: (rng.standard_normal(15) * 2, 2.5),
         lambda rng: (rng.standard_normal(8, dtype=np.float32), 10.0),
         )
def sum_positive_until_large(x, limit):
    """Skip negatives with continue, stop at the first value above ``limit`` with break."""
    total = np.zeros((), dtype=x.dtype)
    count = 0
    for v in x:
        if v < 0:
            continue
        if v > limit:
            break
        total += v
        count += 1
    return total, count


@program(lambda rng: (rng.standard_normal(4), 1000.0),
         lambda rng: (rng.uniform(1, 2, 3).astype(np.float32), 3.0))
def doublings_to_exceed(x, target):
    s = np.abs(x).sum()
    k = 0
    while s < target:
        s = s * 2
        k += 1
    return k, s


@program(lambda rng: (rng.standard_normal((6, 3)) * 2, 2.0),
         lambda rng: (rng.standard_normal((4, 2), dtype=np.float32), 1.0),
         differentiable=(0,))
def clip_rows_by_norm(x, max_norm):
    out = np.empty_like(x)
    for i, row in enumerate(x):
        r = np.linalg.norm(row)
        if r > max_norm:
            out[i] = row * (max_norm / r)
        else:
            out[i] = row
    return out


@program(lambda rng: (rng.standard_normal(8),),
         lambda rng: (np.sort(rng.standard_normal(6, dtype=np.float32))[::-1],),
         lambda rng: (np.arange(5.0),),
         differentiable=(0,))
def bubble_sort(x):
    """Nested loops with data-dependent swaps and an early exit once a pass is clean."""
    y = x.copy()
    n = y.shape[0]
    for i in range(n - 1):
        swapped = False
        for j in range(n - 1 - i):
            if y[j] > y[j + 1]:
                y[j], y[j + 1] = y[j + 1], y[j]
                swapped = True
        if not swapped:
            break
    return y


def _spd(rng, n, dtype):
    m = rng.standard_normal((n, n))
    return (m @ m.T + np.diag(np.arange(1.0, n + 1))).astype(dtype)


@program(lambda rng: (_spd(rng, 4, np.float64), 1e-10, 300),
         lambda rng: (_spd(rng, 3, np.float32), 1e-5, 100))
def power_iteration(a, tol, max_iter):
    """Dominant eigenpair; returns from inside the loop when the estimate settles."""
    n = a.shape[0]
    v = np.ones(n, dtype=a.dtype) / n**0.5
    lam = v @ a @ v
    for it in range(max_iter):
        w = a @ v
        v = w / np.linalg.norm(w)
        new = v @ a @ v
        if abs(new - lam) < tol * abs(new):
            return new, v, it + 1
        lam = new
    return lam, v, max_iter


@program(lambda rng: (np.float64(rng.uniform(0.5, 2)), np.float64(rng.uniform(0.5, 2)), 1e-7),
         lambda rng: (np.float64(3.0), np.float64(0.2), 1e-6))
def golden_section_minimum(a, b, tol):
    """Minimise a e^x + b e^-x on [-10, 10]; the answer is log(b / a) / 2.

    Brackets narrower than about 1e-8 compare values equal but for rounding, so which
    way the search goes would depend on exp's last bit (NumPy's vector exp on AVX-512 is
    not libm's): the tolerances stop before that."""
    inv_phi = (np.sqrt(5.0) - 1) / 2
    lo, hi = np.float64(-10.0), np.float64(10.0)
    c, d = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
    while hi - lo > tol:
        if a * np.exp(c) + b * np.exp(-c) < a * np.exp(d) + b * np.exp(-d):
            hi, d = d, c
            c = hi - inv_phi * (hi - lo)
        else:
            lo, c = c, d
            d = lo + inv_phi * (hi - lo)
    return (lo + hi) / 2, 0.5 * np.log(b / a)


def _objective(w, a, b):
    return 0.5 * w @ a @ w - b @ w + 0.25 * np.sum(w**4)


def _gradient(w, a, b):
    return a @ w - b + w**3


@program(lambda rng: (_spd(rng, 3, np.float64), rng.standard_normal(3), 1e-8),
         lambda rng: (_spd(rng, 2, np.float32), rng.standard_normal(2, dtype=np.float32), 1e-3))
def backtracking_descent(a, b, tol):
    """Gradient descent with an Armijo backtracking line search: two nested while loops."""
    w = np.zeros_like(b)
    g = _gradient(w, a, b)
    it = 0
    while np.linalg.norm(g) > tol and it < 500:
        t = 1.0
        fw = _objective(w, a, b)
        while _objective(w - t * g, a, b) > fw - 0.5 * t * (g @ g):
            t *= 0.5
        w = w - t * g
        g = _gradient(w, a, b)
        it += 1
    return w, it


@program(lambda rng: (rng.uniform(0.5, 2, 5),),
         lambda rng: (rng.standard_normal(6) + 0.5,),
         lambda rng: (-rng.uniform(0.5, 2, (2, 2)).astype(np.float32),),
         differentiable=(0,))
def log_by_sign_pattern(x):
    if np.all(x > 0):
        return np.log(x).sum()
    elif np.any(x > 0):
        return np.log1p(np.maximum(x, 0)).sum() / x.size
    else:
        return -np.exp(x).sum()


@program(lambda rng: (np.float64(rng.uniform(0.5, 5)), 1e-12),
         lambda rng: (np.float64(20.0), 1e-9),
         differentiable=(0,))
def lambert_w_secant(y, tol):
    """Solve x e^x = y for x >= 0 with the secant method."""
    x0, x1 = 0.5 * np.log1p(y), np.log1p(y)
    f0, f1 = x0 * np.exp(x0) - y, x1 * np.exp(x1) - y
    while abs(x1 - x0) > tol:
        x0, x1 = x1, x1 - f1 * (x1 - x0) / (f1 - f0)
        f0, f1 = f1, x1 * np.exp(x1) - y
    return x1


@program(lambda rng: (np.float32(2.0), 1e-4),
         lambda rng: (np.float64(3.0), 1e-7))
def zeta_partial_sum(p, tol):
    """Sum k^-p until the next term drops below ``tol``, in the dtype of ``p``."""
    s = np.zeros_like(p)
    k = np.ones_like(p)
    term = np.ones_like(p)
    while term > tol:
        s += term
        k += 1
        term = k**-p
    return s, k


@program(lambda rng: (rng.uniform(0, 3, 7),),
         lambda rng: (rng.uniform(0.1, 1, (2, 3)).astype(np.float32),),
         differentiable=(0,))
def log_barrier(x):
    if np.any(x < 0):
        raise ValueError("log_barrier needs non-negative input")
    return -np.log(x + 1e-3).sum()


@program(lambda rng: (np.concatenate([rng.normal(-3, 0.5, 10), rng.normal(2, 0.5, 10)]),
                      np.array([-1.0, 1.0]), 50),
         lambda rng: (np.concatenate([rng.normal(0, 0.3, 6), rng.normal(5, 0.3, 6),
                                      rng.normal(10, 0.3, 6)]),
                      np.array([1.0, 4.0, 8.0]), 20))
def kmeans_1d(x, centers, max_iter):
    """Lloyd's algorithm in one dimension, stopping once the centres stop moving."""
    for _ in range(max_iter):
        assign = np.argmin(np.abs(x[:, None] - centers[None, :]), axis=1)
        new = np.empty_like(centers)
        for j in range(centers.shape[0]):
            members = assign == j
            count = members.sum()
            new[j] = np.where(members, x, 0).sum() / count if count > 0 else centers[j]
        if np.max(np.abs(new - centers)) < 1e-12:
            break
        centers = new
    return centers, assign


@program(lambda rng: (rng.standard_normal(9),),
         lambda rng: (rng.integers(-20, 20, 7, dtype=np.int32),))
def running_argmax(x):
    """Argmax by a loop over the array: the best value and its index are carried."""
    best, idx = x[0], 0
    for i, v in enumerate(x):
        if v > best:
            best, idx = v, i
    return best, idx
