"""``benchmarks/RESULTS.md``: one section per command that writes it (the workloads of
``python -m benchmarks``, the training steps of ``python -m benchmarks --only
train_cnn,train_lm --section training``, the evals of ``python -m benchmarks.gradbench``,
and ``machines``, runs on other machines written in by hand from their logs), each
rewritten by its own command and kept by the others."""

from __future__ import annotations

import re
from pathlib import Path

PATH = Path(__file__).resolve().with_name("RESULTS.md")
ORDER = ("workloads", "training", "gradbench", "machines")


def write_section(name: str, text: str, path: Path = PATH) -> None:
    """Replace section ``name`` of the file at ``path`` with ``text`` (sections in
    ``ORDER``; the file is made if missing)."""
    old = path.read_text() if path.exists() else ""
    sections = {n: _section(old, n) for n in ORDER}
    sections[name] = f"<!-- begin {name} -->\n{text.strip()}\n<!-- end {name} -->\n"
    path.write_text("\n".join(s for s in sections.values() if s))


def _section(text: str, name: str) -> str:
    found = re.search(rf"<!-- begin {name} -->\n.*?<!-- end {name} -->\n", text, re.S)
    return found[0] if found else ""
