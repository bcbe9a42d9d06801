"""Control flow decided while staging: loops over static ranges, shapes and containers,
branches on static flags, strings, shapes and types, and recursion on Python ints."""

from __future__ import annotations

import numpy as np

from programs.registry import program


@program(lambda rng: (rng.uniform(-1, 1, 8), (0.5, -1.0, 2.0, 0.25)),
         lambda rng: (rng.uniform(-1, 1, (2, 3)).astype(np.float32), (1.0, 3.0)),
         differentiable=(0, 1))
def polynomial_from_tuple(x, coeffs):
    """Horner's rule unrolled over a tuple of dynamic coefficients, highest degree first."""
    acc = np.zeros_like(x)
    for c in reversed(coeffs):
        acc = acc * x + c
    return acc


def _power(x, n):
    """x**n by repeated squaring; the recursion is on the Python int n."""
    if n == 0:
        return np.ones_like(x)
    if n % 2 == 0:
        half = _power(x, n // 2)
        return half * half
    return x * _power(x, n - 1)


@program(lambda rng: (rng.uniform(0.5, 1.5, 6), 13),
         lambda rng: (rng.uniform(-1, 1, (2, 2)).astype(np.float32), 8),
         lambda rng: (rng.standard_normal(3), 0),
         differentiable=(0,))
def power_by_squaring(x, n):
    return _power(x, n)


@program(lambda rng: (rng.standard_normal(7), "relu"),
         lambda rng: (rng.standard_normal((2, 4), dtype=np.float32), "gelu"),
         lambda rng: (rng.standard_normal(5), "softsign"),
         differentiable=(0,))
def activation_by_name(x, kind):
    if kind == "relu":
        return np.maximum(x, 0)
    elif kind == "gelu":
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))
    elif kind in ("tanh", "softsign"):
        return np.tanh(x) if kind == "tanh" else x / (1 + np.abs(x))
    raise ValueError(f"unknown activation {kind!r}")


@program(lambda rng: (rng.standard_normal((5, 3)),
                      [(rng.standard_normal((m, n)) / m, np.full(n, 0.1))
                       for m, n in ((3, 8), (8, 8), (8, 2))]),
         lambda rng: (rng.standard_normal((2, 4), dtype=np.float32),
                      [(rng.standard_normal((m, n), dtype=np.float32) / m,
                        rng.standard_normal(n, dtype=np.float32))
                       for m, n in ((4, 6), (6, 1))]),
         differentiable=(0, 1))
def mlp_over_layer_list(x, layers):
    """Hidden layers get tanh, the last one stays linear: the branch is on the loop index."""
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            x = np.tanh(x)
    return x


@program(lambda rng: (rng.standard_normal(10), 0.3),
         lambda rng: (rng.standard_normal((6, 2), dtype=np.float32), 0.8),
         differentiable=(0, 1))
def exponential_moving_average(x, alpha):
    ema = x[0]
    history = [ema]
    for i in range(1, x.shape[0]):
        ema = alpha * x[i] + (1 - alpha) * ema
        history.append(ema)
    return np.stack(history)


@program(lambda rng: ([rng.standard_normal(4) for _ in range(3)], [0.2, 0.5, 0.3]),
         lambda rng: ([rng.standard_normal((2, 2), dtype=np.float32) for _ in range(2)],
                      [np.float32(1.5), np.float32(-0.5)]),
         differentiable=(0, 1))
def weighted_sum_of_list(arrays, weights):
    terms = [w * a for w, a in zip(weights, arrays, strict=True)]
    return sum(terms), max(len(arrays), 2)


@program(lambda rng: (rng.standard_normal(12),),
         lambda rng: (rng.standard_normal((6, 4)),),
         lambda rng: (rng.standard_normal((3, 8), dtype=np.float32),),
         differentiable=(0,))
