"""The C backend's stages: their names and order, what each makes (checked), each dumped
by its name alone, and each doing its part (a pipeline missing one fails here)."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c import pipeline
from pullback.backends.c.build import compiler
from pullback.backends.c.call.compiled import Compiled
from pullback.backends.c.emit.source import Source
from pullback.backends.c.loops.ir import (
    Alloc,
    Call,
    Copy,
    Decl,
    Free,
    LoopModule,
    Pointer,
    Stmt,
    children,
    walk,
)
from pullback.backends.c.loops.printer import format_module
from pullback.backends.c.lower.lowering import LoweredModule
from pullback.backends.c.prepare.products import outer_products
from pullback.backends.c.prepare.scalars import hoist_scalars
from pullback.ir.core import Module
from pullback.ir.verify import verify

from .test_columns import CAMS, IDX, PTS, project
from .test_loop_ir import products

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

NAMES = ["prepare", "plan", "lower", "loops", "c", "build"]
X = np.random.default_rng(5).standard_normal((8, 8)) / 3


def step(x, n):
    """Control flow, a fault site, a reduction and products."""
    total = 0.0
    for k in range(n):
        assert x[k, 0] < 10.0, "too big"
        total = total + np.sum(np.tanh(x[k] @ x))
    return total


def _ir(fn, *args):
    return pb.jit(fn, backend="c").lower(*args).ir


def _outputs(func, until="c"):
    """Each stage's output, up to ``until``, from a run of its own (a stage may rewrite
    what the one before made)."""
    names = NAMES[:NAMES.index(until) + 1]
    return {name: pipeline.run(func, until=name) for name in names}


def well_formed(module: LoopModule) -> None:
    """A small loop-IR check: the entry comes first, statements are statements, calls
    name functions of the module, and what a function frees it declared."""
    names = {f.name for f in module.funcs}
    assert len(names) == len(module.funcs)
    assert [f.entry for f in module.funcs] == [True] + [False] * (len(module.funcs) - 1)
    for f in module.funcs:
        stmts = list(walk(f.body))
        assert all(isinstance(s, Stmt) for s in stmts)
        assert all(isinstance(b, list) for s in stmts for b in children(s))
        assert {s.func for s in stmts if isinstance(s, Call)} <= names
        declared = {p.name for p in f.params}
        declared |= {s.name for s in stmts if isinstance(s, (Alloc, Pointer, Decl))}
        declared |= {s.dest for s in stmts if isinstance(s, Copy)}
        assert {s.name for s in stmts if isinstance(s, Free)} <= declared


def test_the_stages_in_their_order():
    assert [s.name for s in pipeline.STAGES] == NAMES
    assert all(s.show is not None for s in pipeline.STAGES[:-1])


def test_each_stage_makes_the_next_representation():
    func = _ir(step, X, 4)
    out = _outputs(func)
    assert list(out) == NAMES[:-1]
    assert isinstance(out["prepare"], Module) and out["prepare"].main.name == func.name
    verify(out["prepare"])
    assert str(out["plan"].module) == str(out["prepare"])
    described = pipeline.describe_plan(out["plan"])
    assert described.startswith(f"pbf_0 {func.name}:") and "block:" in described
    for name in ("lower", "loops"):
        assert isinstance(out[name], LoweredModule)
        well_formed(out[name].loops)
        assert "kernel" in format_module(out[name].loops)
    assert out["lower"].checks  # the assert's fault site
    src = out["c"]
    assert isinstance(src, Source) and f"PyInit_{src.name}(void)" in src.text
    assert src.loops == format_module(out["loops"].loops)  # emitting C leaves it as it was
    again = c.source_of(func)  # the same up to the notes (which show blocks by address)
    assert again.text.split("/* what faults")[0] == src.text.split("/* what faults")[0]


def test_build_makes_a_callable():
    func = _ir(step, X, 4)
    built = c.compile_func(func)
    assert isinstance(built, Compiled)
    np.testing.assert_allclose(built(X)[0], step(X, 4), rtol=1e-12)


@pytest.mark.parametrize("name", NAMES[:-1])
def test_a_dump_prints_its_stage_alone(name, monkeypatch, capsys):
    func = _ir(products, X)
    out = _outputs(func)
    capsys.readouterr()
    monkeypatch.setenv("PULLBACK_DUMP", name)
    pipeline.run(func, until="c")
    show = next(s.show for s in pipeline.STAGES if s.name == name)
    assert capsys.readouterr().out == show(out[name]) + "\n"


def test_prepare_splits_records_built_column_by_column(monkeypatch):
    func = _ir(project, CAMS, PTS, IDX)
    entry = pipeline.Entry(func, {})
    split = pipeline.prepare(entry, entry)
    monkeypatch.setenv("PULLBACK_COLUMNS", "0")
    unsplit = hoist_scalars(outer_products(Module.of(func)))
    assert str(pipeline.prepare(entry, entry)) == str(unsplit) != str(split)


def test_the_loop_passes_place_buffers_on_the_arena():
    out = _outputs(_ir(products, X), until="loops")
    offsets = [[s.offset for s in walk(out[name].loops.funcs[0].body) if isinstance(s, Alloc)]
               for name in ("lower", "loops")]
    assert offsets[0] and all(k == -1 for k in offsets[0])
    assert all(k >= 0 for k in offsets[1]) and out["loops"].loops.funcs[0].arena > 0


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="no stage 'emit'"):
        pipeline.run(_ir(products, X), until="emit")
