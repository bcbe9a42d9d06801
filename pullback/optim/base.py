"""The optimiser protocol and the tree helpers every transformation shares.

A gradient tree has ``None`` where a parameter has no gradient (integer leaves, frozen
fields); the helpers here flatten with ``None`` as a leaf so that updates, parameters and
optimiser state line up position by position, and they keep such positions ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..tree import frozen_leaves, tree_flatten, tree_map, tree_unflatten

__all__ = [
    "EmptyState",
    "GradientTransformation",
    "apply_updates",
    "chain",
    "map_updates",
    "safe_increment",
    "trainable",
]

Params = Any
Updates = Any
State = Any


class GradientTransformation(NamedTuple):
    """An optimiser (or one stage of it) as two pure functions: ``init(params) -> state``
    and ``update(updates, state, params=None) -> (updates, new_state)``; states are
    pytrees of arrays, so the whole step can be compiled by ``pb.jit``."""

    init: Callable[[Params], State]
    update: Callable[..., tuple[Updates, State]]


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none (an empty pytree)."""


def _is_none(x: Any) -> bool:
    return x is None


def map_updates(fn: Callable[..., Any], updates: Updates, *trees: Any) -> Updates:
    """``fn(u, *xs)`` at each leaf whose update ``u`` is not None (the other trees are
    read at the same positions, whatever they hold there); None updates stay None."""
    return tree_map(lambda u, *xs: None if u is None else fn(u, *xs), updates, *trees,
                    is_leaf=_is_none)


def _is_float(x: Any) -> bool:
    return np.issubdtype(np.asarray(x).dtype, np.floating)


def trainable(params: Params) -> Params:
    """``params`` with None where ``pb.grad`` gives no gradient (integer and boolean
    leaves, fields marked ``pb.field(frozen=True)``): the structure of gradients, which
    optimiser state mirrors."""
    leaves, treedef = tree_flatten(params)
    kept = [x if _is_float(x) and not frozen else None
            for x, frozen in zip(leaves, frozen_leaves(params), strict=True)]
    return tree_unflatten(treedef, kept)


def safe_increment(count: Any) -> Any:
    """``count + 1`` as a 0-d int32 array, saturating instead of wrapping at 2**31 - 1."""
    limit = np.iinfo(np.int32).max
    return np.asarray(np.minimum(count, limit - 1) + 1, dtype=np.int32)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply ``transforms`` in order, each to the updates the previous one returned; the
    state is the tuple of their states."""

    def init(params: Params) -> tuple:
        return tuple(t.init(params) for t in transforms)

    def update(updates: Updates, state: tuple, params: Params = None) -> tuple[Updates, tuple]:
        new_state = []
        for t, s in zip(transforms, state, strict=True):
            updates, s = t.update(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformation(init, update)


def apply_updates(params: Params, updates: Updates) -> Params:
    """``params + updates`` leaf by leaf, each result in its parameter's dtype (a float32
    weight stays float32 whatever the update's precision); a None update leaves its
    parameter as it is."""

    def add(p: Any, u: Any) -> Any:
        return p if u is None else np.asarray(p + u, dtype=np.asarray(p).dtype)

    return tree_map(add, params, updates, is_leaf=_is_none)
