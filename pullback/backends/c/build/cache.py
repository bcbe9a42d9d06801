"""The on-disk cache of compiled extension modules, so a program compiles once per machine
(and of the compiler probes' answers, so a process does not probe again, and of the
index that finds a function's module without its C text: ``call/index.py``).

An entry is one file, ``<dir>/<module>-<key>.so`` (likewise ``probes-<key>.json``,
``index-<key>.json``): what the build wrote, then a trailer naming the entry's key and
holding the SHA-256 digest of the bytes before it.  Nothing is used unless its trailer
names the key it is looked up by and its digest matches, and a shared object must also
start with a shared-object header of this machine: a truncated or damaged file (a
killed process, a full disk), another entry's file in its place, or a file a bad
``$PULLBACK_CC`` wrote is rebuilt (with a warning when it was there), never loaded:
loading one crashes the process (SIGBUS, SIGILL).  Nothing written beside an entry is
trusted.

Entries are written under temporary names in the same directory and renamed into place,
so a reader never sees half a file and processes that build the same entry at once all
succeed (the last rename wins; every candidate is complete).  A build's files (the
source, the compiler's own temporary files) go to a scratch directory there, removed
when the build ends however it ends, except that a failed compile keeps its source for
the user.  Temporary names carry their process's id and host, and a process's first
build in a directory removes those of this host's processes that are gone (killed while
building): once, not per build, as a directory in use holds tens of thousands of entries.

Loading code runs it, so the directory must be private: it is created with mode 0700,
and one that another user owns or that others can write is refused.  One that cannot be
written (a read-only file system, no permission) is replaced, with a warning, by a
temporary directory for the rest of the process.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from .... import config
from ....errors import CompileError

CACHE_ENV = "PULLBACK_CACHE_DIR"
#: Part of every key: entries of another layout are never looked at.
FORMAT = "pullback-cache-2"

_MAGIC = b"\0pullback-entry\0"
_DIGEST = 64  # hex characters of a SHA-256 digest, and of a key
_TRAILER = len(_MAGIC) + 2 * _DIGEST

#: Temporary names: ``.tmp-<pid>-<host>-<what>...``.
_HOST = hashlib.sha256(platform.node().encode()).hexdigest()[:8]  # (socket: 9 ms to import)
_TEMP_NAME = re.compile(r"\.tmp-(\d+)-([0-9a-f]{8})-")

_modules: dict[str, ModuleType] = {}
_lock = threading.Lock()
_dir_lock = threading.Lock()
_fallbacks: dict[str, Path] = {}
_swept: set[str] = set()  # directories this process has swept (``_sweep_once``)


class CacheError(CompileError):
    """The cache directory cannot be used safely (or at all)."""


def key(*parts: object) -> str:
    """A digest of everything that determines a build (JSON-encodable parts; the encoding
    keeps their boundaries, so moving text from one part to the next changes the key)."""
    return hashlib.sha256(json.dumps([FORMAT, *parts]).encode()).hexdigest()


def cache_dir() -> Path:
    """The cache directory ($PULLBACK_CACHE_DIR, else ~/.cache/pullback), made if absent
    and checked to be private; a temporary one where it cannot be written."""
    path = config.cache_dir()
    fix = f"set {CACHE_ENV} to a directory of your own"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        return _fallback(path, exc)
    if info.st_uid != os.getuid():
        raise CacheError(f"the cache directory {path} belongs to another user (uid "
                         f"{info.st_uid}); pullback would run code they put there", hint=fix)
    if info.st_mode & 0o022:
        raise CacheError(f"the cache directory {path} is writable by other users (mode "
                         f"{info.st_mode & 0o777:o}); pullback would run code they put there",
                         hint=f"run `chmod 700 {path}`, or {fix}")
    problem = _unwritable(str(path))
    return path if problem is None else _fallback(path, problem)


@functools.cache
def _unwritable(path: str) -> OSError | None:
    """Why no file can be made in the directory path, or None (asked once per process)."""
    try:
        fd, name = tempfile.mkstemp(dir=path, prefix=_temp_prefix("write-test"))
    except OSError as exc:
        return exc
    os.close(fd)
    os.unlink(name)
    return None


def _fallback(path: Path, problem: OSError) -> Path:
    """The temporary cache directory used instead of path for the rest of the process
    (made, and said, once), removed when the process that made it exits."""
    with _dir_lock:
        tmp = _fallbacks.get(str(path))
        if tmp is None:
            tmp = _fallbacks[str(path)] = Path(tempfile.mkdtemp(prefix="pullback-cache-"))
            atexit.register(_remove_own, tmp, os.getpid())
            warnings.warn(f"pullback: cannot write the cache directory {path} "
                          f"({problem.strerror or problem}); compiled modules go to {tmp} "
                          f"for this process instead (set {CACHE_ENV} to a directory you "
                          "can write to keep them)", RuntimeWarning, stacklevel=4)
        return tmp


def _remove_own(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child
        shutil.rmtree(path, ignore_errors=True)


def load(key: str, module_name: str, build: Callable[[Path], None]) -> ModuleType:
    """The extension module for key: the one already loaded in this process, else the
    intact cache entry, else a fresh one that build(path) writes to path.  A build holds
    no lock: one on a thread of its own (an optimised build, ``tiered``) leaves the
    others to go on."""
    module = _modules.get(key)
    if module is None:
        path = entry(key, f"{module_name}.so", build)
        with _lock:
            module = _modules.get(key)
            if module is None:
                module = _modules[key] = _import(path, module_name)
    return module


def loaded(key: str, module_name: str) -> ModuleType | None:
    """The extension module for key already loaded in this process, else the intact
    cache entry's, else None: nothing is built (a damaged entry is left for ``load``)."""
    with _lock:
        module = _modules.get(key)
        if module is None:
            path = existing(key, f"{module_name}.so")
            if path is None:
                return None
            module = _modules[key] = _import(path, module_name)
        return module


