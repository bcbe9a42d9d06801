"""The cache's index (``backends/c/call/index.py``): a new process finds a function's
built module without the C backend's stages, and what it finds calls, faults and prints
as the module the stages made; an entry another pullback made, or a damaged one, is not
used.  Each run is a process of its own, with a cache of the test's own."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from harness import child_env
from pullback.backends.c.build import compiler

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

PROGRAM = '''
import json, sys, warnings
import numpy as np
import pullback as pb
from pullback.backends.c.call import index

warnings.simplefilter("always")
if "another-pullback" in sys.argv:
    index._fingerprint = lambda: "another pullback's files"


def checked(x, i):
    assert x[i] >= 0.0, f"x[{i}] = {x[i]} is negative"
    print("total", np.sum(x))
    return x * 2.0 + 1.0


f = pb.jit(checked, backend="c")
x = np.array([0.5, 1.5, 3.0])
first = f(x, np.int64(1))
second = f(x, np.int64(2))  # through the fast entry
try:
    f(-x, np.int64(2))
except AssertionError as e:
    fault = [str(e), getattr(e, "__notes__", [])]
staged, _ = f.specialise(x, np.int64(1))
report = {"first": first.tolist(), "second": second.tolist(), "fault": fault,
          "native": staged.runner is not None, "fast": f._spec.fast is not None,
          "stages": [m for m in ("pullback.backends.c.pipeline",
                                 "pullback.backends.c.loops.ir") if m in sys.modules]}
report["source"] = "pb_entry" in staged.runner.source
print(json.dumps(report))
'''
X = np.array([0.5, 1.5, 3.0])
WANT = (X * 2.0 + 1.0).tolist()
#: What the program prints before its report: the calls that did not fault print.
PRINTED = [f"total {np.sum(X)}", f"total {np.sum(X)}"]
#: The assert's line in PROGRAM.
ASSERT_LINE = PROGRAM.splitlines().index(
    '    assert x[i] >= 0.0, f"x[{i}] = {x[i]} is negative"') + 1


@pytest.fixture
def run(tmp_path):
    """Run PROGRAM in a new process with the test's cache (its arguments: ``args``);
    what it printed before its report, the report, and its stderr."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = child_env(PULLBACK_CACHE_DIR=str(tmp_path / "c"), PULLBACK_TIERED="0",
                    PULLBACK_VERIFY="0")
    env.pop("PULLBACK_DUMP", None)

    def go(*args: str) -> tuple[list[str], dict, str]:
        proc = subprocess.run([sys.executable, str(script), *args], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        *printed, report = proc.stdout.splitlines()
        return printed, json.loads(report), proc.stderr

    go.cache = tmp_path / "c"
    return go


def _answers_right(printed: list[str], report: dict) -> None:
    assert report["first"] == report["second"] == WANT
    assert report["native"] and report["fast"] and report["source"]
    assert printed == PRINTED
    message, notes = report["fault"]
    assert message == "x[2] = -3.0 is negative"
    assert f"program.py:{ASSERT_LINE}:" in notes[0] and "in checked" in notes[0]


@needs_cc
def test_a_new_process_finds_the_module_without_the_stages(run):
    printed, miss, _ = run()
    _answers_right(printed, miss)
    assert miss["stages"]  # the first process compiled
    printed, hit, _ = run()
    _answers_right(printed, hit)
    assert hit["stages"] == []
    assert hit["fault"] == miss["fault"]  # the same message, line and excerpt


@needs_cc
def test_an_entry_another_pullback_made_is_not_used(run):
    run()
    printed, other, _ = run("another-pullback")
    _answers_right(printed, other)
    assert other["stages"]
    assert run()[1]["stages"] == []  # the first entry is still there


@needs_cc
@pytest.mark.parametrize("damage", ["index", "module"])
def test_a_damaged_entry_is_said_and_rebuilt(run, damage):
    """A damaged index entry, or a damaged module it names: the stages run again (the
    damage said, as for any cache entry), and the next process finds the module."""
    run()
    (path,) = run.cache.glob("index-*.json" if damage == "index" else "pb_*.so")
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    printed, rebuilt, stderr = run()
    _answers_right(printed, rebuilt)
    assert rebuilt["stages"]
    assert "is damaged" in stderr and "rebuilding it" in stderr
    assert run()[1]["stages"] == []


@needs_cc
def test_a_missing_library_is_a_miss(run):
    run()
    for path in run.cache.glob("libpbglue-*.so"):
        path.unlink()
    printed, rebuilt, _ = run()
    _answers_right(printed, rebuilt)
    assert rebuilt["stages"]
