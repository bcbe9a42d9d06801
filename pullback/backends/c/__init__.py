"""The native CPU backend: graph IR compiled to C, built into a CPython extension module.

``compile_func(func)`` runs the stages of ``pipeline`` on the function and every function
it calls: prepared, planned, lowered to loop IR, printed as C with an entry (``pb_entry``)
that the glue library (``runtime/glue.c``), linked by every module, makes into a CPython
function ``call(args, form)`` (``call/convention.py``), which checks and reads NumPy
arguments in place and makes NumPy results; built with the system compiler (cached on
disk).  It returns a callable with the interpreter's calling convention (``Compiled``):
NumPy arguments in, a list of NumPy results out, faults raised as the Python exception
plain execution raises.  A function built before, in this process or another, is found
through the cache's index (``call/index.py``) without running the stages: they, and the
loop IR, are imported when a function misses (``pipeline``, ``Source``, ``Unsupported``
load on first use), so that a cache hit in a new process costs no more than loading its
module.

Threads: OpenMP loops and OpenBLAS's own threads take turns on the same cores, and how
idle OpenMP threads wait is read once, when the first compiled module loads OpenMP;
``build.compiler`` sets it as it loads unless the user has.  Where it was read too early
to take effect (another library started OpenMP first) and idle threads spin, OpenBLAS's
threaded products run as jobs on OpenMP's team instead of a pool of their own
(``call/limits.py``).  A loop runs on every thread from a length measured once per
machine and thread count (``build/threads.py``).  How many threads, and how much memory
compiled functions keep between calls, ``call/limits.py`` reads and hands to the glue
library; a compiled function collected hands its kept memory back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...ir.core import Func
from .build.compiler import NoCompilerError, start_libraries, warn_no_compiler_once
from .build.libraries import HEADERS, linked_by_all
from .call import index
from .call.compiled import Compiled
from .call.fast import FastEntry, fast_entry

if TYPE_CHECKING:
    from .emit.source import Source
    from .loops.ir import Unsupported

__all__ = ["Compiled", "FastEntry", "NoCompilerError", "Source", "Unsupported",
           "compile_func", "fast_entry", "source_of", "warn_no_compiler_once"]


def source_of(func: Func, donated: Mapping[int, int] | None = None) -> Source:
    """The C source of ``func``'s extension module: the pipeline up to stage ``c``."""
    from . import pipeline

    return pipeline.run(func, until="c", donated=donated)


def compile_func(func: Func, donated: Mapping[int, int] | None = None, *,
                 quick: bool = False) -> Compiled:
    """Native code for ``func``; raises ``Unsupported`` for what the backend lacks.
    ``donated``: the array parameters callers hand over, each with the result of its
    type it may be updated into in place (``pb.jit(..., donate_argnums=)``).  A function
    the cache's index knows loads its module without running the stages (``call/
    index.py``).  The first compile in a process starts the compiler probes and the
    glue library every module links (where the cache lacks them) as soon as the index
    has no entry, before it imports the stages, which then run beside them.  ``quick``:
    a large module builds quickly first, and the result's ``upgrade`` builds it
    optimised (the index records that one)."""
    donated = dict(donated or {})
    key = index.key(func, donated) if index.used() else None
    if key is not None:
        found = index.load(key, func, lambda: source_of(func, donated).text)
        if found is not None:
            return found
    _start_once()  # before the stages are imported: the glue's build takes longest
    from . import pipeline

    compiled = pipeline.run(func, donated=donated, quick=quick)
    if key is not None:
        if compiled.upgrade is None:
            index.record(key, compiled)
        else:
            compiled.upgrade = functools.partial(_recorded, key, compiled.upgrade)
    return compiled


def _recorded(key: str, build: Callable[[], Compiled]) -> Compiled:
    compiled = build()
    index.record(key, compiled)
    return compiled


@functools.cache
def _start_once() -> None:
    start_libraries(linked_by_all(), HEADERS)


def __getattr__(name: str) -> Any:
    """The stages' names, imported when asked (a cache hit needs none of them)."""
    if name == "Source":
        from .emit.source import Source

        return Source
    if name == "Unsupported":
        from .loops.ir import Unsupported

        return Unsupported
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
