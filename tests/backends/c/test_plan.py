"""The plan lowering reads is computed up front, for every block, and cannot change;
every op of the elementwise and reduction families has a lowering handler."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.lower.handlers import HANDLERS
from pullback.backends.c.plan.fusion import BINARY, REDUCE, UNARY
from pullback.backends.c.plan.module import plan_module
from pullback.ir.core import Module

X = np.random.default_rng(3).standard_normal((6, 4))


def nested(x, n):
    """A loop around a branch: three blocks besides the function's own."""
    total = np.zeros(4)
    for k in range(n):
        if x[k, 0] > 0:
            total = total + np.exp(x[k])
        else:
            total = total - x[k]
    return np.sum(total * 2.0)


def _blocks(blk):
    yield blk
    for e in blk.eqns:
        for inner in e.blocks():
            yield from _blocks(inner)


def test_every_block_is_planned_up_front():
    func = pb.jit(nested, backend="c").lower(X, 6).ir
    module = Module.of(func)
    plan = plan_module(module)
    for f in module.funcs.values():
        blocks = plan.funcs[id(f)].blocks
        assert {id(b) for b in _blocks(f.block)} == set(blocks)
    assert len(plan.funcs[id(module.main)].blocks) >= 4


def test_the_plan_is_frozen():
    func = pb.jit(nested, backend="c").lower(X, 6).ir
    plan = plan_module(Module.of(func))
    fp = plan.funcs[id(func)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fp.fusible = frozenset()  # type: ignore[misc]
    assert isinstance(fp.fusible, frozenset)
    for field in ("dest", "blocks", "epilogues", "placed", "producers"):
        assert isinstance(getattr(fp, field), MappingProxyType)
    block = next(iter(fp.blocks.values()))
    assert isinstance(block.pos, tuple) and isinstance(block.views, frozenset)


@pytest.mark.parametrize("op", sorted(UNARY | BINARY | set(REDUCE)))
def test_each_fusible_op_has_a_handler(op):
    assert op in HANDLERS
