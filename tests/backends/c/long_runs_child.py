"""Programs that recurse deep, loop for ever or make arrays no machine holds, run in a
child process by test_long_runs.py (where a crash or a hang fails one test, not the
suite).  ``python long_runs_child.py SCENARIO [BACKEND]`` prints one line per outcome."""

from __future__ import annotations

import signal
import sys
import threading

import numpy as np

import pullback as pb

HUGE = (10 ** 8, 10 ** 7)  # 7.11 PiB of float64: no machine holds it


def count_down(n):
    if n <= 0:
        return 0.0
    return 1.0 + count_down(n - 1)


def sines(x, n):
    if n <= 0:
        return x
    return np.sin(sines(x, n - 1)) + 0.5 * x


def sines_loss(x, n):
    return np.sum(sines(x, n))


def climb(x):
    while x > 0:
        x += 1.0
    return x


def halve(x, n):
    for _ in range(n):
        x = x * 0.5 + 1.0
    return x


def fib(n):
    if n < 2:
        return 1.0 * n
    return fib(n - 1) + fib(n - 2)


def climb_loss(x):
    y = x
    while np.sum(y) > 0.0:
        y = y * 1.5
    return np.sum(y * y)


def ones_sum(x):
    return np.sum(np.ones(HUGE) * x)


def broadcast_sum(x):
    return np.sum(np.broadcast_to(x, HUGE))


def beyond_intp(x):
    return np.sum(np.zeros((10 ** 10, 10 ** 10)) + x)


def huge_if_positive(x):
    if x > 0:
        return np.sum(np.ones(HUGE)) * x
    return x


def print_then_huge(x):
    print("before", x)
    a = np.ones(HUGE) * x
    return np.sort(a, axis=None)[0]


def say(*words) -> None:
    print(*words, flush=True)


def outcome(fn, *args) -> str:
    """The result, or the exception's type and message."""
    try:
        return str(fn(*args))
    except (RecursionError, MemoryError, ValueError) as e:
        return f"{type(e).__name__}: {e}"


def recursion(backend: str) -> None:
    rec = pb.jit(count_down, backend=backend)
    say("deep", outcome(rec, np.int64(10 ** 6)))
    if backend == "c":  # the interpreter stops at Python's recursion limit
        say("moderate", outcome(rec, np.int64(5 * 10 ** 4)))
    say("shallow", outcome(rec, np.int64(10)))
    grad = pb.jit(pb.grad(sines_loss), backend=backend)
    say("grad deep", outcome(grad, np.ones(3), np.int64(10 ** 7)))
    say("grad shallow", outcome(lambda: grad(np.ones(3), np.int64(20)).tolist()))


def small_thread() -> None:
    rec = pb.jit(count_down, backend="c")
    rec(np.int64(1))
    threading.stack_size(512 << 10)
    for n in (10 ** 3, 10 ** 6):
        t = threading.Thread(target=lambda n=n: say("thread", n, outcome(rec, np.int64(n))))
        t.start()
        t.join()


def interrupts() -> None:
    """Each long call starts after a line ``ready NAME``; the parent then sends SIGINT."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    x = np.ones(3)
    cases = [("while", pb.jit(climb, backend="c"), (-1.0,), (1.0,)),
             ("for", pb.jit(halve, backend="c"), (1.0, np.int64(1)), (1.0, np.int64(10 ** 15))),
             ("recursion", pb.jit(fib, backend="c"), (np.int64(1),), (np.int64(80),)),
             ("grad", pb.jit(pb.grad(climb_loss), backend="c"), (-x,), (x,))]
    for name, fn, quick, forever in cases:
        fn(*quick)  # compiled before the parent interrupts
        say("ready", name)
        try:
            fn(*forever)
            say("finished", name)
        except KeyboardInterrupt:
            say("interrupted", name)
    say("handler restored", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    # a handler that returns lets the loop go on; the next signal's handler raises
    seen = []

    def count(signum, frame):
        seen.append(signum)
        if len(seen) == 2:
            raise LookupError("second signal")

    signal.signal(signal.SIGINT, count)
    say("ready", "handler")
    try:
        cases[0][1](1.0)
    except LookupError as e:
        say("handled", len(seen), e)


def sizes(backend: str) -> None:
    try:
        np.ones(HUGE)
    except MemoryError as e:
        say("numpy", e)
    for fn in (ones_sum, broadcast_sum, beyond_intp):
        say(fn.__name__, outcome(pb.jit(fn, backend=backend), 1.0))
    branch = pb.jit(huge_if_positive, backend=backend)
    say("not taken", outcome(branch, -2.0))
    say("taken", outcome(branch, 2.0))
    say("after print", outcome(pb.jit(print_then_huge, backend=backend), 3.0))


if __name__ == "__main__":
    scenario, *rest = sys.argv[1:]
    {"recursion": recursion, "thread": small_thread, "interrupts": interrupts,
     "sizes": sizes}[scenario](*rest)
