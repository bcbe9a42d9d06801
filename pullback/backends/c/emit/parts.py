"""A large function's top-level statements cut into parts, each a function of its own,
so that the build compiles them as separate translation units at once on several cores
(``build/units.py``).  The function itself keeps its arena and calls its parts in order.

A part receives those of the function's parameters it reads (passing all of them made
every call and prototype as long as the parameter list: a transformer's training step,
240 parameters, 31 parts, spent 1.1 s of GCC on the function calling them and 7.4 s in
all, against 0.1 s and 4.5 s passing only those read; AMD EPYC, GCC 12, CPU time) and
its arena; a top-level variable another part declared is declared again from the arena
or the parameters where its declaration can be repeated (an arena buffer, a view never
reassigned: the C compiler still sees where it points, as in one function), else passed
by address: the part copies it in, works on its own copy, and writes it back before it
returns.  In a module compiled as one file the parts are ``static`` functions called
once, which the compiler inlines back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..build import units
from ..build.units import MARK, PART

#: The fewest lines of C a part has (the last one may have fewer, down to half) where
#: the module compiles on several cores: a function of fewer lines is not cut.  A
#: transformer's training step (3,500 lines in one function) made 12 parts of 300
#: lines, dealt to two units of 1.9 and 2.2 s of GCC, against 5.0 s as one function
#: (600 lines: 6 parts, 2.3 and 3.9 s).  At 100 lines mid-size modules are cut too: the
#: RNN benchmark's gradient (250 lines) compiles as two units of 0.11 and 0.10 s against
#: 0.17 s as one, the MLP step's largest unit takes 0.28 s against 0.32 s (AMD EPYC,
#: 2 cores, AVX2; CPU-time minima of 9 and 5, one core each).
PART_LINES = 100
#: The same on one core, where the module compiles as one file and its parts are
#: inlined back (kept as it was: cutting at ``PART_LINES`` there cost 3-4% more GCC
#: time on those two modules, within the noise of a busy machine).
ONE_CORE_PART_LINES = 300

_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass
class TopVar:
    """A variable a function's body declares at its top level: its C type, the statement
    it is declared by (its index in the body), and the declaration a part may repeat
    instead of receiving it (None: it is passed by address)."""

    ctype: str
    stmt: int
    again: str | None


def outline(name: str, params: list[str], args: list[str], arena: bool, head: list[str],
            stmts: list[list[str]], top: dict[str, TopVar], assigned: set[str],
            tail: list[str]) -> tuple[list[str], list[str]] | None:
    """The function's own body and its parts' text (each followed by ``MARK``), or None
    when it is too small to cut.  ``params``, ``args``: its parameters as declared and
    as passed; ``arena``: whether it has one; ``head``: the lines before its statements
    (taking the arena), which stay in it; ``stmts``: each top-level statement's lines;
    ``assigned``: the names some statement assigns after declaring; ``tail``: its
    closing lines (from ``return 0;``), which every part repeats."""
    groups = _groups(stmts)
    if len(groups) < 2 or any(a in assigned for a in args):
        return None
    again = _repeatable(top, assigned)
    texts = ["\n".join(line for k in range(lo, hi) for line in stmts[k]) for lo, hi in groups]
    used = [set(_IDENTIFIER.findall(text)) for text in texts]
    body, parts = list(head), []
    shared: set[str] = set()
    for p, ((lo, hi), text) in enumerate(zip(groups, texts, strict=True)):
        later = set().union(*used[p + 1:])
        inward = sorted((v for v in used[p] if v in top and top[v].stmt < lo),
                        key=lambda v: top[v].stmt)
        outward = sorted(v for v in top if lo <= top[v].stmt < hi and v in later
                         and v not in again)
        by_address = [v for v in inward if v not in again] + outward
        shared.update(by_address)
        redeclared = _with_dependencies([v for v in inward if v in again], top, again)
        part = f"{name}_part{p}"
        reads = used[p].union(*(_IDENTIFIER.findall(top[v].again or "") for v in redeclared))
        taken = [k for k, a in enumerate(args) if a in reads]
        signature = ", ".join(["pb_ctx *ctx", *(params[k] for k in taken),
                               *(["char *pb_arena"] if arena else []),
                               *(f"{top[v].ctype} *pb_at_{v}" for v in by_address)])
        lines = [f"{PART} int {part}({signature}) {{"]
        if "pb_ticks" in text:
            lines.append("    int64_t pb_ticks = PB_POLL_TICKS;")
        lines += [f"    {top[v].again}" for v in redeclared]
        lines += [f"    {top[v].ctype} {v} = *pb_at_{v};" for v in by_address if v not in outward]
        lines.append(text)
        lines += [f"    *pb_at_{v} = {v};" for v in by_address]
        parts += [*lines, *tail, "}", MARK]
        call_args = ", ".join(["ctx", *(args[k] for k in taken),
                               *(["pb_arena"] if arena else []),
                               *(f"&{v}" for v in by_address)])
        body.append(f"    if ({part}({call_args})) goto fail;")
    body[len(head):len(head)] = [f"    {top[v].ctype} {v} = 0;"
                                 for v in sorted(shared, key=lambda v: top[v].stmt)]
    return body, parts


def _groups(stmts: list[list[str]]) -> list[tuple[int, int]]:
    """Consecutive statements in runs of at least ``PART_LINES`` lines (on one core
    ``ONE_CORE_PART_LINES``), a short last run (under half of that) joined to the one
    before."""
    least = PART_LINES if units.usable_cores() > 1 else ONE_CORE_PART_LINES
    groups, start, lines = [], 0, 0
    for k, stmt in enumerate(stmts):
        lines += len(stmt)
        if lines >= least:
            groups.append((start, k + 1))
            start, lines = k + 1, 0
    if start < len(stmts):
        if groups and lines < least // 2:
            groups[-1] = (groups[-1][0], len(stmts))
        else:
            groups.append((start, len(stmts)))
    return groups


def _repeatable(top: dict[str, TopVar], assigned: set[str]) -> set[str]:
    """The variables whose declaration a part may repeat: never assigned again, and
    their declaration reads only parameters, the arena and other such variables."""
    again: set[str] = set()
    for v in sorted(top, key=lambda v: top[v].stmt):
        text = top[v].again
        if text is None or v in assigned:
            continue
        reads = set(_IDENTIFIER.findall(text.split("=", 1)[1])) & top.keys()
        if reads <= again:
            again.add(v)
    return again


def _with_dependencies(names: list[str], top: dict[str, TopVar], again: set[str]
                       ) -> list[str]:
    """The names and the repeatable variables their declarations read, in declaration
    order."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        todo += [u for u in _IDENTIFIER.findall(top[v].again.split("=", 1)[1])  # type: ignore[union-attr]
                 if u in again]
    return sorted(seen, key=lambda v: top[v].stmt)
