"""Run GradBench evals against pullback and its peers: ``python -m benchmarks.gradbench``.

    python -m benchmarks.gradbench --gradbench /path/to/gradbench --eval gmm lse

For each eval, runs the eval process against pullback's tool and, where GradBench has
them, the ``manual`` (hand-written C++, built with ``make -C cpp && make -C
tools/manual``), ``jax`` and ``pytorch`` tools, one after the other, single-threaded and
without the caller's choice of BLAS kernels (``_harness.NOT_PASSED``), through the
intermediary ``../shared/gradbench/run.py``; then writes the tables of ``summarize.py``
(validity, ratios to each tool and to the fastest) into the GradBench section of
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import results
from .._harness import NOT_PASSED
from . import summarize
from .tool import EVALS

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
INTERMEDIARY = REPO.parent / "shared" / "gradbench" / "run.py"
SINGLE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
          "PULLBACK_NUM_THREADS": "1"}


def tool_command(tool: str) -> str:
    """The shell command, run in the GradBench tree, that starts ``tool``."""
    if tool == "pullback":
        return f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m " \
               "benchmarks.gradbench.tool"
    if tool == "manual":
        return "python3 python/gradbench/gradbench/cpp.py manual"
    script = f"python/gradbench/gradbench/tools/{tool}/run.py"
    if tool == "jax":
        sync = INTERMEDIARY.parent / "jax_sync_tool.py"
        return f"PYTHONPATH=python/gradbench python3 {shlex.quote(str(sync))} {script}"
    return f"PYTHONPATH=python/gradbench python3 {script}"


def supports(tool: str, name: str, gradbench: Path) -> bool:
    """Whether GradBench's ``tool`` implements eval ``name``."""
    if tool == "pullback":
        return True
    if tool == "manual":
        listed = gradbench / "tools" / "manual" / "evals.txt"
        return listed.exists() and name in listed.read_text().split() and \
            (gradbench / "tools" / "manual" / "bin" / name).exists()
    return (gradbench / "python" / "gradbench" / "gradbench" / "tools" / tool /
            f"{name}.py").exists()


def run_one(name: str, tool: str, gradbench: Path, logdir: Path, eval_args: str,
            timeout: float, env: dict[str, str] | None = None) -> int:
    """One eval against one tool (``env``: more environment for it); the
    intermediary's exit status."""
    eval_cmd = (f"PYTHONPATH=python/gradbench python3 "
                f"python/gradbench/gradbench/evals/{name}/run.py {eval_args}")
    cmd = [sys.executable, str(INTERMEDIARY), "--eval", eval_cmd,
           "--tool", tool_command(tool), "--total-timeout", str(timeout),
           "--log", str(logdir / f"{name}_{tool}.jsonl"),
           "--summary-json", str(logdir / f"{name}_{tool}.json")]
    inherited = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    return subprocess.call(cmd, cwd=gradbench, env=inherited | SINGLE | (env or {}))


def start_up(env: dict[str, str]) -> None:
    """pullback's one-time start-up (compiler probes, runtime libraries, measurements of
    the machine) in the cache directory ``env`` names, in a process of its own, as the
    workloads' harness makes it before their first calls (``_harness.warm_pullback``)."""
    code = "from benchmarks import _harness; _harness.warm_pullback()"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                   env={k: v for k, v in os.environ.items() if k not in NOT_PASSED}
                   | SINGLE | env,
                   stdout=subprocess.DEVNULL)
    print(f"pullback's one-time start-up: {time.perf_counter() - t0:.2f} s (not in compile)",
          flush=True)


def main() -> None:
    """Parse the options, run every (eval, tool) pair, write the tables."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gradbench", type=Path, required=True, help="a GradBench work tree")
    p.add_argument("--eval", nargs="+", default=list(EVALS), choices=EVALS)
    p.add_argument("--tools", default="pullback,manual,jax,pytorch")
    p.add_argument("--eval-args", default="--min-runs 3 --min-seconds 0.3",
                   help="passed to every eval (sizes, runs)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per eval and tool")
    p.add_argument("--logdir", type=Path, default=Path("gradbench-logs"))
    p.add_argument("--cold-cache", action="store_true",
                   help="pullback builds every specialisation afresh (a cache directory "
                        "per eval holding only the machine's one-time start-up, made "
                        "before the eval), so its compile column counts the C builds")
    p.add_argument("--out", type=Path, default=results.PATH,
                   help="markdown whose GradBench section the tables replace")
    args = p.parse_args()
    args.logdir.mkdir(parents=True, exist_ok=True)
    gradbench = args.gradbench.resolve()
    for name in args.eval:
        for tool in args.tools.split(","):
            if supports(tool, name, gradbench):
                extra = args.eval_args if name != "hello" else ""
                env = {}
                if tool == "pullback" and args.cold_cache:
                    env["PULLBACK_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"pb-{name}-")
                    start_up(env)
                status = run_one(name, tool, gradbench, args.logdir.resolve(), extra,
                                 args.timeout, env)
                if "PULLBACK_CACHE_DIR" in env:
                    shutil.rmtree(env["PULLBACK_CACHE_DIR"], ignore_errors=True)
                print(f"{name} / {tool}: exit {status}", flush=True)
    runs = summarize.load(args.logdir)
    results.write_section("gradbench", summarize.render(runs), args.out)
    print(summarize.render(runs))


if __name__ == "__main__":
    main()
