"""A module's C as several translation units, compiled at once on several cores.

A C compiler is one process per file, and a large module's one file kept one core busy
while the others idled (a transformer's training step: 5.6 s of GCC on one core).  The
emitter (``emit/parts.py``) cuts a large function into parts, functions of their own,
and marks where the text may be cut (``MARK``); ``units`` makes one file per group of
parts, each with the text before the first mark (includes, constants, prototypes).  A
part is declared ``PART``: ``static`` in a module compiled as one file (the text as
printed), hidden (not exported from the shared object) in one compiled as several
(``PART_FLAG``).
"""

from __future__ import annotations

import contextlib
import os

from .... import config

#: The variable that sets how many threads compiled code runs on.
THREADS_ENV = "PULLBACK_NUM_THREADS"
#: The line the module's text may be cut at.
MARK = "/* pb: unit */"
#: The storage class of a part: ``static`` unless the build defines it.
PART = "PB_PART"
#: The definition a build of several units gives ``PART``.
PART_FLAG = f'-D{PART}=__attribute__((visibility("hidden")))'


def usable_cores() -> int:
    """The cores this process may run on: as many units compile at once."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1


def team_size() -> int:
    """The threads a parallel loop runs on: PULLBACK_NUM_THREADS, else OpenMP's own
    default (OMP_NUM_THREADS's first level, else the CPUs this process may run on)."""
    wanted = config.whole_number(THREADS_ENV, 1)
    if wanted is not None:
        return wanted
    with contextlib.suppress(ValueError):
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0]))
    return usable_cores()


def units(text: str, cores: int) -> list[str]:
    """The translation units of a module's C ``text`` for ``cores`` compilers at once:
    the text itself unless it is marked and cores > 1, else up to ``cores`` files, the
    marked pieces dealt largest first to the unit with the fewest lines so far."""
    head, *pieces = text.split(f"\n{MARK}\n")
    if not pieces or cores < 2:
        return [text]
    groups: list[list[str]] = [[] for _ in range(min(cores, len(pieces)))]
    sizes = [0] * len(groups)
    for piece in sorted(pieces, key=lambda p: -p.count("\n")):
        k = sizes.index(min(sizes))
        groups[k].append(piece)
        sizes[k] += piece.count("\n")
    return ["\n".join([head, *group]) for group in groups]
