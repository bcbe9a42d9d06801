"""pb.jit on plain Python + NumPy: data-dependent loops, early exit, recursion, mutation.

Each function below is ordinary Python.  ``pb.jit`` stages its source into IR (printed
for the first one), runs it, and the script checks every result against plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import pullback as pb


@dataclass
class Layer:
    w: np.ndarray
    b: np.ndarray


def mlp_newton(layers: list[Layer], x: np.ndarray, tol: float) -> tuple[np.ndarray, int]:
    """An MLP, then sqrt of its mean square by Newton's method until |step| < tol."""
    h = x
    for layer in layers[:-1]:
        h = np.tanh(h @ layer.w + layer.b)
    y = h @ layers[-1].w + layers[-1].b
    target = np.mean(y * y)
    r, steps = 1.0, 0
    while True:
        step = 0.5 * (r - target / r)
        r -= step
        steps += 1
        if abs(step) < tol:
            break
    return r, steps


def first_crossing(xs: np.ndarray, level: float) -> int:
    """Index of the first value above ``level`` (-1 if none): a return inside a loop."""
    for i, v in enumerate(xs):
        if v > level:
            return i
    return -1


def bisect(f_coef: np.ndarray, lo: float, hi: float, tol: float) -> float:
    """A root of a cubic by recursive bisection; the depth depends on the data."""
    mid = 0.5 * (lo + hi)
    if hi - lo < tol:
        return mid
    value = ((f_coef[0] * mid + f_coef[1]) * mid + f_coef[2]) * mid + f_coef[3]
    if value > 0:
        return bisect(f_coef, lo, mid, tol)
    return bisect(f_coef, mid, hi, tol)


def running_max_in_place(x: np.ndarray) -> None:
    """Mutates its argument, as NumPy code does: the caller's array changes."""
    for i in range(1, x.shape[0]):
        if x[i] < x[i - 1]:
            x[i] = x[i - 1]


def main() -> None:
    rng = np.random.default_rng(0)
    layers = [Layer(rng.standard_normal((3, 8)), rng.standard_normal(8)),
              Layer(rng.standard_normal((8, 1)), rng.standard_normal(1))]
    x = rng.standard_normal((16, 3))
    print(pb.make_ir(mlp_newton)(layers, x, 1e-12))

    checks = [
        ("mlp_newton", mlp_newton, (layers, x, 1e-12)),
        ("first_crossing", first_crossing, (rng.standard_normal(50), 1.5)),
        ("bisect", bisect, (np.array([1.0, 0.0, 1.0, -3.0]), -5.0, 5.0, 1e-10)),
    ]
    for name, fn, args in checks:
        got, want = pb.jit(fn)(*args), fn(*args)
        np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                                   rtol=1e-12)
        print(f"{name}: compiled {got} == Python {want}")

    a = rng.standard_normal(8)
    b = a.copy()
    pb.jit(running_max_in_place)(a)
    running_max_in_place(b)
    np.testing.assert_array_equal(a, b)
    print(f"running_max_in_place: argument updated to {np.round(a, 3)}")
    print("compiled and plain Python agree")


if __name__ == "__main__":
    main()
