"""Tables of GradBench runs: ``python -m benchmarks.gradbench.summarize DIR [--out FILE]``.

DIR holds the ``--summary-json`` files that the intermediary
(``../shared/gradbench/run.py``) wrote, named ``EVAL_TOOL.json``. Prints markdown: per
eval, pullback's validity and its time relative to each other tool (geometric mean over
the evaluations both ran) with its total compile time beside JAX's, then the same ratios
per function, then per eval and function the median times at the largest size every
tool ran.

Compile times: pullback's tool reports each evaluation's first (compiling) call as a
timing of its own named ``compile``; GradBench's JAX tool reports none, its first timed
run includes the compilation, so JAX's compile is that first run less the median of the
runs (read from the intermediary's ``EVAL_TOOL.jsonl`` log beside the summary).
pullback's is its ``compile`` timings, each less one run (the compiling call also ran
the function once), plus the same excess of its first runs (what a native build
finishing after the first call cost them, in logs of tools that did not wait for it).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

TOOLS = ("pullback", "manual", "jax", "pytorch")


def load(directory: Path) -> dict[str, dict[str, dict]]:
    """{eval: {tool: summary}} from the EVAL_TOOL.json files in ``directory``; each
    summary gets ``first_run_compile_ms``, the compile time its log's first runs show."""
    runs: dict[str, dict[str, dict]] = {}
    for path in sorted(directory.glob("*_*.json")):
        data = json.loads(path.read_text())
        runs.setdefault(data["eval"], {})[data["tool"]] = data
        log = path.with_suffix(".jsonl")
        if log.exists():
            data["first_run_compile_ms"] = first_run_excess(log)
    return runs


def first_run_excess(log: Path) -> float:
    """Over every evaluation of an intermediary's log, the first evaluate timing less
    the median of them all, in ms: the compilation of a tool that compiles on its first
    timed call."""
    total = 0.0
    with log.open() as lines:
        for line in lines:
            if '"timings"' not in line:
                continue
            response = json.loads(line).get("response") or {}
            runs = [t["nanoseconds"] for t in response.get("timings") or []
                    if t.get("name") == "evaluate"]
            if len(runs) > 1:
                total += max(0.0, runs[0] - statistics.median(runs)) / 1e6
    return total


def _rows(summary: dict) -> dict[tuple[str, str], dict]:
    return {(r["function"], r["description"] or ""): r for r in summary["rows"]}


def _fmt(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.3g}" if ms < 1000 else f"{ms:,.0f}"


def _logs(ours: dict, theirs: dict, keys) -> list[float]:
    """log(pullback / peer) over ``keys`` both timed, the peer validly."""
    return [math.log(ours[k]["median_ms"] / theirs[k]["median_ms"]) for k in keys
            if k in ours and k in theirs and ours[k]["median_ms"] and
            theirs[k]["median_ms"] and theirs[k]["status"] == "valid"]


def _geomean(logs: list[float], worst: bool = False) -> str:
    if not logs:
        return "-"
    mean = f"{math.exp(sum(logs) / len(logs)):.3g}x"
    return f"{mean} ({math.exp(max(logs)):.3g}x)" if worst and len(logs) > 1 else mean


def _fastest_logs(tools: dict, peers: list[str], keys) -> list[float]:
    """log(pullback / the fastest valid peer) over ``keys``."""
    ours = _rows(tools["pullback"])
    theirs = [_rows(tools[p]) for p in peers if p in tools]
    out = []
    for key in keys:
        times = [t[key]["median_ms"] for t in theirs
                 if key in t and t[key]["median_ms"] and t[key]["status"] == "valid"]
        if times and ours[key]["median_ms"]:
            out.append(math.log(ours[key]["median_ms"] / min(times)))
    return out


def _peers(runs: dict[str, dict[str, dict]]) -> list[str]:
    return [t for t in TOOLS[1:] if any(t in r for r in runs.values())]


