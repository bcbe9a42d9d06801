"""Tiered execution: a specialisation the interpreter runs quickly runs there on its first
call, and its native code builds on a thread of its own from the end of that call; the
calls after it wait for the build if it has not finished and run natively.  So only a
first call runs on the interpreter (timing loops time native code from their second
call), and a program that calls once and goes on to other work does not wait at all.

Why: a native build takes from tens of milliseconds (a cache hit: the module found
through the cache's index, ``backends/c/call/index.py``, and loaded) through a few
tenths of a second (the C backend's stages, where only its module is cached) to seconds
(a C compiler process), while the interpreter runs a small function in milliseconds.
Only what ``interp.estimate`` says runs within ``BUDGET_S`` there is tiered: a scalar
loop of 1e5 iterations would take far longer on the interpreter than compiling it, and
is compiled before its first call as before (as is anything with a ``while`` loop or
run-time loop bounds).

The build starts when the first call has run (it does not compete with that call for
the interpreter lock) and runs on a thread that is not a daemon: a process ending while
one runs waits for it, so the cache entry is written and the next process finds it.
Builds, tiered or not, run one at a time (``BUILDING``), as in a program without
threads.  The switch is made on a calling thread, between calls (``wait``), never under
a running one; what the build raised is the caller's to report (``api``).  A
child forked while builds run has none of their threads: its pending builds are dropped
(its calls of them run on the interpreter) rather than waited for forever, and the locks
a build thread held are made anew.

A specialisation built before its first call builds quickly where its module is large
(``-O1``: ``compiler.QUICK_FLAGS``, ``pipeline.QUICK_LINES``) and is upgraded: its
optimised build starts on a thread from the end of its first call, and calls run the
quick code until it is ready (``upgrading``: they take it then, and never wait for
it).  The upgrade does not hold ``BUILDING``, so other functions' first builds go on
beside it.

``PULLBACK_TIERED=0`` turns tiering off (``config.tiered``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as _wait
from typing import Any

from . import config
from .backends import interp
from .ir.core import Func

#: The longest interpreter run, by ``interp.estimate``, a first call is tiered for.
BUDGET_S = 0.05

#: Held while a specialisation's native code builds, tiered or not (by ``api``).
BUILDING = threading.Lock()

_lock = threading.Lock()
#: Specialisations whose native code is pending, by id: (specialisation, build, thread,
#: whether it is an upgrade).
_pending: dict[int, tuple[Any, Future, threading.Thread, bool]] = {}


def _forked() -> None:
    """In a forked child: no build runs, and no lock is held by a thread it lacks."""
    global BUILDING, _lock
    BUILDING, _lock = threading.Lock(), threading.Lock()
    _pending.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def worth_it(func: Func) -> bool:
    """Whether ``func``'s first call should run on the interpreter while it builds."""
    if not config.tiered():
        return False
    cost = interp.estimate(func)
    return cost is not None and cost <= BUDGET_S


def defer(staged: Any, build: Callable[[], Any], *, upgrade: bool = False) -> None:
    """Build ``staged``'s native code with ``build`` on a thread started by ``start``;
    ``upgrade``: it replaces native code that runs meanwhile (``upgrading``)."""
    future: Future = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            value = build()
        except BaseException as e:  # noqa: BLE001 (handed to the caller, see ``ready``)
            future.set_exception(e)
        else:
            future.set_result(value)

    thread = threading.Thread(target=target, name=f"pullback-build-{staged.func.name}")
    with _lock:
        _pending[id(staged)] = (staged, future, thread, upgrade)


def pending(staged: Any) -> bool:
    """Whether ``staged``'s native code is deferred and not yet taken (``ready``)."""
    return id(staged) in _pending


def upgrading(staged: Any) -> bool:
    """Whether ``staged``'s pending build replaces native code (calls take it when it is
    ``ready``, and do not wait for it)."""
    entry = _pending.get(id(staged))
    return entry is not None and entry[3]


def started(staged: Any) -> bool:
    """Whether ``staged``'s deferred build has been started."""
    entry = _pending.get(id(staged))
    return entry is not None and entry[2].ident is not None


def start(staged: Any) -> None:
    """Start ``staged``'s deferred build, unless it has started."""
    with _lock:
        entry = _pending.get(id(staged))
        if entry is not None and entry[2].ident is None:
            entry[2].start()


def ready(staged: Any) -> Future | None:
    """``staged``'s finished build (its result, or what it raised), taken off the pending
    list: None while it runs or when there is none (or another thread took it)."""
    entry = _pending.get(id(staged))
    if entry is None or not entry[1].done():
        return None
    with _lock:
        return None if _pending.pop(id(staged), None) is None else entry[1]


def wait(staged: Any) -> Future | None:
    """``staged``'s build, started if need be and waited for, as ``ready`` takes it."""
    entry = _pending.get(id(staged))
    if entry is None:
        return None
    start(staged)
    _wait([entry[1]])
    return ready(staged)


def wait_all() -> list[tuple[Any, Future]]:
    """Every pending build, started and waited for: (specialisation, build) pairs."""
    with _lock:
        stageds = [entry[0] for entry in _pending.values()]
    done = [(staged, wait(staged)) for staged in stageds]
    return [(staged, future) for staged, future in done if future is not None]
