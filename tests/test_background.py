"""pullback's own threads start with SIGINT blocked, so that Ctrl-C reaches the main
thread (an interrupted build then stops at once; tests/backends/c/test_cache.py)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pullback import background
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="not POSIX")

ROOT = Path(__file__).resolve().parents[1]


def _blocked() -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_started_thread_blocks_sigint_and_its_starter_does_not():
    seen = []
    thread = threading.Thread(target=lambda: seen.append(_blocked()))
    background.start(thread)
    thread.join()
    assert seen == [True]
    assert not _blocked()


def test_a_pool_worker_blocks_sigint_and_the_submitter_does_not():
    with ThreadPoolExecutor(2) as pool:
        assert background.submit(pool, _blocked).result() is True
    assert not _blocked()


def test_a_caller_that_blocks_sigint_keeps_it_blocked():
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        background.start(thread := threading.Thread(target=lambda: None))
        thread.join()
        assert _blocked()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


CHILD = """
import json, threading
import numpy as np
import pullback as pb
f = pb.jit(lambda x: np.sum(np.sin(x) * 2.0), backend="c")
x = np.linspace(0.0, 1.0, 7)
f(x); f(x)
masks = {}
for t in threading.enumerate():
    with open(f"/proc/self/task/{t.native_id}/status") as status:
        blk = next(line for line in status if line.startswith("SigBlk:"))
    masks[t.name] = int(blk.split()[1], 16)
print(json.dumps([f(x).item(), masks]))
"""


@pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="no /proc")
def test_the_threads_of_a_native_build_block_sigint(tmp_path):
    """A first build on an empty cache (the runtime libraries, the probes, the module)
    leaves the compiler's workers alive: each blocks SIGINT, the main thread does not."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PULLBACK_CACHE_DIR": str(tmp_path / "c")}
    env.pop("PULLBACK_BACKEND", None)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    value, masks = json.loads(proc.stdout)
    assert value == pytest.approx(2.0 * sum(math.sin(k / 6) for k in range(7)))
    bit = 1 << (signal.SIGINT - 1)
    workers = {name: mask for name, mask in masks.items() if name.startswith("pullback")}
    assert workers, masks
    assert all(mask & bit for mask in workers.values()), masks
    assert not masks["MainThread"] & bit
