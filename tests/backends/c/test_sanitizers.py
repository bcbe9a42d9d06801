"""The generated C code, built with AddressSanitizer and UndefinedBehaviorSanitizer, runs
the corpus without a report: no out-of-bounds access, no use after free, no undefined
arithmetic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pullback.backends.c.build.compiler import compiler_info

HERE = Path(__file__).parent


def _runtime(name: str) -> str | None:
    info = compiler_info()
    if info is None:
        return None
    out = subprocess.run([info[0], f"-print-file-name={name}"], capture_output=True,
                         text=True).stdout.strip()
    return out if os.path.isabs(out) and os.path.exists(out) else None


@pytest.mark.sanitize
@pytest.mark.slow
def test_corpus_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    asan = _runtime("libasan.so")
    if asan is None:
        pytest.skip("no AddressSanitizer runtime for this compiler")
    env = dict(os.environ,
               LD_PRELOAD=asan,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
               PULLBACK_CFLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer "
                               "-fno-sanitize-recover=undefined",
               PULLBACK_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(HERE / "sanitize_child.py")], env=env,
                          capture_output=True, text=True, timeout=900)
    report = proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, report
    assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, report
    assert "ran " in proc.stdout
