"""The on-disk cache of compiled extension modules, so a program compiles once per machine
(and of the compiler probes' answers, so a process does not probe again).

An entry is ``<dir>/<module>-<key>.so`` plus ``<module>-<key>.sha256``, the digest of the
``.so``'s bytes (likewise ``probes-<key>.json``): a truncated or damaged file (a killed
process, a full disk, a crash before the data reached the disk) fails the check and is
rebuilt instead of crashing the loader.
Both files are written under temporary names in the same directory and renamed into
place, so a reader never sees half a file and processes that build the same entry at
once all succeed (the last rename wins; every candidate is complete). Loading code runs
it, so the directory must be private: it is created with mode 0700, and one that another
user owns or that others can write is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from ...errors import CompileError

CACHE_ENV = "PULLBACK_CACHE_DIR"

_modules: dict[str, ModuleType] = {}
_lock = threading.Lock()


class CacheError(CompileError):
    """The cache directory cannot be used safely (or at all)."""


def key(*parts: object) -> str:
    """A digest of everything that determines a build (JSON-encodable parts; the encoding
    keeps their boundaries, so moving text from one part to the next changes the key)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def cache_dir() -> Path:
    """The cache directory ($PULLBACK_CACHE_DIR, else ~/.cache/pullback), made if absent
    and checked to be private."""
    path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "pullback").expanduser()
    fix = f"set {CACHE_ENV} to a directory of your own"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise CacheError(f"cannot use the cache directory {path}: {exc}", hint=fix) from None
    if info.st_uid != os.getuid():
        raise CacheError(f"the cache directory {path} belongs to another user (uid "
                         f"{info.st_uid}); pullback would run code they put there", hint=fix)
    if info.st_mode & 0o022:
        raise CacheError(f"the cache directory {path} is writable by other users (mode "
                         f"{info.st_mode & 0o777:o}); pullback would run code they put there",
                         hint=f"run `chmod 700 {path}`, or {fix}")
    return path


def load(key: str, module_name: str, build: Callable[[Path], None]) -> ModuleType:
    """The extension module for key: the one already loaded in this process, else the
    intact cache entry, else a fresh one that build(path) writes to path."""
    with _lock:
        module = _modules.get(key)
        if module is None:
            module = _modules[key] = _load_or_build(key, module_name, build)
        return module


def _load_or_build(key: str, module_name: str, build: Callable[[Path], None]) -> ModuleType:
    return _import(entry(key, f"{module_name}.so", build), module_name)


def entry(key: str, name: str, build: Callable[[Path], None]) -> Path:
    """The intact cache file for key (``<stem>-<key><suffix>`` of name), (re)built first by
    build(path) when it is absent or damaged."""
    path, sidecar = _paths(key, name)
    if not _intact(path, sidecar):
        _store(path, sidecar, build)
    return path


def path(key: str, name: str) -> Path:
    """Where the cache file for key (as ``entry`` names it) lives, built or not."""
    return _paths(key, name)[0]


def existing(key: str, name: str) -> Path | None:
    """The intact cache file for key (as ``entry`` names it), or None: nothing is built."""
    path, sidecar = _paths(key, name)
    return path if _intact(path, sidecar) else None


def _paths(key: str, name: str) -> tuple[Path, Path]:
    """Where the entry for key and its digest live."""
    stem, dot, suffix = name.partition(".")
    path = cache_dir() / f"{stem}-{key}{dot}{suffix}"
    return path, path.with_name(f"{stem}-{key}.sha256")


def _intact(path: Path, sidecar: Path) -> bool:
    """Whether the entry exists and its bytes match the digest stored beside it."""
    try:
        return sidecar.read_text().strip() == _digest(path)
    except OSError:
        return False


def _store(path: Path, sidecar: Path, build: Callable[[Path], None]) -> None:
    """Build into a temporary file, then rename it and its digest into place."""
    with _temp_beside(path) as tmp:
        build(tmp)
        digest = _digest(tmp)
        os.replace(tmp, path)
    with _temp_beside(sidecar) as tmp:
        tmp.write_text(digest + "\n")
        os.replace(tmp, sidecar)


@contextlib.contextmanager
def _temp_beside(path: Path) -> Iterator[Path]:
    """A fresh temporary file in path's directory (a rename within one file system is
    atomic), removed on the way out unless it was renamed away."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _import(path: Path, module_name: str) -> ModuleType:
    """Import the extension module at path (its init function is PyInit_<module_name>)."""
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
