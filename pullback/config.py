"""Settings read from the environment that change what a user sees: how tracebacks look,
and whether long builds say so.  Each is read when it is needed (an error, a build), so
setting it in a running process takes effect.

``PULLBACK_TRACEBACK``
    ``full`` shows pullback's own frames in the tracebacks of errors that leave its API;
    by default they are hidden and the traceback shows the program's frames only.
``PULLBACK_PROGRESS``
    Seconds a C build may run before pullback says on stderr what it is compiling (2 by
    default); ``off`` (or ``0``) keeps builds silent.
"""

from __future__ import annotations

import os

#: Seconds a build runs silently before it says what it compiles (``PULLBACK_PROGRESS``).
PROGRESS_AFTER = 2.0


def full_tracebacks() -> bool:
    """Whether tracebacks keep pullback's internal frames (``PULLBACK_TRACEBACK=full``)."""
    return os.environ.get("PULLBACK_TRACEBACK", "").strip().lower() == "full"


def progress_after() -> float | None:
    """Seconds before a running build reports itself; None: never."""
    text = os.environ.get("PULLBACK_PROGRESS", "").strip().lower()
    if text in ("off", "0", "no", "false"):
        return None
    try:
        return float(text) if text else PROGRESS_AFTER
    except ValueError:
        return PROGRESS_AFTER
