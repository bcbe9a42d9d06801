"""The prelude every module includes (``runtime/module.h``), precompiled once by GCC:
the modules built after it read it instead of parsing the headers, and answer the same;
a compiler that cannot use it builds every module from the header's text."""

from pathlib import Path

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

gcc = compiler.compiler_info()
needs_gcc = pytest.mark.skipif(gcc is None or "clang" in gcc[1], reason="no GCC")


@pytest.fixture
def cc(tmp_path, monkeypatch):
    """A fresh cache and a compiler that logs, per command, whether a precompiled prelude
    lay beside the source (``gch``) and whether it made one (``pch``); with ``relocate``,
    every compile that finds one fails as GCC before 12 did where it could not map it."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PULLBACK_CFLAGS", raising=False)
    log = tmp_path / "cc.log"

    def use(relocate: bool = False) -> Path:
        wrapper = tmp_path / "cc-logged"
        fail = ('  echo "pb.c:1:10: fatal error: had to relocate PCH" >&2; exit 1\n'
                if relocate else "")
        wrapper.write_text(
            "#!/bin/sh\n"
            f'case " $* " in *" c-header "*) echo pch >> {log};; esac\n'
            f'if [ -e module.h.gch ]; then echo gch >> {log}\n{fail}fi\n'
            f'exec {gcc[0]} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("PULLBACK_CC", str(wrapper))
        return log

    return use


def _settle() -> None:
    """Wait for the builds left running on the worker threads (the prelude's)."""
    for job in list(compiler._builds.values()):
        job.exception()


def _first(x):
    return np.tanh(x) * 3.0 + 1.0


def _second(x, y):
    return np.sum(np.exp(x - np.max(y)), axis=0)


def _third(x):
    return np.where(x > 0.5, x * x, -x)


def _fourth(x, y):
    return np.max(np.log1p(x * x) + y[0], axis=1)


def _args(rng):
    return (rng.standard_normal((5, 7)), rng.standard_normal(3))


@needs_gcc
def test_modules_after_the_first_read_the_precompiled_prelude(cc):
    log = cc()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(9)
    np.testing.assert_allclose(pb.jit(_first, backend="c")(x), _first(x), rtol=1e-12)
    _settle()
    assert log.read_text().split() == ["pch"]  # the first module compiled the header
    a = _args(rng)
    np.testing.assert_allclose(pb.jit(_second, backend="c")(*a), _second(*a), rtol=1e-12)
    assert log.read_text().split() == ["pch", "gch"]


@needs_gcc
def test_a_compiler_that_cannot_use_it_builds_from_the_header(cc):
    """The module is built again without the precompiled prelude, and the modules after
    it are not offered it."""
    log = cc(relocate=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(9) + 0.25
    np.testing.assert_allclose(pb.jit(_third, backend="c")(x), _third(x), rtol=1e-12)
    _settle()
    a = _args(rng)
    np.testing.assert_allclose(pb.jit(_fourth, backend="c")(*a), _fourth(*a), rtol=1e-12)
    assert log.read_text().split() == ["pch", "gch"]
    y = -x
    np.testing.assert_allclose(pb.jit(lambda v: _third(v) + 2.0, backend="c")(y),
                               _third(y) + 2.0, rtol=1e-12)
    assert log.read_text().split() == ["pch", "gch"]
