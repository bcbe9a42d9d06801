"""pb.optim against Optax and torch.optim, where they are importable (not in the main
environment: ``/tmp/peers/bin/python -m pytest tests/optim/test_against_peers.py``): the
same gradients, computed here in NumPy, fed to both for 25 steps of a softmax regression
in float64, and the parameters compared after every step."""

from __future__ import annotations

import numpy as np
import pytest

from pullback import optim

STEPS = 25
RNG = np.random.default_rng(1)
X = RNG.normal(size=(8, 4))
LABELS = RNG.integers(0, 3, size=8)
START = {"w": RNG.normal(size=(4, 3)), "b": RNG.normal(size=3), "t": np.array(0.7)}
NAMES = ("b", "t", "w")


def grads(p):
    """The gradient of the mean cross-entropy of ``t * (x @ w + b)``."""
    z = X @ p["w"] + p["b"]
    logits = p["t"] * z
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    d = (e / e.sum(axis=1, keepdims=True) - np.eye(3)[LABELS]) / len(X)
    return {"w": X.T @ (p["t"] * d), "b": (p["t"] * d).sum(axis=0), "t": np.sum(d * z)}


def ours(opt):
    params, state, out = START, opt.init(START), []
    for _ in range(STEPS):
        updates, state = opt.update(grads(params), state, params)
        params = optim.apply_updates(params, updates)
        out.append(params)
    return out


def assert_trajectories(got, want, rtol, atol):
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        for k in NAMES:
            np.testing.assert_allclose(g[k], w[k], rtol=rtol, atol=atol,
                                       err_msg=f"{k} after step {t + 1}")


# --- Optax ----------------------------------------------------------------------------


def optax_cases(optax):
    mask = {"w": True, "b": False, "t": True}
    return {
        "sgd-nesterov": (optim.sgd(0.1, 0.9, nesterov=True),
                         optax.sgd(0.1, momentum=0.9, nesterov=True)),
        "adam-cosine": (optim.adam(optim.cosine_decay(0.05, 20, alpha=0.1), b1=0.8),
                        optax.adam(optax.cosine_decay_schedule(0.05, 20, alpha=0.1), b1=0.8)),
        "adamw-masked": (optim.adamw(0.05, weight_decay=0.1, mask=mask),
                         optax.adamw(0.05, weight_decay=0.1, mask=mask)),
        "rmsprop-centered": (optim.rmsprop(0.01, 0.8, momentum=0.9, centered=True),
                             optax.rmsprop(0.01, 0.8, momentum=0.9, centered=True)),
        "adagrad": (optim.adagrad(0.1), optax.adagrad(0.1)),
        "lamb": (optim.lamb(0.05, weight_decay=0.01), optax.lamb(0.05, weight_decay=0.01)),
        "lion": (optim.lion(0.01, weight_decay=0.1), optax.lion(0.01, weight_decay=0.1)),
        "clip-warmup-cosine": (
            optim.chain(optim.clip_by_global_norm(0.3),
                        optim.sgd(optim.warmup_cosine_decay(0.2, 5, 20, end=0.01), 0.9)),
            optax.chain(optax.clip_by_global_norm(0.3),
                        optax.sgd(optax.warmup_cosine_decay_schedule(0.0, 0.2, 5, 20, 0.01),
                                  momentum=0.9))),
        "exponential-staircase": (
            optim.sgd(optim.exponential_decay(0.3, 4, 0.5, staircase=True)),
            optax.sgd(optax.exponential_decay(0.3, 4, 0.5, staircase=True))),
    }


@pytest.fixture(scope="module")
def peers_optax():
    jax = pytest.importorskip("jax")
    optax = pytest.importorskip("optax")
    jax.config.update("jax_enable_x64", True)
    return jax, optax


