"""Straight-line numerics: no control flow, just expressions over arrays and scalars
(elementwise maths, broadcasting, reductions, indexing, linear algebra)."""

from __future__ import annotations

import functools
import math

import numpy as np

from programs.registry import program


@program(lambda rng: (rng.standard_normal(7) * 4,),
         lambda rng: (rng.standard_normal((3, 5), dtype=np.float32) * 10,),
         differentiable=(0,))
def softplus(x):
    """log(1 + e^x) without overflow for large |x|."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


@program(lambda rng: (rng.standard_normal((4, 6)) * 30,),
         lambda rng: (rng.standard_normal((2, 3, 5), dtype=np.float32),),
         differentiable=(0,))
def logsumexp(x):
    m = np.max(x, axis=-1, keepdims=True)
    return np.squeeze(m, axis=-1) + np.log(np.sum(np.exp(x - m), axis=-1))


@program(lambda rng: (rng.standard_normal((5, 8)) * 3 + 1, 1e-5),
         lambda rng: (rng.standard_normal((4, 16), dtype=np.float32), 1e-3),
         differentiable=(0,))
def layer_norm(x, eps):
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


@program(lambda rng: (rng.standard_normal(4), rng.uniform(-2, 2, 9)),
         lambda rng: (rng.standard_normal(4, dtype=np.float32),
                      rng.uniform(-1, 1, (2, 3)).astype(np.float32)),
         differentiable=(0, 1))
def cubic_horner(c, x):
    return c[0] + x * (c[1] + x * (c[2] + x * c[3]))


@program(lambda rng: (rng.standard_normal((4, 4)), rng.standard_normal((4, 4)),
                      rng.standard_normal(4)),
         lambda rng: (rng.standard_normal((3, 3), dtype=np.float32),
                      rng.standard_normal((3, 3), dtype=np.float32),
                      rng.standard_normal(3, dtype=np.float32)),
         differentiable=(0, 1, 2))
def matrix_expression(a, b, v):
    """A quadratic form, a commutator norm and a trace in one expression."""
    sym = 0.5 * (a + a.T)
    comm = a @ b - b @ a
    return v @ sym @ v + np.sum(comm * comm) - np.trace(a.T @ b) / a.shape[0]


@program(lambda rng: (rng.standard_normal((6, 3)), rng.standard_normal((4, 3)), 1.5),
         lambda rng: (rng.standard_normal((5, 2), dtype=np.float32),
                      rng.standard_normal((5, 2), dtype=np.float32), 0.7),
         differentiable=(0, 1, 2))
def rbf_kernel(a, b, length):
    """Pairwise squared distances by broadcasting, then the Gaussian kernel."""
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * length**2))


@program(lambda rng: (rng.standard_normal((5, 4)) * 3, rng.integers(0, 4, 5)),
         lambda rng: (rng.standard_normal((8, 3), dtype=np.float32),
                      rng.integers(0, 3, 8, dtype=np.int32)),
         differentiable=(0,))
def softmax_cross_entropy(logits, labels):
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    picked = np.take_along_axis(logp, labels[:, None], axis=1)
    return -picked.mean()


@program(lambda rng: (rng.standard_normal(10) * 3, 1.0),
         lambda rng: (rng.standard_normal((3, 4), dtype=np.float32) * 2, 0.5),
         differentiable=(0,))
def huber(r, delta):
    a = np.abs(r)
    quadratic = np.clip(a, 0.0, delta)
    return np.sum(0.5 * quadratic**2 + delta * (a - quadratic))


@program(lambda rng: (rng.standard_normal(12), 0.9),
         lambda rng: (rng.standard_normal((3, 6), dtype=np.float32), 0.5),
         differentiable=(0,))
def running_statistics(x, decay):
    """Running mean, cumulative product of decays and discounted cumulative sum."""
    n = x.shape[-1]
    running_mean = np.cumsum(x, axis=-1) / np.arange(1, n + 1)
    weights = np.cumprod(np.full(n, decay))
    return running_mean, np.cumsum(x * weights, axis=-1) / weights


@program(lambda rng: (rng.standard_normal((20, 3)), rng.standard_normal(20), 0.1),
         lambda rng: (rng.standard_normal((12, 4), dtype=np.float32),
                      rng.standard_normal(12, dtype=np.float32), 1.0),
         differentiable=(0, 1, 2))
def ridge_regression(x, y, lam):
    gram = x.T @ x + lam * np.eye(x.shape[1], dtype=x.dtype)
    w = np.linalg.solve(gram, x.T @ y)
    residual = y - x @ w
    return w, np.linalg.norm(residual) ** 2 + lam * w @ w


@program(lambda rng: (rng.standard_normal((5, 3)), rng.standard_normal((4, 3))),
         lambda rng: (rng.standard_normal((3, 8), dtype=np.float32),
                      rng.standard_normal((3, 8), dtype=np.float32)),
         differentiable=(0, 1))
def cosine_similarity(a, b):
    an = a / np.linalg.norm(a, axis=1, keepdims=True)
    bn = b / np.sqrt(np.sum(b * b, axis=-1))[:, np.newaxis]
    return an @ bn.T


@program(lambda rng: (rng.standard_normal(9) * 3,),
         lambda rng: (rng.standard_normal((2, 5), dtype=np.float32) * 3,),
         differentiable=(0,))
def activations(x):
    """GELU (tanh form), SiLU and ELU side by side in one stacked array."""
    gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    silu = x / (1 + np.exp(-x))
    elu = np.where(x > 0, x, np.expm1(np.minimum(x, 0)))
    return np.stack([gelu, silu, elu])


@program(lambda rng: (rng.standard_normal(5), rng.standard_normal(5), 0.25),
         lambda rng: (rng.standard_normal((2, 3), dtype=np.float32),
                      rng.standard_normal((2, 3), dtype=np.float32), np.float32(0.6)),
         differentiable=(0, 1, 2))
def lerp_and_angle(a, b, t):
    """Linear interpolation plus interpolation of the angle between the two vectors."""
    lerp = a + t * (b - a)
    cos_angle = np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b))
    return lerp, (1 - t) * np.arccos(np.clip(cos_angle, -1.0, 1.0))


@program(lambda rng: (rng.standard_normal((6, 4)) * 2,),
         lambda rng: (rng.standard_normal((5, 5), dtype=np.float32),),
         differentiable=(0,))
def column_summary(x):
    return {
        "mean": x.mean(axis=0),
        "std": x.std(axis=0, ddof=1),
        "range": np.ptp(x, axis=1),
        "median": np.median(x, axis=0),
        "total": np.sum(x),
    }


@program(lambda rng: (rng.standard_normal((4, 4)),),
         lambda rng: (rng.standard_normal((3, 3), dtype=np.float32),),
         differentiable=(0,))
def log_det_spd(a):
    """log|A A^T + n I| two ways: through the Cholesky factor and through slogdet."""
    n = a.shape[0]
    spd = a @ a.T + n * np.identity(n, dtype=a.dtype)
    chol = np.linalg.cholesky(spd)
    sign, logdet = np.linalg.slogdet(spd)
    return 2 * np.log(np.diagonal(chol)).sum(), sign * logdet, np.linalg.inv(spd)[0]


@program(lambda rng: (np.sin(np.linspace(0, 3, 11)) + 0.1 * rng.standard_normal(11), 0.3),
         lambda rng: (rng.standard_normal((2, 8), dtype=np.float32), 0.5),
         differentiable=(0, 1))
def finite_differences(f, h):
    """Central first and second differences with slices, negative indices and ..."""
    first = (f[..., 2:] - f[..., :-2]) / (2 * h)
    second = (f[..., 2:] - 2 * f[..., 1:-1] + f[..., :-2]) / h**2
    edges = (f[..., -1] - f[..., 0]) / ((f.shape[-1] - 1) * h)
    return first, second, edges, f[..., 1::2] - f[..., :-1:2]


@program(lambda rng: (rng.standard_normal((10, 4)), rng.integers(0, 10, (3, 5))),
         lambda rng: (rng.standard_normal((6, 3), dtype=np.float32),
                      rng.integers(-6, 6, 7, dtype=np.int32)),
         differentiable=(0,))
def embedding_bag(table, ids):
    """Look rows up with an integer array (negative ids count from the end), then pool."""
    rows = table[ids]
    return rows.mean(axis=-2), table[ids[..., -1]] * 2


@program(lambda rng: (np.float64(rng.uniform(-3, 3)), rng.standard_normal((7, 2))),
         lambda rng: (np.float32(0.4), rng.standard_normal((3, 2), dtype=np.float32)),
         differentiable=(0, 1))
def rotate_points(theta, points):
    c, s = np.cos(theta), np.sin(theta)
    rot = np.array([[c, -s], [s, c]])
    return points @ rot.T


@program(lambda rng: (rng.standard_normal((4, 3)), rng.standard_normal((3, 5)),
                      rng.standard_normal((4, 5))),
         lambda rng: (rng.standard_normal((2, 2), dtype=np.float32),
                      rng.standard_normal((2, 3), dtype=np.float32),
                      rng.standard_normal((2, 3), dtype=np.float32)),
         differentiable=(0, 1, 2))
def bilinear_einsum(x, w, y):
    per_row = np.einsum("bi,ij,bj->b", x, w, y)
    outer = np.einsum("bi,bj->ij", x, y)
    return per_row, np.tensordot(outer, w, axes=([0, 1], [0, 1]))


@program(lambda rng: (0.3, 1.7),
         lambda rng: (float(rng.uniform(-1, 1)), float(rng.uniform(0.5, 2))),
         differentiable=(0, 1))
def python_float_math(a, b):
    """Pure Python floats through the math module: the result stays a Python float."""
    r = math.hypot(a, b)
    return math.exp(-r) * math.sin(a) + math.atan2(a, b) * math.log1p(b * b) - math.sqrt(r)


@program(lambda rng: (rng.standard_normal(30), rng.standard_normal(30) > 0,
                      rng.standard_normal(3)),
         lambda rng: (rng.standard_normal(16, dtype=np.float32), rng.random(16) > 0.3,
                      rng.standard_normal(3, dtype=np.float32)),
         differentiable=(2,))
def logistic_loss(x, y, w):
    """Logistic regression on features [1, x, x^2] with boolean labels."""
    feats = np.vstack([np.ones_like(x), x, x * x]).T
    margin = np.where(y, 1.0, -1.0).astype(x.dtype) * (feats @ w)
    return np.mean(np.logaddexp(0, -margin))


@program(lambda rng: (rng.standard_normal(16), np.array([0.25, 0.5, 0.25])),
         lambda rng: (rng.standard_normal(10, dtype=np.float32),
                      rng.standard_normal(4, dtype=np.float32)),
         differentiable=(0, 1))
def smooth_signal(x, kernel):
    """Convolution with the kernel, a padded moving average and a lagged correlation."""
    same = np.convolve(x, kernel, mode="same")
    padded = np.pad(x, 2, mode="edge")
    moving = (padded[:-4] + padded[1:-3] + padded[2:-2] + padded[3:-1] + padded[4:]) / 5
    return same, moving, np.correlate(x, kernel, mode="valid")


def _scaled_tanh(x, gain, bias):
    return gain * np.tanh(x) + bias


def _compose(f, g):
    return lambda v: f(g(v))


@program(lambda rng: (rng.standard_normal((3, 4)),),
         lambda rng: (rng.standard_normal(6, dtype=np.float32),),
         differentiable=(0,))
def partial_and_lambda(x):
    """Helpers bound with functools.partial, lambdas and a closure that composes them."""
    squash = functools.partial(_scaled_tanh, gain=2.0, bias=-0.5)
    return _compose(squash, lambda v: v * v)(x) + _compose(lambda v: v * v, squash)(x)
