"""Tables of GradBench runs: ``python -m benchmarks.gradbench.summarize DIR [--out FILE]``.

DIR holds the ``--summary-json`` files that the intermediary
(``../shared/gradbench/run.py``) wrote, named ``EVAL_TOOL.json``. Prints markdown: per
eval, pullback's validity and its time relative to each other tool (geometric mean over
the evaluations both ran), then per eval and function the median times at the largest
size every tool ran.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

TOOLS = ("pullback", "manual", "jax", "pytorch")


def load(directory: Path) -> dict[str, dict[str, dict]]:
    """{eval: {tool: summary}} from the EVAL_TOOL.json files in ``directory``."""
    runs: dict[str, dict[str, dict]] = {}
    for path in sorted(directory.glob("*_*.json")):
        data = json.loads(path.read_text())
        runs.setdefault(data["eval"], {})[data["tool"]] = data
    return runs


def _rows(summary: dict) -> dict[tuple[str, str], dict]:
    return {(r["function"], r["description"] or ""): r for r in summary["rows"]}


def _fmt(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.3g}" if ms < 1000 else f"{ms:,.0f}"


def overview(runs: dict[str, dict[str, dict]]) -> list[str]:
    """One line per eval: validity, row count, geometric-mean ratios, compile time."""
    peers = [t for t in TOOLS[1:] if any(t in r for r in runs.values())]
    head = ["eval", "pullback valid", *[f"pullback / {p}" for p in peers],
            "pullback / fastest", "pullback compile (s, total)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, tools in runs.items():
        if "pullback" not in tools:
            continue
        ours = _rows(tools["pullback"])
        valid = sum(r["status"] == "valid" for r in ours.values())
        cells = [name, f"{valid}/{len(ours)}"]
        best_logs = []
        for peer in peers:
            if peer not in tools:
                cells.append("-")
                continue
            theirs = _rows(tools[peer])
            logs = [math.log(ours[k]["median_ms"] / theirs[k]["median_ms"])
                    for k in ours if k in theirs and ours[k]["median_ms"]
                    and theirs[k]["median_ms"] and theirs[k]["status"] == "valid"]
            cells.append(f"{math.exp(sum(logs) / len(logs)):.3g}x" if logs else "-")
        for key, row in ours.items():
            others = [tools[p] and _rows(tools[p]).get(key) for p in peers if p in tools]
            times = [o["median_ms"] for o in others
                     if o and o["median_ms"] and o["status"] == "valid"]
            if times and row["median_ms"]:
                best_logs.append(math.log(row["median_ms"] / min(times)))
        cells.append(f"{math.exp(sum(best_logs) / len(best_logs)):.3g}x" if best_logs else "-")
        compile_ms = sum(r.get("other_ms", {}).get("compile", 0.0) for r in ours.values())
        cells.append(f"{compile_ms / 1000:.1f}")
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
    """Both tables as markdown."""
    return "\n".join(["### Per eval (geometric mean of time ratios over all evaluations)", "",
                      *overview(runs), "",
                      "### Median evaluate time (ms) at the largest size", "",
                      *largest(runs), ""])


def main() -> None:
    """Print (or write) both tables."""
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
