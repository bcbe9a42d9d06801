"""pb.grad through plain Python: data-dependent while loops, recursion, mutation.

Each function is ordinary Python + NumPy.  pullback stages its source into IR,
differentiates the IR (reverse mode pushes what the backward pass needs onto a run-time
stack, so loops whose trip count depends on the data are fine; ``pb.grad`` with respect
to a few scalars runs forward mode instead, which needs no stack, and ``pb.jacrev``
asks for reverse mode), and the script checks every derivative against central finite
differences of the plain Python function.
"""

from __future__ import annotations

import numpy as np

import pullback as pb


def sqrt_newton(a: float, tol: float) -> float:
    """sqrt(a) by Newton's method: the number of steps depends on a."""
    x = a
    while abs(x * x - a) > tol:
        x = 0.5 * (x + a / x)
    return x


def decay_until(y0: np.ndarray, k: np.ndarray, t_end: float) -> float:
    """Adaptive Euler steps of dy/dt = -k*y*|y|: the step halves while the error estimate
    is too large and grows after easy steps, so the step count depends on y0 and k."""
    y, t, h = y0, 0.0, 0.1
    while t < t_end:
        h = min(h, t_end - t)
        full = y - h * k * y * np.abs(y)
        half = y - 0.5 * h * k * y * np.abs(y)
        half = half - 0.5 * h * k * half * np.abs(half)
        if np.max(np.abs(full - half)) > 1e-4:
            h = 0.5 * h
            continue
        y, t = half, t + h
        h = 1.5 * h
    return np.sum(y * y)


def power_sum(x: float, depth: int) -> float:
    """x + x^2/2 + ... by recursion on a run-time condition."""
    if abs(x) ** depth < 1e-12 or depth > 60:
        return 0.0 * x
    return x ** depth / depth + power_sum(x, depth + 1)


def smooth_in_place(u: np.ndarray, alpha: float) -> float:
    """A loop that writes into a preallocated buffer."""
    out = np.zeros_like(u)
    out[0] = u[0]
    for i in range(1, u.shape[0]):
        out[i] = alpha * out[i - 1] + (1 - alpha) * u[i]
    return np.sum(out ** 2)


def central(f, args: tuple, k: int, eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``f`` with respect to argument ``k``."""
    x = np.asarray(args[k], dtype=float)
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        up = list(args)
        down = list(args)
        up[k] = x + e if x.ndim else float(x + e)
        down[k] = x - e if x.ndim else float(x - e)
        g.flat[i] = (f(*up) - f(*down)) / (2 * eps)
    return g


def main() -> None:
    rng = np.random.default_rng(0)
    print(pb.make_ir(pb.jacrev(sqrt_newton))(2.0, 1e-12))
    cases = [
        (sqrt_newton, (2.0, 1e-12), 0),
        (decay_until, (rng.uniform(0.5, 1.5, 4), rng.uniform(0.5, 2.0, 4), 2.0), 0),
        (decay_until, (rng.uniform(0.5, 1.5, 4), rng.uniform(0.5, 2.0, 4), 2.0), 1),
        (power_sum, (0.5, 1), 0),
        (smooth_in_place, (rng.standard_normal(6), 0.7), 0),
        (smooth_in_place, (rng.standard_normal(6), 0.7), 1),
    ]
    for fn, args, k in cases:
        got = np.asarray(pb.jit(pb.grad(fn, argnums=k))(*args))
        want = central(fn, args, k)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
        print(f"grad of {fn.__name__} w.r.t. argument {k}: {np.round(got, 6)} "
              "(central differences agree)")
    h = pb.hessian(sqrt_newton)(2.0, 1e-12)
    print(f"d2/da2 sqrt(a) at 2 through the while loop: {h:.9f} "
          f"(exact {-0.25 * 2.0 ** -1.5:.9f})")
    print("every derivative matches central differences")


if __name__ == "__main__":
    main()
