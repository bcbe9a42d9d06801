"""Each optimiser's trajectory against a reference written here step by step in plain
NumPy (not calling pb.optim), on a least-squares problem with three parameter leaves of
different shapes: eagerly in float64 to rounding, then the whole step (gradient, update,
apply) under ``pb.jit`` on the interpreter, and two on the C backend."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import pullback as pb
from pullback import optim

STEPS = 25
RNG = np.random.default_rng(0)
X = RNG.normal(size=(6, 3))
Y = RNG.normal(size=(6, 2))
START = {"w": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2), "s": np.array(1.3)}
NAMES = ("b", "s", "w")  # the flattening order of START


def loss(p, x, y):
    r = x @ p["w"] + p["b"] - y
    return 0.5 * np.sum(r * r) + 0.25 * p["s"] ** 4


def analytic_grads(p):
    r = X @ p["w"] + p["b"] - Y
    return {"w": X.T @ r, "b": r.sum(axis=0), "s": p["s"] ** 3}


# --- references: one step at a time, on lists of arrays in NAMES order --------------


def lr_of(lr):
    return lr if callable(lr) else (lambda t: lr)


def ref_sgd(lr, momentum=0.0, nesterov=False, clip=None):
    lr, buf = lr_of(lr), [0.0] * 3

    def step(t, ps, gs):
        if clip is not None:
            norm = math.sqrt(sum(float(np.sum(g * g)) for g in gs))
            gs = [g * (clip / norm) if norm > clip else g for g in gs]
        out = []
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            buf[i] = g + momentum * buf[i]
            d = g + momentum * buf[i] if nesterov else buf[i]
            out.append(p - lr(t) * d)
        return out
    return step


def ref_adam_direction(b1, b2, eps):
    m, v = [0.0] * 3, [0.0] * 3

    def direction(t, gs):
        out = []
        for i, g in enumerate(gs):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = m[i] / (1 - b1 ** (t + 1)), v[i] / (1 - b2 ** (t + 1))
            out.append(m_hat / (np.sqrt(v_hat) + eps))
        return out
    return direction


def ref_adamw(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, mask=(True, True, True)):
    lr, direction = lr_of(lr), ref_adam_direction(b1, b2, eps)

    def step(t, ps, gs):
        ds = direction(t, gs)
        return [p - lr(t) * (d + (wd * p if k else 0)) for p, d, k in zip(ps, ds, mask,
                                                                           strict=True)]
    return step


def ref_lamb(lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0):
    direction = ref_adam_direction(b1, b2, eps)

    def step(t, ps, gs):
        out = []
        for p, d in zip(ps, direction(t, gs), strict=True):
            r = d + wd * p
            pn, rn = np.linalg.norm(p.ravel()), np.linalg.norm(r.ravel())
            out.append(p - lr * (pn / rn if pn > 0 and rn > 0 else 1.0) * r)
        return out
    return step


def ref_rmsprop(lr, decay=0.9, eps=1e-8, momentum=0.0, centered=False, eps_in_sqrt=True):
    v, mg, buf = [0.0] * 3, [0.0] * 3, [0.0] * 3

    def step(t, ps, gs):
        out = []
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            v[i] = decay * v[i] + (1 - decay) * g * g
            mg[i] = decay * mg[i] + (1 - decay) * g
            var = v[i] - mg[i] ** 2 if centered else v[i]
            denom = np.sqrt(var + eps) if eps_in_sqrt else np.sqrt(var) + eps
            buf[i] = -lr * g / denom + momentum * buf[i]
            out.append(p + buf[i])
        return out
    return step


def ref_adagrad(lr, init=0.1, eps=1e-7):
    acc = [init] * 3

    def step(t, ps, gs):
        out = []
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            acc[i] = acc[i] + g * g
            out.append(p - lr * g / np.sqrt(acc[i] + eps))
        return out
    return step


def ref_lion(lr, b1=0.9, b2=0.99, wd=0.0):
    m = [0.0] * 3

    def step(t, ps, gs):
        out = []
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            c = np.sign((1 - b1) * g + b1 * m[i])
            m[i] = b2 * m[i] + (1 - b2) * g
            out.append(p - lr * (c + wd * p))
        return out
    return step


def cosine(init, steps, alpha=0.0):
    return lambda t: init * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * min(t, steps) / steps))
                             + alpha)


def warmup_cosine(peak, warmup, total):
    return lambda t: peak * t / warmup if t < warmup else cosine(peak, total - warmup)(t - warmup)


#: name -> (the optimiser, its reference)
CASES = {
    "sgd": (lambda: optim.sgd(0.05), lambda: ref_sgd(0.05)),
    "sgd-momentum": (lambda: optim.sgd(0.05, momentum=0.9), lambda: ref_sgd(0.05, 0.9)),
    "sgd-nesterov": (lambda: optim.sgd(0.05, 0.9, nesterov=True),
                     lambda: ref_sgd(0.05, 0.9, nesterov=True)),
    "sgd-step-decay": (lambda: optim.sgd(optim.step_decay(0.1, 7, 0.5), 0.5),
                       lambda: ref_sgd(lambda t: 0.1 * 0.5 ** (t // 7), 0.5)),
    "sgd-clipped-warmup-cosine": (
        lambda: optim.chain(optim.clip_by_global_norm(1.0),
                            optim.sgd(optim.warmup_cosine_decay(0.1, 5, 20), 0.9)),
        lambda: ref_sgd(warmup_cosine(0.1, 5, 20), 0.9, clip=1.0)),
    "adam": (lambda: optim.adam(0.05), lambda: ref_adamw(0.05)),
    "adam-cosine": (lambda: optim.adam(optim.cosine_decay(0.05, 20, alpha=0.1), b1=0.8),
                    lambda: ref_adamw(cosine(0.05, 20, 0.1), b1=0.8)),
    "adamw-masked": (
        lambda: optim.adamw(0.05, weight_decay=0.1, mask={"w": True, "b": False, "s": True}),
        lambda: ref_adamw(0.05, wd=0.1, mask=(False, True, True))),
    "rmsprop": (lambda: optim.rmsprop(0.01), lambda: ref_rmsprop(0.01)),
    "rmsprop-centered-momentum": (
        lambda: optim.rmsprop(0.01, decay=0.8, momentum=0.9, centered=True),
        lambda: ref_rmsprop(0.01, decay=0.8, momentum=0.9, centered=True)),
    "rmsprop-torch-eps": (
        lambda: optim.rmsprop(0.01, eps=1e-3, momentum=0.5, eps_in_sqrt=False),
        lambda: ref_rmsprop(0.01, eps=1e-3, momentum=0.5, eps_in_sqrt=False)),
    "adagrad": (lambda: optim.adagrad(0.1), lambda: ref_adagrad(0.1)),
    "lamb": (lambda: optim.lamb(0.05, weight_decay=0.01), lambda: ref_lamb(0.05, wd=0.01)),
    "lion": (lambda: optim.lion(0.01, weight_decay=0.1), lambda: ref_lion(0.01, wd=0.1)),
}


def reference_trajectory(name):
    step, ps = CASES[name][1](), [START[k] for k in NAMES]
    out = []
    for t in range(STEPS):
        gs = analytic_grads(dict(zip(NAMES, ps, strict=True)))
        ps = step(t, ps, [gs[k] for k in NAMES])
        out.append(dict(zip(NAMES, ps, strict=True)))
    return out


def assert_close(got, want, rtol=1e-12, atol=1e-13):
    for k in NAMES:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("name", CASES)
def test_eager_trajectory_matches_reference(name):
    opt, params = CASES[name][0](), START
    state = opt.init(params)
    for t, want in enumerate(reference_trajectory(name)):
        updates, state = opt.update(analytic_grads(params), state, params)
        params = optim.apply_updates(params, updates)
        assert_close(params, want, atol=1e-12 * (t + 1))
    assert params["w"].dtype == np.float64 and np.ndim(params["s"]) == 0


def make_step(opt):
    def step(params, state, x, y):
        grads = pb.grad(loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state
    return step


#: Every case compiled for the interpreter, two of them for the C backend too.
COMPILED = [(name, "interp") for name in CASES] + [
    ("adamw-masked", "c"), ("sgd-clipped-warmup-cosine", "c")]


@pytest.mark.parametrize("name, backend", COMPILED)
def test_compiled_step_matches_reference(name, backend):
    opt = CASES[name][0]()
    step = pb.jit(make_step(opt), backend=backend)
    params, state = START, opt.init(START)
    for want in reference_trajectory(name):
        params, state = step(params, state, X, Y)
        assert_close(params, want, rtol=1e-10, atol=1e-11)


# --- a dataclass of parameters, with leaves that have no gradient ----------------------


@dataclasses.dataclass
class Model:
    w: np.ndarray
    b: np.ndarray
    s: np.ndarray
    seen: np.ndarray  # an integer leaf: no gradient
    target_scale: np.ndarray = pb.field(frozen=True)  # a leaf grad leaves alone
    name: str = pb.field(static=True, default="lsq")

    def __call__(self, x, y):
        r = x @ self.w + self.b - y * self.target_scale
        return 0.5 * np.sum(r * r) + 0.25 * self.s**4


def model():
    return Model(START["w"], START["b"], START["s"], np.arange(3), np.array(1.0))


@pytest.mark.parametrize("name", ["adamw-masked", "lion", "sgd-nesterov"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_dataclass_parameters(name, compiled):
    opt = CASES[name][0]()
    if name == "adamw-masked":  # the mask as a function of the parameters
        opt = optim.adamw(0.05, weight_decay=0.1,
                          mask=lambda m: pb.tree_map(lambda a: np.ndim(a) != 1, m))

    def step(m, state, x, y):
        updates, state = opt.update(pb.grad(Model.__call__)(m, x, y), state, m)
        return optim.apply_updates(m, updates), state

    step = pb.jit(step, backend="interp") if compiled else step
    m = model()
    state = opt.init(m)
    moments = [s for s in pb.tree_leaves(state, is_leaf=lambda s: isinstance(s, Model))
               if isinstance(s, Model)]
    assert moments and all(s.seen is None and s.target_scale is None for s in moments)
    for want in reference_trajectory(name):
        m, state = step(m, state, X, Y)
        assert_close(vars(m), want, rtol=1e-10, atol=1e-11)
    np.testing.assert_array_equal(m.seen, np.arange(3))
    assert m.target_scale == 1.0 and m.name == "lsq" and m.seen.dtype == np.arange(3).dtype