def entry(key: str, name: str, build: Callable[[Path], None]) -> Path:
    """The intact cache file for key (``<stem>-<key><suffix>`` of name), (re)built first by
    build(path) when it is absent or damaged."""
    path = _path(key, name)
    if not _intact(path, key):
        _store(path, key, build)
    return path


@contextlib.contextmanager
def exclusive(key: str, name: str) -> Iterator[None]:
    """Held by one process at a time for the entry of key (an advisory lock on a file
    beside it): processes that start together then make one measurement and all read it,
    instead of each measuring while the others load the machine (and each finding
    another answer)."""
    lock = _path(key, name).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def read(key: str, name: str) -> bytes | None:
    """What was written to the intact cache file for key (as ``entry`` names it), or
    None when there is none or it is damaged (said, as ``entry`` says it; ``write``
    replaces it)."""
    path = _path(key, name)
    return payload(path) if _intact(path, key) else None


def write(key: str, name: str, data: bytes) -> None:
    """Make data the cache file for key (as ``entry`` names it), replacing any."""
    _store(_path(key, name), key, lambda out: out.write_bytes(data))


def _intact(path: Path, key: str) -> bool:
    """Whether the entry at path for key is intact; a damaged one is said (with where
    the caller was called from), a missing one is not."""
    problem = _problem(path, key)
    if problem is not None and problem != _MISSING:
        warnings.warn(f"pullback: the cache entry {path} is damaged ({problem}); "
                      "rebuilding it", RuntimeWarning, stacklevel=3)
    return problem is None


def path(key: str, name: str) -> Path:
    """Where the cache file for key (as ``entry`` names it) lives, built or not."""
    return _path(key, name)


def existing(key: str, name: str) -> Path | None:
    """The intact cache file for key (as ``entry`` names it), or None: nothing is built."""
    path = _path(key, name)
    return path if _problem(path, key) is None else None


def named(path: Path) -> tuple[str, str]:
    """The key and name (as ``entry`` takes them) of the cache file at path."""
    stem, dot, suffix = path.name.partition(".")
    stem, _, key = stem.rpartition("-")
    return key, f"{stem}{dot}{suffix}"


def payload(path: Path) -> bytes:
    """What the build wrote to an entry ``entry`` returned (its trailer left off)."""
    return path.read_bytes()[:-_TRAILER]


def _path(key: str, name: str) -> Path:
    stem, dot, suffix = name.partition(".")
    return cache_dir() / f"{stem}-{key}{dot}{suffix}"


_MISSING = "missing"


