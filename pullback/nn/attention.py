"""Multi-head scaled dot-product attention, as ``torch.nn.MultiheadAttention`` computes it
(batch first, no dropout), with the projections stored ``[in, out]`` as ``Linear`` keeps
them: torch's ``in_proj_weight`` is ``concat(wq.T, wk.T, wv.T)``, ``out_proj.weight`` is
``wo.T``."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .. import random as prandom
from ..tree import field
from . import init as initialisers
from .activations import softmax

__all__ = ["MultiheadAttention"]


@dataclasses.dataclass
class MultiheadAttention:
    """Query, key, value and output projections ``[D, D]`` with biases ``[D]`` (or None);
    ``num_heads`` splits ``D`` into heads of ``D // num_heads``."""

    wq: Any
    wk: Any
    wv: Any
    wo: Any
    bq: Any
    bk: Any
    bv: Any
    bo: Any
    num_heads: int = field(static=True, default=1)

    @classmethod
    def init(cls, key: Any, dim: int, num_heads: int, *, bias: bool = True,
             dtype: Any = np.float32) -> MultiheadAttention:
        """torch's initialisation: the packed input projection ``[3D, D]`` Glorot-uniform,
        the output projection U(-1/sqrt(D), 1/sqrt(D)), biases zero."""
        if dim % num_heads:
            raise ValueError(f"MultiheadAttention: dim {dim} is not a multiple of "
                             f"num_heads {num_heads}")
        k_q, k_k, k_v, k_o = prandom.split(key, 4)
        shape = (dim, dim)
        wq, wk, wv = (initialisers.glorot_uniform(k, shape, dim, 3 * dim, dtype)
                      for k in (k_q, k_k, k_v))
        wo = initialisers.uniform(k_o, shape, 1.0 / np.sqrt(dim), dtype)
        bq, bk, bv, bo = (initialisers.zeros(dim, dtype) if bias else None for _ in range(4))
        return cls(wq, wk, wv, wo, bq, bk, bv, bo, num_heads)

    def __call__(self, query: Any, key: Any = None, value: Any = None, *,
                 mask: Any = None, causal: bool = False) -> Any:
        """Attend from ``query [B, T, D]`` to ``key`` and ``value [B, S, D]`` (self-
        attention when they are left out; ``value`` defaults to ``key``).  ``mask``: bool
        ``[T, S]`` or ``[B, T, S]``, True where a query may attend; ``causal=True`` also
        hides later positions (query ``t`` sees keys ``0..t``).  A query that may attend
        nowhere gets a zero context, so its output is the output bias (torch gives NaN,
        which a padded batch would spread into the loss and every gradient)."""
        key = query if key is None else key
        value = key if value is None else value
        q = self._heads(_project(query, self.wq, self.bq))
        k = self._heads(_project(key, self.wk, self.bk))
        v = self._heads(_project(value, self.wv, self.bv))
        scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])  # a Python float: weak
        allowed = _allowed(mask, causal, scores.shape[-2], scores.shape[-1])
        if allowed is None:
            weights = softmax(scores)
        else:
            # Hidden scores are the most negative float rather than -inf, so a query that
            # may attend nowhere has equal scores (not NaN) and then all its weights zeroed.
            hidden = np.where(allowed, scores, np.finfo(scores.dtype).min)
            weights = np.where(allowed, softmax(hidden), 0)
        context = weights @ v
        batch, heads, steps, width = context.shape
        merged = np.transpose(context, (0, 2, 1, 3)).reshape(batch, steps, heads * width)
        return _project(merged, self.wo, self.bo)

    def _heads(self, x: Any) -> Any:
        """``[B, T, D] -> [B, heads, T, D / heads]``."""
        batch, steps, dim = x.shape
        split = x.reshape(batch, steps, self.num_heads, dim // self.num_heads)
        return np.transpose(split, (0, 2, 1, 3))


def _project(x: Any, w: Any, b: Any) -> Any:
    y = x @ w
    return y if b is None else y + b


def _allowed(mask: Any, causal: bool, steps: int, sources: int) -> Any:
    """Where queries may attend, broadcastable to ``[B, heads, T, S]``, or None (all)."""
    allowed = None
    if mask is not None:
        mask = np.asarray(mask)
        allowed = mask if mask.ndim == 2 else mask[:, None]
    if causal:
        lower = np.tril(np.ones((steps, sources), bool))
        allowed = lower if allowed is None else allowed & lower
    return allowed
