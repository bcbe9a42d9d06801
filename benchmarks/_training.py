"""What the training-step benchmarks (``train_cnn.py``, ``train_lm.py``) share.

Every system trains the same model from the same initial parameters (pullback's
``init``, converted) on the same batches, taken in turn; each step's parameters and
optimiser state feed the next, as in a training loop.  A system's first call is step 1
(compile included), its check runs steps 2..STEPS on the same state and compares the
STEPS losses with a float64 run of the same training (torch eager), and the timing goes
on from there.  The row's note gives the loss of step STEPS.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import _harness as H
import numpy as np

STEPS = 20  # steps whose losses are checked against the float64 run

Step = Callable[[Any], Any]  # one training step on a batch, returning its loss


def named_arrays(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """The arrays of a pullback module by dotted path (``blocks.0.attn.wq``), so that each
    peer loads the same initial values by name; static fields and None are skipped."""
    if isinstance(tree, np.ndarray):
        return {prefix: tree}
    if dataclasses.is_dataclass(tree):
        children = [(f.name, getattr(tree, f.name)) for f in dataclasses.fields(tree)
                    if f.metadata.get("pullback") != "static"]
    elif isinstance(tree, (tuple, list)):
        children = list(enumerate(tree))
    else:
        return {}
    out: dict[str, np.ndarray] = {}
    for name, child in children:
        out.update(named_arrays(child, f"{prefix}.{name}" if prefix else str(name)))
    return out


def pullback_step(loss: Callable, optimiser: Any, model: Any) -> Step:
    """``pb.jit`` of loss -> value_and_grad -> optimiser update -> apply_updates, its
    results kept for the next call; the parameters and optimiser state are donated (updated
    in place), starting from a copy of ``model``."""
    import pullback as pb

    def train_step(model, opt_state, x, y):
        value, grads = pb.value_and_grad(loss)(model, x, y)
        updates, opt_state = optimiser.update(grads, opt_state, model)
        return value, pb.optim.apply_updates(model, updates), opt_state

    compiled = pb.jit(train_step, backend="c", donate_argnums=(0, 1))
    model = pb.tree_map(np.copy, model)
    state = [model, optimiser.init(model)]

    def step(batch: tuple) -> Any:
        value, state[0], state[1] = compiled(*state, *batch)
        return value

    return step


def jax_step(loss: Callable, optimiser: Any, params: Any) -> Step:
    """``jax.jit`` of the same step with an Optax optimiser; parameters and state are
    donated (updated in place) as a training loop does."""
    import jax
    import optax

    def train_step(params, opt_state, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    compiled = jax.jit(train_step, donate_argnums=(0, 1))
    state = [params, optimiser.init(params)]

    def step(batch: tuple) -> Any:
        value, state[0], state[1] = compiled(*state, *batch)
        return value.block_until_ready()

    return step


def torch_step(model: Any, loss: Callable, optimiser: Any, *, clip: float | None = None,
               compiled: bool = False) -> Step:
    """forward, ``backward``, optional gradient clipping, ``optimiser.step``; under
    ``torch.compile`` when ``compiled``."""
    import torch

    def train_step(x, y):
        value = loss(model(x), y)
        value.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        return value.detach()

    step = torch.compile(train_step) if compiled else train_step
    return lambda batch: step(*batch)


def load_torch(module: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Copy ``arrays`` (keyed by the module's own parameter names, already in its layout)
    into every parameter of ``module``; returns it."""
    import torch

    params = dict(module.named_parameters())
    if params.keys() != arrays.keys():
        raise KeyError(f"parameters {sorted(params.keys() ^ arrays.keys())} are not matched")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(np.ascontiguousarray(arrays[name])))
    return module


def losses(step: Step, batches: Sequence[tuple], n: int = STEPS) -> list[float]:
    """The losses of n steps on the batches in turn (for the float64 reference)."""
    return [float(step(batches[i % len(batches)])) for i in range(n)]


def train_rows(system: str, step: Step, batches: Sequence[tuple], ref: list[float] | None,
               *, model: str = "", kind: str = "peer", compiled: bool = True) -> None:
    """Time ``step`` on the batches in turn (row ``<model> step``), its losses of steps
    1..STEPS checked against ``ref``; a compiled system also gets a ``<model> compile`` row
    (its first call: compile and step 1)."""
    done = [0]
    seen: list[float] = []

    def run() -> Any:
        value = step(batches[done[0] % len(batches)])
        done[0] += 1
        return value

    def check(first: Any) -> float | None:
        seen[:] = [float(first)] + [float(run()) for _ in range(STEPS - 1)]
        return None if ref is None else H.relerr(seen, ref)

    row = H.measure(system, f"{model} step".strip(), run, check=check, kind=kind)
    ready = re.search(r"optimised code from \S+ s", row["note"] or "")
    if seen:
        row["note"] = f"loss at step {STEPS}: {seen[-1]:.5f} {row['note']}".strip()
    if compiled and row["first_s"]:
        H.record(system, f"{model} compile".strip(), kind=kind, first_s=row["first_s"],
                 note="first call: compile + one step" + (f"; {ready[0]}" if ready else ""))
