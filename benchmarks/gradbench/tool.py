"""The GradBench protocol loop for pullback (``python -m benchmarks.gradbench.tool``).

The eval sends one JSON object per line; we answer each with one line. ``define`` imports
``evals/NAME.py``; ``evaluate`` converts the input (untimed), makes one warm-up call that
compiles the specialisation and is reported as its own timing named ``compile``, then
calls the function at least ``min_runs`` times and for at least ``min_seconds``,
reporting one ``evaluate`` timing per call, like GradBench's own Python tools.

Tiered execution is off in the tool (``PULLBACK_TIERED=0`` unless set): ``compile`` lasts
until the code the evaluations time is ready, so a first call on the interpreter or a
quick build before the optimised one would only add to it (gmm's total: 18.5 s without,
25.1 s with quick builds, AMD EPYC Zen 5).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import IO, Any

os.environ.setdefault("PULLBACK_TIERED", "0")  # before pullback reads it (see above)

from pullback import api as pb_api  # noqa: E402

from ._entry import Entry

TOOL_NAME = "pullback"
EVALS = ("hello", "lse", "llsq", "ode", "det", "saddle", "particle", "kmeans", "gmm",
         "lstm", "ba", "ht")


def load_module(name: str) -> dict[str, Entry]:
    """The ``FUNCTIONS`` table of eval ``name`` (an error for an unknown eval)."""
    if name not in EVALS:
        raise ValueError(f"pullback implements no eval named {name!r}")
    mod = importlib.import_module(f"{__package__}.evals.{name}")
    return mod.FUNCTIONS


def _timed(fn: Any, args: Any) -> tuple[Any, int]:
    start = time.perf_counter_ns()
    out = fn(args)
    return out, time.perf_counter_ns() - start


def _compiled(fn_args: tuple[Any, Any]) -> Any:
    """The first call and every native build it left running (tiered execution runs a
    first call on the interpreter): ``compile`` is the time until native code runs."""
    fn, args = fn_args
    out = fn(args)
    pb_api.finish_builds()
    return out


def evaluate(entry: Entry, raw: Any) -> dict[str, Any]:
    """Run one ``evaluate`` message's function; the response without its id."""
    args = entry.prepare(raw)
    out, compile_ns = _timed(_compiled, (entry.run, args))
    timings = [{"name": "compile", "nanoseconds": compile_ns}]
    min_runs = int(raw.get("min_runs", 1)) if entry.runs else 1
    min_ns = float(raw.get("min_seconds", 0.0)) * 1e9 if entry.runs else 0.0
    total = 0
    times: list[int] = []  # the timing records are made after the loop: a dict made per
    # call would be the tool's garbage collected inside the calls it times
    while len(times) < min_runs or total < min_ns:
        out, ns = _timed(entry.run, args)
        times.append(ns)
        total += ns
    timings += [{"name": "evaluate", "nanoseconds": ns} for ns in times]
    return {"success": True, "output": entry.post(out), "timings": timings}


def _error(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def respond(message: dict[str, Any], modules: dict[str, dict[str, Entry]]) -> dict[str, Any]:
    """The response to one protocol message (``modules`` caches defined evals)."""
    kind = message.get("kind")
    reply: dict[str, Any] = {"id": message.get("id")}
    if kind == "start":
        reply["tool"] = TOOL_NAME
    elif kind == "define":
        try:
            modules[message["module"]] = load_module(message["module"])
            reply["success"] = True
        except Exception as exc:  # the eval reports it; keep serving
            reply.update(success=False, error=_error(exc))
    elif kind == "evaluate":
        try:
            table = modules.get(message["module"]) or load_module(message["module"])
            entry = table[message["function"]]
            reply.update(evaluate(entry, message["input"]))
        except Exception as exc:
            reply.update(success=False, error=_error(exc))
    return reply


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    """Answer messages from ``stdin`` on ``stdout`` until ``end`` or end of input."""
    modules: dict[str, dict[str, Entry]] = {}
    for line in stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("kind") == "end":
            break
        stdout.write(json.dumps(respond(message, modules)) + "\n")
        stdout.flush()


def main() -> None:
    """Serve the protocol on this process's standard input and output."""
    serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