def pool_by_shape(x):
    """Pick the pooling from the static shape: 1-D, tall or wide."""
    if x.ndim == 1:
        return x.reshape(-1, 2).mean(axis=1)
    elif x.shape[0] >= x.shape[1]:
        return x.reshape(x.shape[0] // 2, 2, x.shape[1]).max(axis=1)
    else:
        rows, cols = x.shape
        return x.reshape(rows, cols // 2, 2).sum(axis=-1)


@program(lambda rng: (rng.standard_normal((4, 3)) * 2 + 1, True, True),
         lambda rng: (rng.standard_normal((4, 3)) * 2 + 1, True, False),
         lambda rng: (rng.standard_normal((5, 2), dtype=np.float32), False, True),
         differentiable=(0,))
def normalize_with_flags(x, center, scale):
    if center:
        x = x - x.mean(axis=0)
    if scale and not center:
        x = x / np.sqrt((x * x).mean(axis=0))
    elif scale:
        x = x / x.std(axis=0)
    return x


@program(lambda rng: (rng.standard_normal(20), 4),
         lambda rng: (rng.standard_normal(9, dtype=np.float32), 2),
         differentiable=(0,))
def moments_dict(x, order):
    """Central moments keyed by f-strings, from a dict comprehension."""
    centred = x - x.mean()
    return {f"m{k}": (centred**k).mean() for k in range(2, order + 1)}


@program(lambda rng: (np.triu(rng.standard_normal((5, 5))) + 4 * np.eye(5),
                      rng.standard_normal(5)),
         lambda rng: ((np.triu(rng.standard_normal((3, 3))) + 3 * np.eye(3)).astype(np.float32),
                      rng.standard_normal(3, dtype=np.float32)),
         differentiable=(0, 1))
def back_substitution(u, b):
    """Solve U x = b for upper-triangular U, walking the rows backwards."""
    n = b.shape[0]
    x = np.zeros_like(b)
    for i in reversed(range(n)):
        x[i] = (b[i] - u[i, i + 1:] @ x[i + 1:]) / u[i, i]
    return x


@program(lambda rng: (rng.uniform(-1, 1, 7), 5),
         lambda rng: (rng.uniform(-1, 1, 4).astype(np.float32), 3),
         differentiable=(0,))
def chebyshev_basis(x, degree):
    """T_0 .. T_degree by the three-term recurrence, stacked as columns."""
    basis = [np.ones_like(x), x]
    for _ in range(degree - 1):
        basis.append(2 * x * basis[-1] - basis[-2])
    return np.column_stack(basis[: degree + 1])


def _decay(t, y, k):
    return -k * y + np.sin(t)


@program(lambda rng: (rng.standard_normal(3), 0.7, 20),
         lambda rng: (rng.standard_normal(2, dtype=np.float32), 1.3, 8),
         differentiable=(0, 1))
def rk4_fixed_steps(y0, k, n_steps):
    """Classic Runge-Kutta on [0, 1] with a static number of steps."""
    h = 1.0 / n_steps
    y, t = y0, 0.0
    for _ in range(n_steps):
        k1 = _decay(t, y, k)
        k2 = _decay(t + h / 2, y + h / 2 * k1, k)
        k3 = _decay(t + h / 2, y + h / 2 * k2, k)
        k4 = _decay(t + h, y + h * k3, k)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += h
    return y


@program(lambda rng: (rng.standard_normal(5), None),
         lambda rng: (rng.standard_normal(5), 8),
         lambda rng: (rng.standard_normal(6, dtype=np.float32), "reflect"),
         differentiable=(0,))
def pad_by_type(x, spec):
    """``spec`` is None, a target length or a padding mode; isinstance picks the path."""
    if spec is None:
        return x
    if isinstance(spec, int):
        return np.concatenate([x, np.zeros(spec - x.shape[0], dtype=x.dtype)])
    assert isinstance(spec, str), "spec must be None, an int or a mode name"
    return np.pad(x, (1, 2), mode=spec)


@program(lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((4, 2))),
         lambda rng: (rng.standard_normal((2, 2), dtype=np.float32),
                      rng.standard_normal((2, 3), dtype=np.float32)),
         differentiable=(0, 1))
def matmul_by_loops(a, b):
    """The textbook triple loop, building nested lists of scalars."""
    rows, inner = a.shape
    cols = b.shape[1]
    out = [[sum([a[i, k] * b[k, j] for k in range(inner)]) for j in range(cols)]
           for i in range(rows)]
    return np.array(out)


_UNARY = {"sin": np.sin, "cos": np.cos, "square": np.square, "half": lambda v: v / 2}


@program(lambda rng: (rng.standard_normal(6), ("sin", "square", "half")),
         lambda rng: (rng.standard_normal((2, 3), dtype=np.float32), ("cos",)),
         static=("names",),
         differentiable=(0,))
def pipeline_of_named_ops(x, names):
    for name in names:
        x = _UNARY[name](x)
    return x


@program(lambda rng: (rng.standard_normal(12), 3),
         lambda rng: (rng.standard_normal((2, 9), dtype=np.float32), 4),
         differentiable=(0,))
def sliding_window_sum(x, width):
    n = x.shape[-1]
    acc = np.zeros_like(x[..., : n - width + 1])
    for k in range(width):
        acc += x[..., k: n - width + 1 + k]
    return acc / width


@program(lambda rng: ([rng.standard_normal() for _ in range(6)], 0.9),
         lambda rng: ([np.float32(v) for v in rng.standard_normal(4)], 0.5),
         differentiable=(0, 1))
def discounted_return(rewards, gamma):
    """Discounted returns for each step, accumulated backwards over a list."""
    returns = []
    running = 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        returns.append(running)
    return returns[::-1]


@program(lambda rng: (rng.standard_normal(16),),
         lambda rng: (rng.standard_normal((8, 3), dtype=np.float32),),
         differentiable=(0,))
def pairwise_halving(x):
    """Sum the first axis by halving it, a while loop on a static length."""
    n = x.shape[0]
    while n > 1:
        n //= 2
        x = x[:n] + x[n: 2 * n]
    return x[0]


@program(lambda rng: ([rng.standard_normal(2), rng.standard_normal(3), rng.standard_normal(4)],
                      3),
         lambda rng: ([rng.standard_normal(5, dtype=np.float32)], 2),
         differentiable=(0,))
def first_with_length(arrays, length):
    """Return from inside a loop as soon as a static shape matches; else a fallback."""
    for a in arrays:
        if a.shape[0] == length:
            return a * 2
    head, *rest = arrays
    return np.full(length, head.sum() + len(rest))


@program(lambda rng: (rng.standard_normal((2, 3, 4)),),
         lambda rng: (rng.standard_normal((3, 2), dtype=np.float32),),
         differentiable=(0,))
def unpack_shape(x):
    first, *middle, last = x.shape
    flat = x.reshape(first, -1)
    scale = 1.0 / (last + len(middle))
    return flat.sum(axis=1) * scale, (first, last, tuple(middle))


@program(lambda rng: (rng.standard_normal(5), 0.8),
         lambda rng: (rng.standard_normal(3, dtype=np.float32), 0.2),
         static=("alpha",),
         differentiable=(0,))
def static_float_branch(x, alpha):
    """``alpha`` is a static float: the branch and the printed message are decided early."""
    if alpha > 0.5:
        print(f"heavy smoothing, alpha={alpha}")
        return alpha * x.mean() + (1 - alpha) * x
    return x - alpha * np.roll(x, 1)
