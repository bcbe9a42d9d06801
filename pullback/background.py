"""pullback's own threads (native builds, the compiler's workers, progress notes) start
with SIGINT blocked, so that Ctrl-C, or a SIGINT sent to the process, always reaches the
main thread.  Python runs signal handlers on the main thread only; a process-directed
signal the kernel hands to another thread leaves a main thread blocked in a system call
(waiting for the C compiler) asleep until that call returns by itself."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # concurrent.futures is imported when a build needs it
    from concurrent.futures import Executor, Future

T = TypeVar("T")


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Threads started inside inherit a signal mask that blocks SIGINT (a new thread
    takes its creator's mask); the creator's own mask is restored after."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX: nothing to steer
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def start(thread: threading.Thread) -> None:
    """Start ``thread`` with SIGINT blocked."""
    with _sigint_blocked():
        thread.start()


def submit(pool: Executor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``pool.submit(fn, *args)``; a worker it starts has SIGINT blocked."""
    with _sigint_blocked():
        return pool.submit(fn, *args)
