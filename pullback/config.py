"""Every ``PULLBACK_*`` setting: the one place that reads them from the environment.

Each is read when it is needed (a specialisation compiled, a build, an error), not at
import, so setting one in a running process takes effect from the next time it is read;
the thread count and the memory kept are read once per process (the glue library and
OpenBLAS take them once).

``PULLBACK_BACKEND``
    ``c`` (default) or ``interp``: the backend of ``pb.jit`` functions that name none.
``PULLBACK_DUMP``
    Comma-separated names of what to print as it is made: ``ir`` (each specialisation's
    optimised IR), ``passes`` (the IR after each pass), and the C backend's stages by
    their names (``prepare``, ``plan``, ``lower``, ``loops``, ``c``; see
    ``backends/c/pipeline.py``).
``PULLBACK_VERIFY``
    Any value but empty or ``0`` runs the IR verifier after every pass and rewrite.
``PULLBACK_TIERED``
    ``0`` compiles every specialisation before its first call runs; ``1`` lets a first
    call the interpreter runs quickly run there while its native code builds on a thread
    (``pullback/tiered.py``).  Unset: tiered, except under ``PULLBACK_VERIFY`` (tests
    then see native code from the first call).
``PULLBACK_CC``, ``PULLBACK_CFLAGS``
    The C compiler command (default ``cc``; split like a shell would), and flags appended
    to its command line.
``PULLBACK_CACHE_DIR``
    Where built modules are kept (default ``~/.cache/pullback``).
``PULLBACK_NUM_THREADS``
    Threads for OpenMP loops and for OpenBLAS (default: their own, all cores); a whole
    number of at least 1.
``PULLBACK_KEEP_MB``
    MiB of freed buffers and AD tape all compiled functions together keep between calls
    (default 256; 0 keeps nothing).
``PULLBACK_GEMM``
    ``packed`` or ``blas``: who computes large float products (default: where the CPU
    has AVX-512, whichever of the runtime's packed kernels and OpenBLAS measured faster
    on the machine, ``backends/c/build/tuning.py``; else OpenBLAS).
``PULLBACK_COLUMNS``
    ``0`` turns off the C backend's rewrite of records built column by column
    (``backends/c/prepare/columns.py``), to compare.
``PULLBACK_TRACEBACK``
    ``full`` shows pullback's own frames in the tracebacks of errors that leave its API;
    by default they are hidden and the traceback shows the program's frames only.
``PULLBACK_PROGRESS``
    Seconds a C build may run before pullback says on stderr what it is compiling (2 by
    default); ``off`` (or ``0``) keeps builds silent.

Besides its own, pullback sets ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` where the user
has set neither (``backends/c/build/compiler.py``), and ``OPENBLAS_THREAD_TIMEOUT`` (how
long idle OpenBLAS threads spin, ``backends/c/build/threads.py``) where the user has not;
nothing that chooses another library's BLAS kernels (``OPENBLAS_CORETYPE``).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from .errors import CompileError

#: Seconds a build runs silently before it says what it compiles (``PULLBACK_PROGRESS``).
PROGRESS_AFTER = 2.0
#: The C backend's default compiler command (``PULLBACK_CC``).
DEFAULT_CC = "cc"


class SettingError(CompileError):
    """An environment variable of pullback's holds a value it cannot use."""


def _text(name: str) -> str:
    return os.environ.get(name, "").strip()


def _on(name: str, default: bool) -> bool:
    text = _text(name)
    return default if not text else text != "0"


def backend() -> str:
    """The backend ``pb.jit`` uses when the call names none (``PULLBACK_BACKEND``)."""
    return _text("PULLBACK_BACKEND") or "c"


def dumps(what: str) -> bool:
    """Whether ``PULLBACK_DUMP`` asks to print ``what`` (a pass list's or stage's name)."""
    return what in _text("PULLBACK_DUMP").split(",")


def dumping() -> bool:
    """Whether ``PULLBACK_DUMP`` asks to print anything."""
    return bool(_text("PULLBACK_DUMP"))


def verifying() -> bool:
    """Whether ``PULLBACK_VERIFY`` asks for the verifier (any value but empty and 0): on
    what each stage makes, the pipeline's result among them."""
    return _on("PULLBACK_VERIFY", False)


def verifying_passes() -> bool:
    """Whether ``PULLBACK_VERIFY=passes`` asks for the verifier after every pass of the
    pipeline, to name the pass that broke the IR (ten verifications instead of one)."""
    return _text("PULLBACK_VERIFY") == "passes"


def tiered() -> bool:
    """Whether a first call may run on the interpreter while its native code builds
    (``PULLBACK_TIERED``; by default yes, unless verifying)."""
    return _on("PULLBACK_TIERED", not verifying())


def columns() -> bool:
    """Whether the C backend rewrites records built column by column (``PULLBACK_COLUMNS``)."""
    return _on("PULLBACK_COLUMNS", True)


def gemm() -> str:
    """Who computes large float products: ``packed``, ``blas``, or ``""`` (measured)."""
    return _text("PULLBACK_GEMM")


def compiler() -> str:
    """The C compiler command (``PULLBACK_CC``)."""
    return os.environ.get("PULLBACK_CC") or DEFAULT_CC


def cflags() -> list[str]:
    """Flags appended to every compile (``PULLBACK_CFLAGS``)."""
    return shlex.split(os.environ.get("PULLBACK_CFLAGS", ""))


def cache_dir() -> Path:
    """Where built modules are kept (``PULLBACK_CACHE_DIR``, else ``~/.cache/pullback``)."""
    return Path(os.environ.get("PULLBACK_CACHE_DIR") or
                Path.home() / ".cache" / "pullback").expanduser()


def whole_number(name: str, least: int) -> int | None:
    """The setting ``name`` as an integer of at least ``least``; None when unset."""
    text = _text(name)
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise SettingError(f"{name}={os.environ[name]!r} is not a whole number of at least "
                           f"{least}", hint=f"set {name} to such a number, or unset it")
    return value


def full_tracebacks() -> bool:
    """Whether tracebacks keep pullback's internal frames (``PULLBACK_TRACEBACK=full``)."""
    return _text("PULLBACK_TRACEBACK").lower() == "full"


def progress_after() -> float | None:
    """Seconds before a running build reports itself; None: never."""
    text = _text("PULLBACK_PROGRESS").lower()
    if text in ("off", "0", "no", "false"):
        return None
    try:
        return float(text) if text else PROGRESS_AFTER
    except ValueError:
        return PROGRESS_AFTER