def _problem(path: Path, key: str) -> str | None:
    """What is wrong with the entry at path for key (``_MISSING`` when there is none), or
    None when it is intact."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _MISSING
    except OSError as exc:
        return exc.strerror or str(exc)
    body, trailer = data[:-_TRAILER], data[-_TRAILER:]
    if len(data) < _TRAILER or not trailer.startswith(_MAGIC):
        return "no trailer: truncated, or not written by pullback"
    named, digest = trailer[len(_MAGIC):-_DIGEST], trailer[-_DIGEST:]
    if named != key.encode():
        return "another entry's file"
    if digest != hashlib.sha256(body).hexdigest().encode():
        return "its bytes do not match its digest"
    return _content_problem(path.name, body)


def _content_problem(name: str, data: bytes) -> str | None:
    """What makes data unfit to be the file name (a shared object must be one for this
    machine), or None."""
    if not data:
        return "an empty file"
    return shared_object_problem(data) if name.endswith(".so") else None


#: Mach-O's magic numbers (64-bit, and a universal binary's).
_MACH_O = (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


def shared_object_problem(data: bytes) -> str | None:
    """What makes data (a file's bytes) not a shared library this process can load, as
    far as its header tells, or None."""
    if sys.platform == "darwin":
        return None if data[:4] in _MACH_O else "not a Mach-O file"
    if len(data) < 64 or data[:4] != b"\x7fELF":
        return "not an ELF file"
    order = "little" if data[5] == 1 else "big"
    if data[4] != (2 if sys.maxsize > 2**32 else 1) or order != sys.byteorder:
        return "an ELF file of another word size or byte order"
    if int.from_bytes(data[16:18], order) != 3:  # ET_DYN
        return "an ELF file that is not a shared object"
    machine = _machine()
    if machine is not None and int.from_bytes(data[18:20], order) != machine:
        return "an ELF file for another processor"
    return None


@functools.cache
def _machine() -> int | None:
    """The ELF machine of the running interpreter (None where it cannot be read)."""
    with contextlib.suppress(OSError):
        with open(sys.executable, "rb") as exe:
            head = exe.read(20)
        if head[:4] == b"\x7fELF":
            return int.from_bytes(head[18:20], sys.byteorder)
    return None


def _store(path: Path, key: str, build: Callable[[Path], None]) -> None:
    """Build into a temporary file, check it, seal it with its trailer and rename it
    into place."""
    _sweep_once(path.parent)
    with _temp_beside(path) as tmp:
        build(tmp)
        data = tmp.read_bytes()
        problem = _content_problem(path.name, data)
        if problem is not None:
            raise CacheError(f"building {path.name} made no valid file: {problem}",
                             hint="check $PULLBACK_CC and $PULLBACK_CFLAGS")
        with open(tmp, "ab") as out:
            out.write(_MAGIC + key.encode() + hashlib.sha256(data).hexdigest().encode())
        os.replace(tmp, path)


def _temp_prefix(what: str) -> str:
    return f".tmp-{os.getpid()}-{_HOST}-{what}-"


@contextlib.contextmanager
def _temp_beside(path: Path) -> Iterator[Path]:
    """A fresh temporary file in path's directory (a rename within one file system is
    atomic), removed on the way out unless it was renamed away."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path.name), suffix=".tmp")
    os.close(fd)
    try:
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


@contextlib.contextmanager
def scratch(what: str, keep_on: type[BaseException] | tuple[type[BaseException], ...] = ()
            ) -> Iterator[Path]:
    """A fresh directory in the cache directory for a build's files (builds run in
    ``entry``, which sweeps the directory once per process), removed on the way out
    (also on KeyboardInterrupt) unless the body raised one of ``keep_on``."""
    made = Path(tempfile.mkdtemp(dir=cache_dir(), prefix=_temp_prefix(what)))
    keep = False
    try:
        yield made
    except keep_on:
        keep = True
        raise
    finally:
        if not keep:
            shutil.rmtree(made, ignore_errors=True)


def _sweep_once(directory: Path) -> None:
    """``sweep`` directory, the first time this process builds there."""
    with _dir_lock:
        if str(directory) in _swept:
            return
        _swept.add(str(directory))
    sweep(directory)


def sweep(directory: Path) -> None:
    """Remove the temporary files and directories in directory of this host's processes
    that are gone (a process killed while building leaves them)."""
    with contextlib.suppress(OSError), os.scandir(directory) as found:
        for item in found:
            match = _TEMP_NAME.match(item.name)
            if match and match[2] == _HOST and not _alive(int(match[1])):
                if item.is_dir(follow_symlinks=False):
                    shutil.rmtree(item.path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(item.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _import(path: Path, module_name: str) -> ModuleType:
    """Import the extension module at path (its init function is PyInit_<module_name>)."""
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