def overview(runs: dict[str, dict[str, dict]]) -> list[str]:
    """One line per eval: validity, geometric-mean ratios, compile times (pullback's
    first calls and the excess of its first runs, JAX's first runs less their medians)."""
    peers = _peers(runs)
    head = ["eval", "pullback valid", *[f"pullback / {p}" for p in peers],
            "pullback / fastest", "pullback compile (s, total)", "jax compile (s, total)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, tools in runs.items():
        if "pullback" not in tools:
            continue
        ours = _rows(tools["pullback"])
        valid = sum(r["status"] == "valid" for r in ours.values())
        cells = [name, f"{valid}/{len(ours)}"]
        cells += [_geomean(_logs(ours, _rows(tools[p]), ours)) if p in tools else "-"
                  for p in peers]
        cells.append(_geomean(_fastest_logs(tools, peers, ours)))
        compile_ms = (sum(_compile_ms(r) for r in ours.values())
                      + tools["pullback"].get("first_run_compile_ms", 0.0))
        cells.append(f"{compile_ms / 1000:.1f}")
        jax_ms = tools.get("jax", {}).get("first_run_compile_ms")
        cells.append("-" if jax_ms is None else f"{jax_ms / 1000:.1f}")
        out.append("| " + " | ".join(cells) + " |")
    return out


def _compile_ms(row: dict) -> float:
    """An evaluation's compiling first call less one run (its median), as JAX's first
    run is counted less its median: what compiling added."""
    first = row.get("other_ms", {}).get("compile", 0.0)
    return max(0.0, first - (row["median_ms"] or 0.0)) if first else 0.0


def per_function(runs: dict[str, dict[str, dict]]) -> list[str]:
    """One line per eval function: pullback's time relative to each peer's, the
    geometric mean over the sizes both ran (the largest ratio in brackets)."""
    peers = _peers(runs)
    head = ["eval", "function", "sizes", *[f"pullback / {p}" for p in peers],
            "pullback / fastest"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, tools in runs.items():
        if "pullback" not in tools:
            continue
        ours = _rows(tools["pullback"])
        functions: dict[str, list[tuple[str, str]]] = {}
        for key in ours:
            functions.setdefault(key[0], []).append(key)
        for function, keys in functions.items():
            cells = [name, function, str(len(keys))]
            cells += [_geomean(_logs(ours, _rows(tools[p]), keys), worst=True)
                      if p in tools else "-" for p in peers]
            cells.append(_geomean(_fastest_logs(tools, peers, keys), worst=True))
            out.append("| " + " | ".join(cells) + " |")
    return out


def largest(runs: dict[str, dict[str, dict]]) -> list[str]:
    """Median ms per tool for each eval function at the last size pullback ran."""
    head = ["eval", "function", "size", *TOOLS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, tools in runs.items():
        if "pullback" not in tools:
            continue
        ours = _rows(tools["pullback"])
        last: dict[str, tuple[str, str]] = {}
        for key in ours:
            last[key[0]] = key
        for function, key in last.items():
            cells = [name, function, key[1]]
            for tool in TOOLS:
                row = _rows(tools[tool]).get(key) if tool in tools else None
                mark = "" if row is None or row["status"] == "valid" else " (invalid)"
                cells.append(_fmt(row["median_ms"] if row else None) + mark)
            out.append("| " + " | ".join(cells) + " |")
    return out


def render(runs: dict[str, dict[str, dict]]) -> str:
    """The tables as markdown."""
    return "\n".join(["### Per eval (geometric mean of time ratios over all evaluations)", "",
                      *overview(runs), "",
                      "### Per function (geometric mean over sizes; the largest ratio in "
                      "brackets)", "", *per_function(runs), "",
                      "### Median evaluate time (ms) at the largest size", "",
                      *largest(runs), ""])


def main() -> None:
    """Print (or write) the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    text = render(load(args.directory))
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
