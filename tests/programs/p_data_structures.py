"""Programs whose values travel in containers: nested parameter lists, dicts,
dataclasses, NamedTuples, and functions passed around as values (partials, lambdas,
closures, methods)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from programs.registry import program


@dataclass
class Dense:
    """A fully connected layer; its methods are called on instances inside programs."""

    w: np.ndarray
    b: np.ndarray

    def apply(self, x):
        return x @ self.w + self.b

    def decayed(self, rate):
        return Dense(self.w * (1.0 - rate), self.b)


@dataclass(frozen=True)
class SGDConfig:
    lr: float
    momentum: float = 0.9
    nesterov: bool = False


@dataclass
class Stats:
    mean: np.ndarray
    spread: np.ndarray
    count: int


class Particle(NamedTuple):
    pos: np.ndarray
    vel: np.ndarray


class Gaussian(NamedTuple):
    mu: float
    sigma: float


def _layers(rng, sizes, dtype):
    """A list of (W, b) tuples for an MLP with the given layer widths."""
    return [(rng.standard_normal((m, n)).astype(dtype) / np.sqrt(m),
             rng.standard_normal(n).astype(dtype) * 0.1)
            for m, n in zip(sizes[:-1], sizes[1:], strict=True)]


@program(lambda rng: (_layers(rng, (4, 8, 8, 3), np.float64), rng.standard_normal((5, 4))),
         lambda rng: (_layers(rng, (3, 6, 2), np.float32),
                      rng.standard_normal((7, 3)).astype(np.float32)),
         differentiable=(0, 1))
def mlp_from_layer_list(params, x):
    *hidden, (w_out, b_out) = params
    for w, b in hidden:
        x = np.tanh(x @ w + b)
    return x @ w_out + b_out


@program(lambda rng: ({"scale": rng.uniform(0.5, 2.0, 6), "shift": rng.standard_normal(6),
                       "order": 2},
                      rng.standard_normal((4, 6))),
         lambda rng: ({"scale": rng.uniform(0.5, 2.0, 3).astype(np.float32),
                       "shift": np.zeros(3, np.float32), "order": 3},
                      rng.standard_normal((2, 3)).astype(np.float32)),
         differentiable=(0, 1))
def affine_moments(p, x):
    y = x * p["scale"] + p["shift"]
    centred = y - y.mean(axis=0)
    return {
        "y": y,
        "moment": (centred ** p["order"]).mean(axis=0),
        "extremes": {"lo": y.min(axis=1), "hi": y.max(axis=1)},
    }


@program(lambda rng: ({"w1": rng.standard_normal((3, 3)), "w2": rng.standard_normal(3)},
                      {"w1": rng.standard_normal((3, 3)), "w2": rng.standard_normal(3)},
                      0.05),
         lambda rng: ({"a": rng.standard_normal(4).astype(np.float32)},
                      {"a": rng.standard_normal(4).astype(np.float32)}, 0.5),
         differentiable=(0, 1, 2))
def sgd_on_dict(params, grads, lr):
    new = {name: value - lr * grads[name] for name, value in params.items()}
    norm = sum([np.sum(g * g) for g in grads.values()])
    return new, np.sqrt(norm)


@program(lambda rng: (Dense(rng.standard_normal((4, 2)), rng.standard_normal(2)),
                      rng.standard_normal((3, 4)), 0.1),
         lambda rng: (Dense(rng.standard_normal((2, 5)).astype(np.float32),
                            np.ones(5, np.float32)),
                      rng.standard_normal((6, 2)).astype(np.float32), 0.25),
         differentiable=(0, 1, 2))
def dense_methods(layer, x, rate):
    smaller = layer.decayed(rate)
    y = smaller.apply(x)
    return Dense(smaller.w, smaller.b + y.mean(axis=0)), layer.apply(x) - y


@program(lambda rng: ([(rng.standard_normal((3, 3)) * 0.5, rng.standard_normal(3))
                       for _ in range(3)], rng.standard_normal((2, 3))),
         differentiable=(0, 1))
def residual_stack_of_dense(blocks, x):
    layers = [Dense(w, b) for w, b in blocks]
    for layer in layers:
        x = x + np.maximum(layer.apply(x), 0.0)
    return x, len(layers)


@program(lambda rng: (Particle(rng.standard_normal((5, 2)), rng.standard_normal((5, 2))),
                      0.01, 20),
         lambda rng: (Particle(rng.standard_normal((3, 3)).astype(np.float32),
                               np.zeros((3, 3), np.float32)), 0.05, 8),
         differentiable=(0, 1))
def spring_leapfrog(state, dt, steps):
    def accel(pos):
        return -4.0 * (pos - pos.mean(axis=0))

    pos, vel = state
    for _ in range(steps):
        vel = vel + 0.5 * dt * accel(pos)
        pos = pos + dt * vel
        vel = vel + 0.5 * dt * accel(pos)
    return Particle(pos, vel), 0.5 * np.sum(state.vel ** 2) - 0.5 * np.sum(vel ** 2)


@program(lambda rng: (rng.standard_normal(8), [Gaussian(0.0, 1.0), Gaussian(1.5, 0.5)]),
         lambda rng: (rng.standard_normal(5).astype(np.float32),
                      [Gaussian(-1.0, 2.0), Gaussian(0.0, 0.3), Gaussian(2.0, 1.0)]),
         differentiable=(0, 1))
def gaussian_mixture_logpdf(x, components):
    weight = 1.0 / len(components)
    terms = [np.log(weight) - 0.5 * ((x - g.mu) / g.sigma) ** 2 - np.log(g.sigma)
             - 0.5 * np.log(2.0 * np.pi) for g in components]
    stacked = np.stack(terms)
    top = stacked.max(axis=0)
    return top + np.log(np.sum(np.exp(stacked - top), axis=0))


def _clip_scale(x, lo, hi, factor=1.0):
    return np.clip(x * factor, lo, hi)


@program(lambda rng: (rng.standard_normal(10) * 3.0, 2.0),
         lambda rng: ((rng.standard_normal((3, 4)) * 3.0).astype(np.float32), 0.5),
         differentiable=(0, 1))
def partial_transforms(x, factor):
    transforms = [
        functools.partial(_clip_scale, lo=-1.0, hi=1.0),
        functools.partial(_clip_scale, lo=0.0, hi=5.0, factor=factor),
        functools.partial(np.maximum, 0.25),
    ]
    return [t(x) for t in transforms]


@program(lambda rng: (rng.standard_normal(6), 3),
         lambda rng: (rng.standard_normal((2, 3)).astype(np.float32), 4),
         differentiable=(0,))
def power_series_lambdas(x, terms):
    powers = [lambda v, k=k: v ** k / np.prod(np.arange(1.0, k + 1.0)) for k in range(terms)]
    total = np.zeros_like(x)
    for f in powers:
        total = total + f(x)
    return total, np.exp(x) - total


def _make_smoother(alpha):
    """A closure carrying both a captured constant and a captured helper."""
    beta = 1.0 - alpha

    def step(prev, x):
        return alpha * x + beta * prev

    return step


@program(lambda rng: (rng.standard_normal((12, 2)), 0.3),
         lambda rng: (rng.standard_normal((9, 3)).astype(np.float32), 0.7),
         differentiable=(0, 1))
def exponential_smoothing_closure(xs, alpha):
    step = _make_smoother(alpha)
    level = xs[0]
    levels = [level]
    for x in xs[1:]:
        level = step(level, x)
        levels.append(level)
    return np.stack(levels)


def _describe(x):
    """Several statistics at once, returned as one tuple."""
    centred = x - x.mean()
    return x.min(), np.median(x), x.mean(), np.sqrt(np.mean(centred ** 2)), x.max()


@program(lambda rng: (rng.standard_normal(9),),
         lambda rng: (rng.standard_normal(6).astype(np.float32),),
         lambda rng: (rng.integers(-5, 5, 7),),
         differentiable=())
def starred_statistics(x):
    lo, *middle, hi = _describe(x)
    first, *rest = x
    head, second, *_ = middle
    return hi - lo, second, head, first * len(rest)


@program(lambda rng: (rng.standard_normal((3, 4)), 1),
         lambda rng: (rng.standard_normal((3, 4)), (0, 1)),
         lambda rng: (rng.standard_normal((2, 5)).astype(np.float32), None),
         differentiable=(0,))
def normalize_by_axis_spec(x, axis):
    if axis is None:
        return (x - x.mean()) / x.std()
    if isinstance(axis, int):
        mu = x.mean(axis=axis, keepdims=True)
        return (x - mu) / x.std(axis=axis, keepdims=True)
    if isinstance(axis, tuple) and len(axis) == x.ndim:
        return x / np.abs(x).max()
    raise ValueError(f"unsupported axis spec {axis!r}")


def _tree_sq_norm(node):
    """Recursive walk over a nested container, dispatching on the node type."""
    if isinstance(node, dict):
        return sum(_tree_sq_norm(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return sum(_tree_sq_norm(v) for v in node)
    if isinstance(node, Dense):
        return _tree_sq_norm(node.w) + _tree_sq_norm(node.b)
    return np.sum(node * node)


@program(lambda rng: ({"enc": [rng.standard_normal((2, 2)), (rng.standard_normal(3),)],
                       "dec": Dense(rng.standard_normal((2, 3)), rng.standard_normal(3))},),
         lambda rng: ([rng.standard_normal(4).astype(np.float32),
                       {"x": rng.standard_normal((2, 2)).astype(np.float32)}],),
         differentiable=(0,))
def tree_norm_recursive(tree):
    return np.sqrt(_tree_sq_norm(tree))


@program(lambda rng: ([rng.standard_normal(3), rng.standard_normal(3)],
                      [rng.standard_normal(3), rng.standard_normal(3)],
                      [np.zeros(3), rng.standard_normal(3)], SGDConfig(lr=0.1)),
         lambda rng: ([rng.standard_normal((2, 2)).astype(np.float32)],
                      [rng.standard_normal((2, 2)).astype(np.float32)],
                      [np.full((2, 2), 0.1, np.float32)],
                      SGDConfig(lr=0.01, momentum=0.5, nesterov=True)),
         differentiable=(0, 1, 2))
def momentum_step_config(params, grads, velocities, cfg):
    new_params, new_velocities = [], []
    for p, g, v in zip(params, grads, velocities, strict=True):
        v = cfg.momentum * v + g
        step = g + cfg.momentum * v if cfg.nesterov else v
        new_params.append(p - cfg.lr * step)
        new_velocities.append(v)
    return new_params, new_velocities


@program(lambda rng: (rng.standard_normal((6, 3)),),
         lambda rng: (rng.standard_normal((4, 2)).astype(np.float32),),
         differentiable=(0,))
def column_stats_dataclass(x):
    stats = Stats(x.mean(axis=0), x.max(axis=0) - x.min(axis=0), x.shape[0])
    scaled = (x - stats.mean) / stats.spread
    return Stats(scaled.mean(axis=0), stats.spread * 2.0, stats.count + 1), scaled


@program(lambda rng: ([{"w": rng.standard_normal((3, 3)), "b": rng.standard_normal(3),
                        "act": "tanh"},
                       {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2),
                        "act": "linear"}], rng.standard_normal((4, 3))),
         lambda rng: ([{"w": rng.standard_normal((2, 2)).astype(np.float32),
                        "b": np.zeros(2, np.float32), "act": "relu"}],
                      rng.standard_normal((3, 2)).astype(np.float32)),
         differentiable=(0, 1))
def records_of_layers(layers, x):
    activations = {"tanh": np.tanh, "relu": lambda v: np.maximum(v, 0.0), "linear": lambda v: v}
    trace = {}
    for i, layer in enumerate(layers):
        x = activations[layer["act"]](x @ layer["w"] + layer["b"])
        trace[f"layer{i}_{layer['act']}"] = x.sum()
    return x, trace


@program(lambda rng: (rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5), 12),
         lambda rng: (np.float32(0.8), np.float32(1.1), np.float32(0.9), 5),
         differentiable=(0, 1, 2))
def rotate_tuple_state(a, b, c, steps):
    for _ in range(steps):
        a, b, c = b, c, (a + b + c) / 3.0 + 0.1 * a
    return a, (b, c)


def _compose(*fs):
    def composed(x):
        for f in reversed(fs):
            x = f(x)
        return x

    return composed


@program(lambda rng: (rng.standard_normal(7), 2.0),
         lambda rng: (rng.standard_normal((2, 2)).astype(np.float32), 0.5),
         differentiable=(0, 1))
def composed_pipeline(x, gain):
    shift = x.mean()
    pipeline = _compose(np.tanh, lambda v: gain * v, lambda v: v - shift)
    squash = _compose(np.exp, functools.partial(np.multiply, -0.5), np.square)
    return pipeline(x), squash(x)
