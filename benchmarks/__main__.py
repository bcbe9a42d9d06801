"""Every workload against every installed peer, and the results as markdown.

    python -m benchmarks [--quick] [--only eltwise,mlp] [--threads 1|2|both]
                         [--systems numpy,jax] [--results PATH] [--section training]

Each workload script (``benchmarks/<name>.py``) runs in turn, its tables printed as it
goes; then ``benchmarks/RESULTS.md`` gets a summary (per measurement: pullback, the best
peer and the ratio, the ratio to each physical bound), every table, and what the run
ran on: date, CPU, thread settings, versions.  The GradBench section of RESULTS.md
(``python -m benchmarks.gradbench``) is kept as it was.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import results  # noqa: E402

WORKLOADS = ("eltwise", "mlp", "rnn_loop", "while_ode", "scalar_loop", "dispatch",
             "cache_hit", "per_example_grads", "batched_newton", "jacobian", "gp", "heat",
             "train_cnn", "train_lm")
PACKAGES = ("numpy", "scipy-openblas32", "jax", "jaxlib", "optax", "torch", "numba", "autograd",
            "scikit-learn")
ENVIRONMENT = ("PULLBACK_NUM_THREADS", "PULLBACK_GEMM", "OPENBLAS_CORETYPE",
               "OMP_WAIT_POLICY")


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, shorter timings")
    p.add_argument("--only", default=",".join(WORKLOADS), help="workloads to run")
    p.add_argument("--threads", default=None, choices=["1", "2", "both"],
                   help="thread counts (default: both, or 1 with --quick)")
    p.add_argument("--systems", default=None, help="peers to run (the scripts' --only)")
    p.add_argument("--results", default=str(results.PATH), help="markdown to write")
    p.add_argument("--section", default="workloads", choices=results.ORDER[:-1],
                   help="the section of the markdown these results replace")
    args = p.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    threads = args.threads or ("1" if args.quick else "both")
    start = time.perf_counter()
    _installed_bytecode()
    runs, failed = {}, []
    for name in names:
        run, rc = _run(name, args.quick, threads, args.systems)
        runs[name] = run
        if rc:
            failed.append(name)
    text = _markdown(runs, args.quick, threads, time.perf_counter() - start)
    path = Path(args.results)
    results.write_section(args.section, text, path)
    print(f"\nwrote {path} ({time.perf_counter() - start:.0f} s)"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _installed_bytecode() -> None:
    """pullback's modules compiled to bytecode up front, as pip does when it installs a
    wheel: from a checkout under PYTHONDONTWRITEBYTECODE, every measured process (a cache
    hit's, a first call's) would compile pullback's source again."""
    spec = importlib.util.find_spec("pullback")
    for where in spec.submodule_search_locations if spec else ():
        compileall.compile_dir(where, quiet=1)


def _run(name: str, quick: bool, threads: str, systems: str | None) -> tuple[dict, int]:
    """One workload script (its children per thread count), its JSON read back."""
    fd, tmp = tempfile.mkstemp(suffix=".json", prefix=f"pb_bench_{name}_")
    os.close(fd)
    cmd = [sys.executable, str(HERE / f"{name}.py"), "--threads", threads, "--json", tmp,
           *(["--quick"] if quick else []), *(["--only", systems] if systems else [])]
    print(f"=== {name}: {' '.join(cmd[1:])}", flush=True)
    rc = subprocess.run(cmd).returncode
    try:
        run = json.loads(Path(tmp).read_text())
    except (OSError, ValueError):
        run = {"workload": name, "runs": {}}
    finally:
        os.unlink(tmp)
    return run, rc


def _markdown(runs: dict[str, dict], quick: bool, threads: str, seconds: float) -> str:
    machine = next((r for r in runs.values() if "cpu" in r), None) or H.cpu()
    lines = ["# Benchmarks: pullback against its peers", "",
             f"Run {datetime.datetime.now().isoformat(timespec='minutes')} with "
             f"`python -m benchmarks{' --quick' if quick else ''}` in {seconds:.0f} s on "
             f"{H.cpu_line(machine)}, {len(os.sched_getaffinity(0))} of them usable, threads: "
             f"{threads}.", "",
             f"Versions: {_versions()}.", "",
             f"Environment of the command (a record; the scripts pass none of "
             f"{', '.join(H.NOT_PASSED)} on): {_environment()}.", "",
             "Times are medians; a ratio below 1 means pullback takes less time. The best "
             "peer is the fastest installed peer on the same measurement; a bound is a "
             "physical limit measured in the same run (bandwidth, BLAS GEMM time).", "",
             "## Summary", "",
             "| workload | threads | what | pullback | best peer | pullback / best peer "
             "| pullback / bound |",
             "|---|---:|---|---:|---|---:|---|"]
    tables = []
    for name, run in runs.items():
        unit = run.get("unit", "ms")
        scale = 1e6 if unit == "us" else 1e3
        for n, result in run.get("runs", {}).items():
            tables.append(H.table(name, int(n), result, bool(run.get("quick")), unit))
            for what, v in H.verdicts(result).items():
                pb, peer = v["pb"], v["peer"]
                ours = _time(pb, scale, unit)
                best = f"{peer['system']}: {_time(peer, scale, unit)}" if peer else "-"
                ratio = f"{v['peer_ratio']:.2f}" if peer else "-"
                bounds = "; ".join(f"{x:.2f} ({system})" for system, x in v["bounds"]) or "-"
                lines.append(f"| {name} | {n} | {what} | {ours} | {best} | {ratio} | "
                             f"{bounds} |")
        if not run.get("runs"):
            lines.append(f"| {name} | - | FAILED: no results | - | - | - | - |")
    lines += ["", "## Tables", "", *tables]
    return "\n".join(lines)


def _time(row: dict, scale: float, unit: str) -> str:
    if row.get("median_s"):
        return f"{row['median_s'] * scale:.3g} {unit}"
    return f"{row['first_s']:.3g} s (first call)" if row.get("first_s") else "-"


def _versions() -> str:
    found = [f"Python {platform.python_version()}"]
    for name in ("pullback", *PACKAGES):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def _environment() -> str:
    return ", ".join(f"{k}={os.environ.get(k, '(unset)')}" for k in ENVIRONMENT)


if __name__ == "__main__":
    sys.exit(main())