#: Optax evaluates these schedules in float32 even with x64 on (0.3 -> 0.30000001192...).
FLOAT32_SCHEDULES = {"clip-warmup-cosine", "exponential-staircase"}
CASE_NAMES = ["sgd-nesterov", "adam-cosine", "adamw-masked", "rmsprop-centered", "adagrad",
              "lamb", "lion", "clip-warmup-cosine", "exponential-staircase"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_against_optax(peers_optax, name):
    jax, optax = peers_optax
    mine, theirs = optax_cases(optax)[name]
    params = jax.tree.map(jax.numpy.asarray, START)
    state, want = theirs.init(params), []
    for _ in range(STEPS):
        g = jax.tree.map(jax.numpy.asarray, grads(jax.tree.map(np.asarray, params)))
        updates, state = theirs.update(g, state, params)
        params = optax.apply_updates(params, updates)
        want.append(jax.tree.map(np.asarray, params))
    rounded = name in FLOAT32_SCHEDULES
    assert_trajectories(ours(mine), want, rtol=1e-7 if rounded else 1e-10,
                        atol=1e-8 if rounded else 1e-12)


# --- torch.optim ----------------------------------------------------------------------


def torch_cases(torch):
    o = torch.optim
    return {
        "sgd-nesterov": (optim.sgd(0.1, 0.9, nesterov=True),
                         lambda ps: (o.SGD(ps, lr=0.1, momentum=0.9, nesterov=True), None)),
        "sgd-step-lr": (optim.sgd(optim.step_decay(0.1, 7, 0.5), 0.5),
                        lambda ps: _scheduled(o.SGD(ps, lr=0.1, momentum=0.5),
                                              lambda s: o.lr_scheduler.StepLR(s, 7, 0.5))),
        "sgd-cosine-annealing": (
            # torch's cosine rises again after T_max; Optax's (and ours) stays at the end
            optim.sgd(optim.cosine_decay(0.2, 30, alpha=0.1)),
            lambda ps: _scheduled(o.SGD(ps, lr=0.2),
                                  lambda s: o.lr_scheduler.CosineAnnealingLR(s, 30, 0.02))),
        "adam": (optim.adam(0.05, b1=0.8), lambda ps: (o.Adam(ps, lr=0.05, betas=(0.8, 0.999)),
                                                       None)),
        "adamw": (optim.adamw(0.05, weight_decay=0.1),
                  lambda ps: (o.AdamW(ps, lr=0.05, weight_decay=0.1), None)),
        "rmsprop-centered": (
            optim.rmsprop(0.01, 0.8, momentum=0.9, centered=True, eps_in_sqrt=False),
            lambda ps: (o.RMSprop(ps, lr=0.01, alpha=0.8, momentum=0.9, centered=True), None)),
        "adagrad": (optim.adagrad(0.1, eps=0.0),
                    lambda ps: (o.Adagrad(ps, lr=0.1, initial_accumulator_value=0.1, eps=0.0),
                                None)),
    }


def _scheduled(optimizer, make_scheduler):
    return optimizer, make_scheduler(optimizer)


@pytest.mark.parametrize("name", ["sgd-nesterov", "sgd-step-lr", "sgd-cosine-annealing",
                                  "adam", "adamw", "rmsprop-centered", "adagrad"])
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    mine, make = torch_cases(torch)[name]
    tensors = {k: torch.tensor(START[k], dtype=torch.float64) for k in NAMES}
    optimizer, scheduler = make(list(tensors.values()))
    want = []
    for _ in range(STEPS):
        g = grads({k: v.numpy() for k, v in tensors.items()})
        for k, v in tensors.items():
            v.grad = torch.tensor(g[k], dtype=torch.float64)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        want.append({k: v.detach().numpy().copy() for k, v in tensors.items()})
    assert_trajectories(ours(mine), want, rtol=1e-10, atol=1e-12)


def test_clipping_against_torch():
    """torch divides by ``norm + 1e-6``, hence the looser tolerance."""
    torch = pytest.importorskip("torch")
    g = grads(START)
    tensors = [torch.tensor(START[k], dtype=torch.float64) for k in NAMES]
    for v, k in zip(tensors, NAMES, strict=True):
        v.grad = torch.tensor(g[k] * 10, dtype=torch.float64)
    torch.nn.utils.clip_grad_norm_(tensors, 0.5)
    clip = optim.clip_by_global_norm(0.5)
    got, _ = clip.update({k: g[k] * 10 for k in NAMES}, clip.init(START))
    for v, k in zip(tensors, NAMES, strict=True):
        np.testing.assert_allclose(got[k], v.grad.numpy(), rtol=1e-5)
