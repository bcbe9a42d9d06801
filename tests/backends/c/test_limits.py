"""What compiled code takes of the machine: the thread count PULLBACK_NUM_THREADS sets
(checked: a value OpenMP cannot use crashed the process), parallel loops in a child
forked after they ran (the child hung), and the memory compiled functions keep between
calls (PULLBACK_KEEP_MB, all of it handed back when a compiled function is collected:
it was never released).  Each runs in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import child_env
from pullback import config
from pullback.backends.c.build import compiler
from pullback.backends.c.call import limits

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")



def run(tmp_path: Path, program: str, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """program in a new process (from a file: pullback stages source), its environment
    changed by env; its last line of output is JSON."""
    script = tmp_path / "program.py"
    script.write_text(program)
    return subprocess.run([sys.executable, str(script)], env=child_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def last_json(proc: subprocess.CompletedProcess[str]):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


#: A parallel reduction (a million elements: every thread takes part) and a product
#: large enough for threads, in the parent and then in two forked children.
FORK = """
import json, multiprocessing
import numpy as np
import pullback as pb

def reduce(x):
    return np.sum(np.sin(x) * 2.0)

def product(a, b):
    return np.tanh(a @ b)

rng = np.random.default_rng(0)
x = rng.standard_normal(1_000_000)
a, b = rng.standard_normal((2, 300, 300))
jit_reduce, jit_product = pb.jit(reduce, backend="c"), pb.jit(product, backend="c")

def work(k):
    return [float(jit_reduce(x * k)), jit_product(a * k, b).tolist()]

if __name__ == "__main__":
    parent = work(1.0)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        children = pool.map(work, [1.0, 2.0])
    print(json.dumps([parent, *children]))
"""


def test_a_child_forked_after_parallel_loops_runs_them(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1_000_000)
    a, b = rng.standard_normal((2, 300, 300))
    results = last_json(run(tmp_path, FORK, {"PULLBACK_NUM_THREADS": "2"}, timeout=60))
    for (total, product), k in zip(results, [1.0, 1.0, 2.0], strict=True):
        assert total == pytest.approx(np.sum(np.sin(x * k) * 2.0), rel=1e-12)
        np.testing.assert_allclose(product, np.tanh((a * k) @ b), rtol=1e-12, atol=1e-14)


SUM = """
import json
import numpy as np
import pullback as pb

x = np.linspace(0.0, 3.0, 1_000_000)
print(json.dumps(float(pb.jit(lambda x: np.sum(np.sin(x) * 2.0), backend="c")(x))))
"""


def test_too_many_threads_are_lowered_with_a_warning(tmp_path):
    """65536 threads overflowed the stack libgomp starts a team from: a segfault."""
    proc = run(tmp_path, SUM, {"PULLBACK_NUM_THREADS": "65536"})
    x = np.linspace(0.0, 3.0, 1_000_000)
    assert last_json(proc) == pytest.approx(np.sum(np.sin(x) * 2.0), rel=1e-12)
    most = limits.THREADS_PER_CPU * (os.cpu_count() or 1)
    assert "PULLBACK_NUM_THREADS=65536 is more than" in proc.stderr
    assert f"using {most}" in proc.stderr


def test_a_thread_count_that_is_no_positive_whole_number_is_an_error(tmp_path):
    """It was ignored (any value atoi read as 0 or less), or read as its leading digits."""
    proc = run(tmp_path, SUM, {"PULLBACK_NUM_THREADS": "four"})
    assert proc.returncode == 1
    assert "PULLBACK_NUM_THREADS='four' is not a whole number of at least 1" in proc.stderr


@pytest.mark.parametrize("value", ["0", "-2", "2.5", "3 threads"])
def test_thread_counts_are_checked(monkeypatch, value):
    monkeypatch.setenv(limits.THREADS_ENV, value)
    limits.num_threads.cache_clear()
    try:
        with pytest.raises(config.SettingError, match=limits.THREADS_ENV):
            limits.num_threads()
    finally:
        limits.num_threads.cache_clear()


#: Three gradients of a loop on data, each with an AD tape of 100,000 steps of 40
#: float64 (32 MB), then one compiled function of its own, collected after its call;
#: the resident memory (MiB) after each stage, and the gradients (twice: the second
#: call runs on what the first kept).
MEMORY = """
import gc, json
import numpy as np
import pullback as pb

def resident():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

def loop(x, n):
    i = 0
    while i < n:
        x = x + 1e-5 * np.sin(x)
        i += 1
    return np.sum(x)

x = np.linspace(0.25, 0.75, 40)
n = np.int64(100_000)
# three different modules (one module, loaded once, keeps one pool whatever calls it)
grads = [pb.jit(pb.grad(f), backend="c") for f in (lambda x, n: loop(x * 1.0, n),
                                                   lambda x, n: loop(x * 2.0, n),
                                                   lambda x, n: loop(x * 3.0, n))]
for g in grads:
    g(x, np.int64(1))  # compiled and loaded: what is measured next is tape
start = resident()
first = [g(x, n).tolist() for g in grads]
after_calls = resident()
again = [g(x, n).tolist() for g in grads]
compiled = pb.jit(pb.grad(lambda x, n: loop(x * 4.0, n)), backend="c").lower(x, n).compile()
args = lambda n: [x if t.shape else n for t in compiled.in_types]
compiled(*args(np.int64(1)))
before_own = resident()
compiled(*args(n))
holding = resident()
del compiled
gc.collect()
print(json.dumps({"start": start, "after_calls": after_calls, "before_own": before_own,
                  "holding": holding, "released": resident(), "first": first,
                  "again": again}))
"""


def _loop_gradients(x: np.ndarray, ks: tuple[float, ...], n: int) -> np.ndarray:
    """d/dx sum(loop(k x, n)) for each k, by the chain rule step by step in NumPy."""
    y = np.outer(ks, x)
    dy = np.outer(ks, np.ones_like(x))
    for _ in range(n):
        dy = dy * (1.0 + 1e-5 * np.cos(y))
        y = y + 1e-5 * np.sin(y)
    return dy


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_memory_kept_between_calls_is_bounded_and_released_on_collection(tmp_path):
    """Three gradients with 32 MB tapes used to keep all 96 MB for good, and a compiled
    function collected kept its memory too.  With PULLBACK_KEEP_MB=8 the three keep 8
    MB together; a collected function (its tape kept: the three leave no room at 8 MB,
    so here the limit is the default) hands all of its memory back."""
    x = np.linspace(0.25, 0.75, 40)
    small = last_json(run(tmp_path, MEMORY, {"PULLBACK_KEEP_MB": "8"}))
    np.testing.assert_allclose(small["first"], _loop_gradients(x, (1.0, 2.0, 3.0), 100_000),
                               rtol=1e-9)
    assert small["again"] == small["first"]
    assert small["after_calls"] - small["start"] < 8 + 12
    default = last_json(run(tmp_path, MEMORY))
    assert default["after_calls"] - default["start"] > 80  # 3 x 32 MB kept, < 256 MB
    assert default["holding"] - default["before_own"] > 28  # its 32 MB tape kept
    assert default["released"] - default["before_own"] < 6
    print(f"\nresident MiB: PULLBACK_KEEP_MB=8: +{small['after_calls'] - small['start']:.1f} "
          f"after three 32 MB tapes; default: +{default['after_calls'] - default['start']:.1f}"
          f", a function's own +{default['holding'] - default['before_own']:.1f}, "
          f"+{default['released'] - default['before_own']:.1f} once collected")
