"""Compiled code that runs deep, long or over impossible sizes behaves as plain Python
does, and the process goes on: a recursion deeper than the stack raises RecursionError
(it overflowed the stack: a segfault), Ctrl-C interrupts loops and recursions (it was
ignored until they ended, i.e. never), and an array no machine could hold raises NumPy's
MemoryError before any loop runs over it (a fused kernel ran over its 10**15 elements
for hours).  Each runs in a child process (long_runs_child.py) with a deadline, so a
crash or a hang fails one test."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c import source_of
from pullback.backends.c.build import compiler

from .long_runs_child import climb, count_down, halve

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

CHILD = Path(__file__).with_name("long_runs_child.py")
DEADLINE = 120  # seconds: a cold cache compiles a few modules; a hang is far longer


def child(*args: str) -> dict[str, str]:
    """Run a scenario; its lines as {first word(s): the rest}."""
    proc = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True,
                          text=True, timeout=DEADLINE, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _lines(proc.stdout.splitlines())


def _lines(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        key, _, rest = line.partition(" ")
        if key in ("grad", "not", "after", "handler"):
            more, _, rest = rest.partition(" ")
            key = f"{key} {more}"
        out[key] = rest
    return out


DEEP = "RecursionError: maximum recursion depth exceeded"


def test_deep_compiled_recursion_raises_recursion_error():
    got = child("recursion", "c")
    assert got["deep"].startswith(DEEP)  # was a segfault at depth 10**6
    assert got["moderate"] == "50000.0"  # as deep as Python with a raised limit
    assert got["shallow"] == "10.0"
    assert got["grad deep"].startswith(DEEP)  # the forward recursion of grad, 10**7 deep
    interp = child("recursion", "interp")
    assert interp["deep"].startswith(DEEP) and interp["grad deep"].startswith(DEEP)
    assert got["grad shallow"] == interp["grad shallow"]


def test_recursion_depth_follows_the_threads_stack():
    got = child("thread")
    assert got["thread"].startswith(f"1000000 {DEEP}")  # the last line: 512 KiB stack
    assert "1000.0" not in got["thread"]


def test_the_depth_check_is_only_in_recursive_functions():
    rec = source_of(pb.jit(count_down, backend="c").lower(np.int64(3)).ir).text
    assert rec.count("pb_enter(ctx") == 1  # pbf_1, not the entry that calls it
    loop = source_of(pb.jit(halve, backend="c").lower(1.0, np.int64(3)).ir).text
    assert "pb_enter" not in loop and loop.count("PB_TICK(ctx, pb_ticks") == 1
    straight = source_of(pb.jit(lambda x: np.sin(x) * 2.0, backend="c")
                         .lower(np.ones(4)).ir).text
    assert "pb_ticks" not in straight and "pb_enter" not in straight


def _read_lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def test_sigint_interrupts_compiled_loops_and_recursion():
    """SIGINT half a second into each endless call: KeyboardInterrupt within seconds
    (plain Python's), then the next call; a handler that returns lets the loop go on."""
    env = {**os.environ}
    proc = subprocess.Popen([sys.executable, str(CHILD), "interrupts"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    seen = []
    try:
        end = time.monotonic() + DEADLINE
        while True:
            line = lines.get(timeout=max(end - time.monotonic(), 0.1))
            if line is None:
                break
            seen.append(line)
            if line.startswith("ready"):
                time.sleep(0.5)
                proc.send_signal(signal.SIGINT)
                if line == "ready handler":
                    time.sleep(0.5)
                    proc.send_signal(signal.SIGINT)
                end = time.monotonic() + 10  # interrupted within seconds, not minutes
        assert proc.wait(timeout=10) == 0, proc.stderr.read()[-3000:]
    except queue.Empty:
        pytest.fail(f"no answer to SIGINT after {seen}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for name in ("while", "for", "recursion", "grad"):
        assert f"interrupted {name}" in seen, seen
    assert "handler restored True" in seen
    assert "handled 2 second signal" in seen


def test_arrays_no_machine_holds_raise_before_running():
    got = child("sizes", "c")
    numpy_says = got["numpy"]  # NumPy's own message for np.ones(HUGE)
    assert numpy_says.startswith("Unable to allocate 7.11 PiB for an array with shape")
    assert got["ones_sum"] == f"MemoryError: {numpy_says}"  # fused, it ran for hours
    assert got["broadcast_sum"] == f"MemoryError: {numpy_says}"
    assert got["beyond_intp"].startswith("ValueError: array is too big")
    assert got["not taken"] == "-2.0"  # only an array the run makes counts
    assert got["taken"] == f"MemoryError: {numpy_says}"
    assert got["before"] == "3.0"  # effects before it happen, in order
    assert got["after print"] == f"MemoryError: {numpy_says}"
    interp = child("sizes", "interp")  # the reference allocates, and NumPy refuses
    for key in ("ones_sum", "broadcast_sum", "taken", "after print", "not taken"):
        assert interp[key] == got[key]
    assert interp["beyond_intp"].startswith("ValueError")


def test_arrays_that_fit_are_unaffected():
    def big_but_fine(x):
        return np.sum(np.ones((1000, 1000)) * x)

    text = source_of(pb.jit(big_but_fine, backend="c").lower(2.0).ir).text
    assert "MemoryError\"; ctx->check_id" not in text
    assert pb.jit(big_but_fine, backend="c")(2.0) == 2e6
    assert pb.jit(climb, backend="c")(-1.0) == -1.0
