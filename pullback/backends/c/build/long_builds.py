"""What keeps a C build from running long in silence: a bound on the size of the IR
compiled to C, and a line on stderr when a build takes a while.

A C compiler takes about 2 ms per equation at -O3 (a module of 10,800 equations: 24 s),
and IR that large comes from unrolling: a loop over a Python list, or one whose index
is needed at compile time, is staged once per item.  Beyond ``MAX_EQUATIONS`` the C
backend declines the function (it runs on the interpreter, with a warning saying which
line was repeated and how to keep the loop rolled).
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading
from collections import Counter
from collections.abc import Iterator

from .... import config
from ....ir.core import Module
from ..loops.ir import Unsupported

#: The most equations (nested blocks included) a module compiled to C may have.
MAX_EQUATIONS = 20_000


def check_size(module: Module) -> None:
    """Decline a module too large to build in reasonable time, naming the line whose
    equations repeat most (the body of what was unrolled)."""
    eqns = [e for f in module.funcs.values() for e in f.block.walk()]
    if len(eqns) <= MAX_EQUATIONS:
        return
    lines = Counter((e.loc.file, e.loc.line) for e in eqns if e.loc is not None)
    where = ""
    if lines:
        (file, line), count = lines.most_common(1)[0]
        text = linecache.getline(file, line).strip()
        where = f"; {count} of them are staged from {file}:{line}" + \
            (f" (`{text}`)" if text else "")
    raise Unsupported(
        f"{len(eqns)} equations, more than the {MAX_EQUATIONS} a C compiler builds in "
        f"reasonable time{where}: a loop over a Python list, or one whose index is needed "
        "at compile time (to index a list, or as a Python int), is unrolled, one copy of "
        "its body per iteration.  To keep it rolled, put the items in one NumPy array "
        "(np.stack) and index it with the loop variable, and loop over range(...) or "
        "while on values known at run time")


@contextlib.contextmanager
def reported(what: str) -> Iterator[None]:
    """Run a build; if it is still running after ``config.progress_after()`` seconds, say
    ``pullback: <what>`` on stderr (once), so that a long build is not mistaken for a
    hang."""
    delay = config.progress_after()
    if delay is None:
        yield
        return
    timer = threading.Timer(delay, lambda: print(
        f"pullback: {what}; this build takes a while (PULLBACK_PROGRESS=off silences "
        "this)", file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
