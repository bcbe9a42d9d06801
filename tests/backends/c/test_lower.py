"""The machine's work is visible: ``pb.jit(f).lower(*args)`` shows the IR as staged and
after each pass, and the generated C; ``PULLBACK_DUMP=c`` prints the C as it compiles."""

from __future__ import annotations

import numpy as np

import pullback as pb
from pullback.passes.manager import PIPELINE


def loss(x):
    return np.sum(np.tanh(x) * x)


def test_lower_shows_every_stage_and_compiles():
    lowered = pb.jit(pb.grad(loss), backend="c").lower(np.ones(4))
    assert [name for name, _ in lowered.passes] == [name for name, _ in PIPELINE]
    assert "tanh" in str(lowered.staged) and "tanh" in str(lowered.ir)
    assert "static int pbf_0(pb_ctx *ctx" in lowered.source
    x = np.linspace(-1, 1, 4)
    got = lowered.compile()(x)[0]
    np.testing.assert_allclose(got, np.tanh(x) + x * (1 - np.tanh(x) ** 2))


def test_dump_c_prints_the_source(monkeypatch, capsys):
    monkeypatch.setenv("PULLBACK_DUMP", "c")
    pb.jit(lambda x: x * 3.0 + 1.0, backend="c")(np.ones(5))
    out = capsys.readouterr().out
    assert "#include \"module.h\"" in out and "pbf_0" in out
