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


def _log(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _one(x):
    return np.tanh(x) * 3.0 + 1.0


def _two(x):
    return np.sum(np.exp(x - np.max(x)))


def _three(x):
    return np.where(x > 0.5, x * x, -x)


def _four(x):
    return np.log1p(x * x) * 0.5


def _five(x):
    return np.cumsum(x) - 1.0


def _six(x):
    return np.sqrt(np.abs(x)) + x


def _check(fn, log: Path, seen: list[str]) -> None:
    """Compile fn, which must answer as NumPy does, then wait for the prelude's build;
    the compiler's log says ``seen``."""
    x = np.random.default_rng(len(seen)).standard_normal(9)
    np.testing.assert_allclose(pb.jit(fn, backend="c")(x), fn(x), rtol=1e-12)
    compiler.wait_background()  # the prelude's build
    assert _log(log) == seen


@needs_gcc
def test_modules_after_the_first_read_the_precompiled_prelude(cc):
    """The first module, built beside the runtime library, does not start the prelude's
    build; the next one does (and compiles the header's text); the one after reads it."""
    log = cc()
    _check(_one, log, [])
    _check(_two, log, ["pch"])
    _check(_three, log, ["pch", "gch"])


@needs_gcc
def test_a_compiler_that_cannot_use_it_builds_from_the_header(cc):
    """The module is built again without the precompiled prelude, and the modules after
    it are not offered it."""
    log = cc(relocate=True)
    _check(_four, log, [])
    _check(_five, log, ["pch"])
    _check(_six, log, ["pch", "gch"])
    _check(lambda x: _six(x) * 2.0, log, ["pch", "gch"])


@needs_gcc
def test_finish_builds_waits_for_the_prelude(cc, tmp_path, monkeypatch):
    """``pullback.api.finish_builds`` (a benchmark's last step before it times) returns
    with the prelude's build, which the second module started, ended: it is in the cache
    and shares no core with what is timed next."""
    from pullback import api

    monkeypatch.setenv("PULLBACK_TIERED", "1")
    cc()
    x = np.random.default_rng(0).standard_normal(9)
    for fn in (lambda v: _one(v) - 2.0, lambda v: _two(v) * 0.5):  # not built before
        jitted = pb.jit(fn, backend="c")
        np.testing.assert_allclose(jitted(x), fn(x), rtol=1e-12)
        api.finish_builds()
        np.testing.assert_allclose(jitted(x), fn(x), rtol=1e-12)
    assert len(list((tmp_path / "cache").glob("module-*.h.gch"))) == 1
