"""The cache's index: which built module a function compiles to, found without compiling.

A module's cache key is a digest of its C text (``build/compiler.py``), so finding it
takes every stage of the backend: in a new process, 0.2 s of imports and stages for
``x + 1``.  The index maps a digest of what determines the module to that module's cache
entry, the runtime libraries it links, and what its hooks say (its fault sites and
prints, as data: ``compiled.Site``, ``compiled.Printed``).  A hit loads the module
without importing the stages (``pipeline``, the loop IR); ``backends/c/__init__.py``
imports them when a function misses, and records what they made.

What determines the module (``key``): the graph IR of the function and its callees as
printed (literals to the bit, each equation's source location) and the functions those
locations name; the parameters donated; the settings that change the code or its build
(``PULLBACK_COLUMNS``, ``PULLBACK_CC`` and the file it names, ``PULLBACK_CFLAGS``, the
thread count, which picks the measured parallel-loop threshold); the CPU, Python and
NumPy; and pullback's own files, by size and modification time, so that an entry made
by another version or an edited checkout is never used.  IR holding a param the printer
may not show exactly gets no key (it is always compiled).

Entries are cache entries (``build/cache.py``: sealed with key and digest, written
atomically; a damaged one is said and rebuilt).  One whose module or libraries are gone
or damaged is a miss: the stages run and the build puts them back.  The index is not used
under ``PULLBACK_VERIFY`` (every compile runs, and verifies, the stages) or
``PULLBACK_DUMP`` (the stages print what they make).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy

from .... import config
from ....errors import Loc
from ....ir.core import Block, Func, Module
from ....ir.printer import format_module
from ....ir.types import DType, StackType, TensorType
from ..build import cache, compiler, crossover, libraries, threads, tuning
from .compiled import Compiled, Printed, Site

NAME = "index.json"
#: Param values the printer shows exactly (tuples of them too).
_EXACT = (type(None), bool, int, float, str, DType, TensorType, StackType, Block, Func)
_PACKAGE = Path(__file__).resolve().parents[3]


def used() -> bool:
    """Whether compiles look in the index (not while verifying or dumping stages)."""
    return not config.verifying() and not config.dumping()


def key(func: Func, donated: Mapping[int, int]) -> str | None:
    """The index key of ``func``'s module (``donated``: as ``compile_func`` takes it), or
    None where its IR holds a param that may not print exactly."""
    module = Module.of(func)
    names = []
    for f in module.funcs.values():
        for eqn in f.block.walk():
            if not all(map(_exact, eqn.params.values())):
                return None
            names.append(eqn.loc.func if eqn.loc is not None else None)
    return cache.key("index", format_module(module), names, sorted(donated.items()),
                     _settings(), _fingerprint())


def _exact(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(map(_exact, value))
    return isinstance(value, _EXACT)


def _settings() -> list:
    """What of the environment changes a module's code or build (read on each compile,
    as the build reads it): the compiler is named by its file's size and date; the
    threads a parallel loop runs on pick the loop length measured worth them
    (``threads.parallel_min``, measured once per machine and cached); the products'
    inline/BLAS crossover, once measured."""
    words = shlex.split(config.compiler())
    program = shutil.which(words[0]) if words else None
    info = os.stat(program) if program else None
    return [config.columns(), words, program, info and [info.st_size, info.st_mtime_ns],
            config.cflags(), tuning.cpu_id(), threads.team_size(), numpy.__version__,
            sys.version, importlib.machinery.EXTENSION_SUFFIXES, crossover.cached()]


@functools.cache
def _fingerprint() -> str:
    """A digest of pullback's files (name, size, modification time), once per process."""
    return hashlib.sha256(repr(list(_files(str(_PACKAGE), ""))).encode()).hexdigest()


def _files(folder: str, prefix: str) -> Iterator[tuple[str, int, int]]:
    """(name under the package, size, modification time) of each file under folder."""
    with os.scandir(folder) as found:
        items = sorted(found, key=lambda item: item.name)
    for item in items:
        if item.is_dir():
            if item.name != "__pycache__":
                yield from _files(item.path, f"{prefix}{item.name}/")
        else:
            info = item.stat()
            yield f"{prefix}{item.name}", info.st_size, info.st_mtime_ns


def load(key: str, func: Func, source: Callable[[], str]) -> Compiled | None:
    """``func``'s native code from the index entry ``key`` (``source`` makes its C when
    asked), or None where there is none or what it names is not intact."""
    data = cache.read(key, NAME)
    if data is None:
        return None
    entry = json.loads(data)
    for library_key, name in entry["libraries"]:
        path = cache.existing(library_key, name)
        if path is None:
            return None
        if name == "libpbpacked.so":  # as build_module does for the modules linking it
            compiler._choose_gemm(str(path), libraries.LIBRARIES["pbpacked"][0])
    module = cache.loaded(entry["key"], entry["module"])
    if module is None:
        return None
    sites = [Site(loc and Loc(*loc), exc, fmt, tuple(dtypes))
             for loc, exc, fmt, dtypes in entry["sites"]]
    prints = [Printed(op, params, tuple((d, tuple(s)) for d, s in values))
              for op, params, values in entry["prints"]]
    return Compiled(func, module, sites, prints, source)


def record(key: str, compiled: Compiled) -> None:
    """Make ``compiled`` (just built) the index entry ``key``; nothing is recorded where
    its prints' params would not come back from JSON as they are."""
    module_key, module_file = cache.named(Path(compiled.file))
    linked = [cache.named(compiler.library_path(name, text))
              for name, text in sorted(libraries.needed(compiled.source).items())]
    params = [p.params for p in compiled.prints]
    try:
        if json.loads(json.dumps(params)) != params:
            return
    except (TypeError, ValueError):
        return
    prints = [[p.op, p.params, p.values] for p in compiled.prints]
    sites = [[s.loc and [s.loc.file, s.loc.line, s.loc.col, s.loc.func], s.exc, s.fmt,
              s.dtypes] for s in compiled.sites]
    entry = {"module": module_file.removesuffix(".so"), "key": module_key,
             "libraries": linked, "sites": sites, "prints": prints}
    cache.write(key, NAME, json.dumps(entry).encode())
