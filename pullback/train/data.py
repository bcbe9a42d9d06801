"""Mini-batches of a data set held in memory, in an order fixed by a ``pb.random`` key, so
that a run can be repeated exactly (the same key gives the same epoch)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import random
from ..tree import tree_leaves, tree_map


def batches(data: Any, batch_size: int, *, key: Any = None, shuffle: bool = True,
            drop_last: bool = False) -> Iterator[Any]:
    """Yield ``data`` in batches of ``batch_size`` examples along the first axis.

    ``data`` is an array or a pytree of arrays (usually a tuple ``(x, y)``) whose leaves
    share their first axis; each batch has ``data``'s structure.  With ``shuffle`` (the
    default) the examples are taken in the order ``pb.random.permutation(key, n)``: a key
    is required, so an unshuffled epoch is always asked for (``shuffle=False``) rather than
    a forgotten key.  The last batch is shorter when ``batch_size`` does not divide ``n``,
    unless ``drop_last``; a ``pb.jit`` step compiles once per batch shape, so
    ``drop_last=True`` keeps a training loop to a single specialisation.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"batches: batch_size must be a positive int, got {batch_size!r}")
    if shuffle and key is None:
        raise ValueError("batches: shuffle=True needs key= (a pb.random key); pass "
                         "shuffle=False to take the examples in order")
    leaves = [np.asarray(leaf) for leaf in tree_leaves(data)]
    if not leaves:
        raise ValueError("batches: data has no arrays")
    sizes = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
    if None in sizes or len(sizes) != 1:
        shapes = [leaf.shape for leaf in leaves]
        raise ValueError(f"batches: every array in data needs the same first axis (the "
                         f"examples), got shapes {shapes}")
    (n,) = sizes
    order = random.permutation(key, n) if shuffle else None
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        if order is None:
            rows: Any = slice(start, start + batch_size)
        else:
            rows = order[start:start + batch_size]
        yield tree_map(lambda leaf, rows=rows: np.asarray(leaf)[rows], data)
