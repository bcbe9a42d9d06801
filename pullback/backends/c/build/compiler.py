"""Compile generated C into a CPython extension module and import it, through the cache.

The compiler is ``$PULLBACK_CC`` (else ``cc``), run with ``-O3 -march=native -fopenmp``
(the last two dropped where the compiler rejects them, e.g. clang without libomp) and
``$PULLBACK_CFLAGS`` appended. Matrix products link OpenBLAS from the ``scipy-openblas32``
wheel: its CBLAS symbols carry the prefix ``BLAS_PREFIX`` (``scipy_cblas_dgemm``; the
enums keep their names, ``CblasRowMajor``) and its integers are 32-bit ``blasint``.
Generated modules include one header, ``libraries.PRELUDE`` (``runtime.h``, ``BLAS_HEADER``
and ``<omp.h>``), which GCC precompiles once per compiler and flags; the runtime
libraries they link (``libraries``: the glue, which is their Python side, and the
kernels) are built once per compiler, flags, Python and NumPy.

The cache key covers everything that shapes the output: source, headers, compiler and
its version, the flags as requested, the Python ABI, NumPy's version (modules use its
C API) and the CPU (``-march=native`` code may not run on another machine sharing the
cache).  Loading this module makes the threading choices (``choose_threading``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sysconfig
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy

from .... import config
from ....errors import CompileError
from . import cache, libraries, tuning, units

if TYPE_CHECKING:  # concurrent.futures is imported when a build needs it (12 ms)
    from concurrent.futures import Future, ThreadPoolExecutor

BLAS_PREFIX = "scipy_"
BLAS_HEADER = "cblas.h"

#: ``-fno-trapping-math``: nothing reads the floating-point exception flags, and with
#: it GCC if-converts a comparison feeding a select (``where``, a ReLU's mask, ``eye``'s
#: diagonal), so such loops vectorise (GCC 12 left them scalar: "control flow in
#: loop"); values are unchanged (no reassociation, unlike ``-ffast-math``).
BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-std=c11", "-fno-strict-aliasing",
              "-fno-math-errno", "-fno-trapping-math",
              "-Werror=implicit-function-declaration")
OPTIONAL_FLAGS = ("-march=native", "-fopenmp")
#: A quick build's level, after the others (the last ``-O`` wins): a first call's module
#: while the one at ``-O3`` builds (``tiered``).  GCC takes half the time (the CNN
#: step's module: 0.43 s of CPU against 1.21), and the code runs 1.5x longer.
QUICK_FLAGS = ("-O1",)
STDERR_LINES = 50

#: The probe program: a loop calling a math function that glibc's libmvec has in vector
#: form, and OpenMP.  Built with every optional flag and -lmvec it answers every probe at
#: once where all is well; built without PB_MVEC_PROBE, with one optional flag at a time,
#: it finds what the compiler rejects.  Where vector math links, generated code may
#: declare those functions `omp declare simd` (PB_MVEC) and link -lmvec.
_PROBE_SOURCE = """\
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef PB_MVEC_PROBE
#include <math.h>
#pragma omp declare simd notinbranch
float expf(float);
float x[64];
#endif
int main(void) {
#ifdef PB_MVEC_PROBE
    #pragma omp simd
    for (int i = 0; i < 64; i++) x[i] = expf(x[i]);
#endif
#ifdef _OPENMP
    return omp_get_max_threads() > 0 ? 0 : 1;
#else
    return 0;
#endif
}
"""

_SHARED_PROBE_SOURCE = "int pb_probe(void) { return 0; }\n"
#: The arguments, after the flags, building the probe program with vector math as a
#: shared library; ``--no-undefined`` makes its link fail where a symbol it calls (a
#: vector ``expf``, OpenMP's) is missing, as a program's does.  A linker that does not
#: know it (macOS's) fails, and the probes below run instead.
_ALL_AT_ONCE = ("-DPB_MVEC_PROBE", "probe.c", "-lmvec", "-lm", "-Wl,--no-undefined")


class BuildError(CompileError):
    """The C compiler rejected a build: a pullback bug, or bad $PULLBACK_CC/$PULLBACK_CFLAGS."""


class NoCompilerError(BuildError):
    """No working C compiler: compiled functions cannot run natively."""


def compiler_info() -> tuple[str, str] | None:
    """The compiler's path and the first line of its --version, or None when none works."""
    found = _compiler()
    return None if found is None else (found[0][0], found[1])


def have_compiler() -> bool:
    """Whether build_module can work at all."""
    return _compiler() is not None


@functools.cache
def warn_no_compiler_once() -> None:
    """Say once per process what runs instead of native code, how much slower, and how
    to get a compiler."""
    warnings.warn(
        f"{_no_compiler_message()}: functions only jitted run as plain Python, while "
        "transforms (grad, vjp, jvp, ...) run on pullback's NumPy interpreter, "
        "about 150x slower than plain Python on scalar loops (array code loses less); "
        "install a C compiler (Debian/Ubuntu: apt install gcc; Fedora: dnf install gcc; "
        "macOS: xcode-select --install; conda: conda install c-compiler) or set "
        "PULLBACK_CC to one", RuntimeWarning, stacklevel=2)


def build_module(source: str, module_name: str, *,
                 headers: Mapping[str, str] | None = None,
                 libraries: Mapping[str, str] | None = None,
                 quick: bool = False) -> ModuleType:
    """Compile source (which defines PyInit_<module_name>) and import it, or take it from
    the cache; headers (file name -> text) are written beside the source and beside the
    libraries' (name -> C source): shared libraries the module links, each built once.
    Libraries not yet in the cache build on threads of their own while the compiler
    probes run and the module compiles (the first module on a machine waits for the
    longest build, not for all of them in turn).  ``quick``: built with ``QUICK_FLAGS``
    (a cache entry of its own), unless the module built as asked is in the cache."""
    headers = dict(headers or {})
    _check_names(module_name, headers)
    argv, version = _found()
    cflags = _cflags()
    linked = [_library(argv, version, tuple(cflags), name, text, headers)
              for name, text in sorted((libraries or {}).items())]
    paths = [cache.path(key, file) for key, file, _ in linked]
    ldflags = [*map(str, paths), *(f"-Wl,-rpath,{p.parent}" for p in paths[:1]), *_ldflags()]
    key = cache.key(source, sorted(headers.items()), argv, version, cflags, ldflags,
                    module_name, numpy.__version__, sysconfig.get_config_var("EXT_SUFFIX"),
                    tuning.cpu_id())
    quick = quick and cache.existing(key, f"{module_name}.so") is None
    if quick:
        key = cache.key(key, QUICK_FLAGS)
        _quick.add(key)
    with _building([entry for entry in linked if cache.existing(*entry[:2]) is None]
                   ) as pending:

        def build(out: Path) -> None:
            accepted, vector, width = _probed(argv, version, tuple(cflags))
            command = [*argv, *accepted, *width, *(["-DPB_MVEC"] if vector else [])]
            link = [*ldflags, *(["-lmvec", "-lm"] if vector else [])]
            prelude = cache.key("prelude", version, command, sorted(headers.items()))
            command += QUICK_FLAGS if quick else ()  # (GCC takes the prelude at any -O)
            try:
                _compile(command, link, source, module_name, headers, out, pending,
                         _precompiled(prelude, version, headers))
            except BuildError as error:
                if _preludes.get(prelude) is None or not _PCH_FAILURE.search(str(error)):
                    raise
                _preludes[prelude] = None  # a compiler that cannot use its own
                _compile(command, link, source, module_name, headers, out, pending)
            if not pending:
                _start_prelude(prelude, version, command, headers)

        if pending and cache.existing(key, f"{module_name}.so") is not None:
            _finish(pending)  # a module found in the cache loads its libraries at once
        module = cache.load(key, module_name, build)
    if "pbpacked" in (libraries or {}):
        _choose_gemm(str(paths[sorted(libraries).index("pbpacked")]), libraries["pbpacked"])
    return module


def library_path(name: str, source: str) -> Path:
    """The runtime library ``name`` of C ``source`` as modules link it, built if the
    cache lacks it."""
    found = _found()
    return cache.entry(*_library(*found, tuple(_cflags()), name, source,
                                 dict(libraries.HEADERS)))


@functools.cache
def _choose_gemm(packed: str, source: str) -> None:
    """Tell the packed library (once per process, before any module calls it) whether
    it computes the large float products: measured (``tuning.gemm_choice``) unless
    PULLBACK_GEMM says (``runtime.h`` reads it)."""
    if config.gemm() or not tuning.has_avx512(tuning.cpu_id()):
        return
    import ctypes

    library = ctypes.CDLL(packed)
    for kind, flag in (("choice", "pb_gemm_packed_chosen"), ("few", "pb_gemm_packed_few_chosen")):
        choice = tuning.gemm_choice(Path(packed), openblas_library(), tuning.cpu_id(), source,
                                    kind, units.team_size())
        ctypes.c_int.in_dll(library, flag).value = choice == "packed"


#: The precompiled prelude's file in the cache, and the message of a compiler that
#: cannot use it (GCC before 12 where it cannot map it at its address: "had to
#: relocate PCH").
_GCH = f"{libraries.PRELUDE}.gch"
_PCH_FAILURE = re.compile(r"\bPCH\b|\.gch\b|precompiled header")
#: Precompiled preludes, by key (``build_module``): the cache file, found intact by this
#: process (checking reads its 6 MB), or None where it cannot be made or used.
_preludes: dict[str, Path | None] = {}


def _precompiled(key: str, version: str, headers: Mapping[str, str]) -> Path | None:
    """The prelude (``libraries.PRELUDE``, which a module includes first) that GCC
    precompiled with the flags of the module's compile, found in the cache, or None.  A
    module whose compile finds ``module.h.gch`` beside ``module.h`` reads it instead of
    parsing the runtime's, the C library's, CBLAS's and OpenMP's headers: 30 ms of the
    100 ms a small module takes at -O3, for the same machine code (the compiler checks
    that the flags match, else parses the header)."""
    if not _precompiles(version, headers):
        return None
    if key not in _preludes:
        found = cache.existing(key, _GCH)
        if found is None:
            return None
        _preludes[key] = found
    return _preludes[key]


def _precompiles(version: str, headers: Mapping[str, str]) -> bool:
    """Whether modules of these headers get a precompiled prelude: not with clang, which
    takes one only by ``-include-pch``."""
    return libraries.PRELUDE in headers and "clang" not in version


def _start_prelude(key: str, version: str, command: list[str], headers: Mapping[str, str]
                   ) -> None:
    """Precompile the prelude on a worker thread for the modules after this one, unless
    it is found, being made, or failed in this process.  A module starts it once built
    (its own compile does not share the CPU with it), and only once the runtime libraries
    are built: a machine's first modules, which wait for them, would lose a core to it
    (0.1 s of CPU)."""
    if key in _preludes or not _precompiles(version, headers):
        return

    def build(out: Path) -> None:
        _compile([*command, "-x", "c-header"], [], headers[libraries.PRELUDE], "pb_prelude",
                 dict(headers), out)

    def ended(job: Future[Path]) -> None:
        if job.exception() is not None:
            _preludes[key] = None

    for job in _start([(key, _GCH, build)]):
        job.add_done_callback(ended)


def start_libraries(libraries: Mapping[str, str], headers: Mapping[str, str]) -> None:
    """Start building, on threads of their own, those of the libraries (name -> C source)
    the cache lacks and the compiler probes, so that a first compile's own stages run
    beside them; ``build_module`` then waits for these builds instead of starting its
    own.  Nothing happens without a working compiler (``build_module`` says so)."""
    found = _compiler()
    if found is None:
        return
    cflags = tuple(_cflags())
    _probing(*found, cflags)
    entries = [_library(*found, cflags, name, text, dict(headers))
               for name, text in sorted(libraries.items())]
    _start([entry for entry in entries if cache.existing(*entry[:2]) is None])


def _found() -> tuple[tuple[str, ...], str]:
    """The compiler (``_compiler``), or NoCompilerError."""
    found = _compiler()
    if found is None:
        raise NoCompilerError(_no_compiler_message(),
                              hint="install gcc or clang, or set PULLBACK_CC to a C compiler")
    return found


def _library(argv: tuple[str, ...], version: str, cflags: tuple[str, ...], name: str,
             source: str, headers: dict[str, str]
             ) -> tuple[str, str, Callable[[Path], None]]:
    """The cache key, file name and build of the shared library ``lib<name>`` (its file
    name, with the key, is also its soname: the modules linking it find it through an
    rpath), compiled with the flags of ``libraries.FLAGS`` added.  The build does not
    wait for the compiler probes: it compiles with every flag asked for, which they
    accept nearly everywhere, and again with those they accept where they reject any."""
    own = libraries.FLAGS.get(name, ())
    key = cache.key("library", name, source, sorted(headers.items()), argv, version, cflags,
                    own, numpy.__version__, sysconfig.get_config_var("EXT_SUFFIX"), tuning.cpu_id())
    soname = f"lib{name}-{key}.so"

    def build(out: Path) -> None:
        probes = _probing(argv, version, cflags)
        install = f"-Wl,-install_name,@rpath/{soname}" if platform.system() == "Darwin" \
            else f"-Wl,-soname,{soname}"
        python = ["-undefined", "dynamic_lookup"] if platform.system() == "Darwin" else []

        def compile_with(flags: Sequence[str]) -> None:
            _compile([*argv, *flags, "-ffp-contract=fast", *own, install], python, source,
                     f"lib{name}", headers, out)

        try:
            compile_with(cflags)
        except BuildError:
            if probes.result()[0] == list(cflags):
                raise
        else:
            if probes.result()[0] == list(cflags):
                return
        compile_with(probes.result()[0])

    return key, f"lib{name}.so", build


@functools.cache
def _workers() -> ThreadPoolExecutor:
    """The threads that run the probes and library builds (each a compiler process)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(8, thread_name_prefix="pullback-build")


#: Library builds under way in this process, by cache key.
_builds: dict[str, Future[Path]] = {}
_builds_lock = threading.Lock()


def _start(entries: Sequence[tuple[str, str, Callable[[Path], None]]]) -> list[Future[Path]]:
    """Each cache entry's build, started on a worker thread unless one is under way."""
    jobs = []
    with _builds_lock:
        for key, file, build in entries:
            job = _builds.get(key)
            if job is None:
                job = _builds[key] = _workers().submit(cache.entry, key, file, build)
                job.add_done_callback(functools.partial(_ended, key))
            jobs.append(job)
    return jobs


def _ended(key: str, job: Future[Path]) -> None:
    with _builds_lock:
        if _builds.get(key) is job:
            del _builds[key]


def _forget_threads() -> None:
    """In a child forked while builds or probes ran: their threads are not there, so
    their jobs would never end; they are forgotten (finished probes' answers kept), and
    the child's first build starts its own."""
    global _builds_lock, _probes_lock
    _builds_lock, _probes_lock = threading.Lock(), threading.Lock()
    _builds.clear()
    for key, job in list(_probes.items()):
        if not job.done():
            del _probes[key]
    _workers.cache_clear()


os.register_at_fork(after_in_child=_forget_threads)


@contextlib.contextmanager
def _building(entries: list[tuple[str, str, Callable[[Path], None]]]
              ) -> Iterator[list[Future[Path]]]:
    """The cache entries built (or their builds under way), while the body runs; on the
    way out every one has ended, so none outlives the cache directory it writes to."""
    jobs = _start(entries)
    try:
        yield jobs
    finally:
        for job in jobs:
            job.exception()  # waits; its error, if any, is the body's to raise


def wait_background() -> None:
    """Wait for the builds under way on worker threads (runtime libraries, the
    precompiled prelude a first module starts once built), their errors left to the
    builds that need them: a program (a benchmark) can then time what comes next without
    them sharing its cores."""
    with _builds_lock:
        jobs = list(_builds.values())
    for job in jobs:
        job.exception()


def _finish(pending: Sequence[Future[Path]]) -> None:
    """Wait for the builds, raising the first one's error."""
    for job in pending:
        job.result()


#: Compilers found to answer --version but build no shared library (command -> why).
_unusable: dict[str, str] = {}


def _no_compiler_message() -> str:
    command = config.compiler()
    return _unusable.get(command) or f"no working C compiler (`{command} --version` failed)"


def _compiler() -> tuple[tuple[str, ...], str] | None:
    """The compiler command (its program resolved to a path) and its version line."""
    command = config.compiler()
    return None if command in _unusable else _probe_compiler(command)


@functools.cache
def _probe_compiler(command: str) -> tuple[tuple[str, ...], str] | None:
    """Resolve command (split like a shell would: `ccache gcc` works) and ask its version."""
    words = shlex.split(command)
    path = shutil.which(words[0]) if words else None
    if path is None:
        return None
    argv = (path, *words[1:])
    try:
        proc = subprocess.run([*argv, "--version"], capture_output=True, text=True)
    except OSError:
        return None
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines:
        return None
    return argv, lines[0].strip()


#: The cache keys of the modules built (or found) with ``QUICK_FLAGS``.
_quick: set[str] = set()


def built_quickly(module: ModuleType) -> bool:
    """Whether ``build_module`` built ``module`` with ``QUICK_FLAGS``."""
    return cache.named(Path(module.__file__))[0] in _quick


def quick_builds() -> bool:
    """Whether large modules build quickly first (``tiered``): not where
    ``$PULLBACK_CFLAGS`` sets the optimisation level."""
    return not any(flag.startswith("-O") for flag in config.cflags())


def _cflags() -> list[str]:
    """Every compile flag asked for, before dropping what the compiler rejects."""
    return [*BASE_FLAGS, *OPTIONAL_FLAGS,
            f"-I{sysconfig.get_paths()['include']}",
            f"-I{_openblas() / 'include'}",
            f"-I{numpy.get_include()}",
            *config.cflags()]


def openblas_library() -> Path:
    """The OpenBLAS shared library modules link."""
    return next(p for p in sorted((_openblas() / "lib").glob("libscipy_openblas*"))
                if p.suffix in (".so", ".dylib"))


def _ldflags() -> list[str]:
    """Link OpenBLAS, found again at load time through an rpath."""
    library = openblas_library()
    lib_dir = library.parent
    flags = [f"-L{lib_dir}", f"-l{library.stem[3:]}", f"-Wl,-rpath,{lib_dir}"]
    if platform.system() == "Darwin":  # Python's symbols resolve when the module loads
        flags += ["-undefined", "dynamic_lookup"]
    return flags


#: The compiler probes' answers, found or being found, per compiler, version and flags.
_probes: dict[tuple[object, ...], Future[tuple[list[str], bool, list[str]]]] = {}
_probes_lock = threading.Lock()


def _probing(argv: tuple[str, ...], version: str, cflags: tuple[str, ...]
             ) -> Future[tuple[list[str], bool, list[str]]]:
    """The answers of ``_probed``: read from the cache or found by the probes and
    measurements, on a worker thread started by the first to ask (the libraries' builds
    need not wait for them); a probe that failed runs again for the next to ask."""
    with _probes_lock:
        job = _probes.get((argv, version, cflags))
        if job is None or (job.done() and job.exception() is not None):
            job = _probes[argv, version, cflags] = _workers().submit(
                _probe_and_measure, argv, version, cflags)
        return job


def _probed(argv: tuple[str, ...], version: str, cflags: tuple[str, ...]
            ) -> tuple[list[str], bool, list[str]]:
    """The flags this compiler accepts, whether vector math links, and the flags of the
    vector width measured to be fastest (``tuning.vector_flags``)."""
    return _probing(argv, version, cflags).result()


def _probe_and_measure(argv: tuple[str, ...], version: str, cflags: tuple[str, ...]
                       ) -> tuple[list[str], bool, list[str]]:
    accepted, vector = _probe_entry(argv, version, cflags)
    return accepted, vector, tuning.vector_flags(argv, accepted, vector, tuning.cpu_id())


def _probe_entry(argv: tuple[str, ...], version: str, cflags: tuple[str, ...]
                 ) -> tuple[list[str], bool]:
    """The probes' answers, cached on disk: they build small programs (a tenth of a
    second)."""
    path = cache.entry(cache.key("probes", argv, version, cflags), "probes.json",
                       lambda out: out.write_text(json.dumps(_probe(argv, cflags))))
    accepted, vector = json.loads(cache.payload(path))
    return accepted, vector


def _probe(argv: tuple[str, ...], cflags: tuple[str, ...]) -> tuple[list[str], bool]:
    """Build the probe program with every flag and vector math as a shared library whose
    every symbol must resolve (``_ALL_AT_ONCE``): where it comes out, one compile answers
    every probe (0.06 s of CPU, against 0.10 s for the two below; AMD EPYC).  Else build,
    at once, a shared library from a one-line C file (NoCompilerError unless it comes
    out: see ``_check_shared``) and the probe program with every optional flag and
    vector math; only where that fails, a program for each optional flag alone (at once),
    then the vector math probe with the flags accepted."""
    base = [flag for flag in cflags if flag in BASE_FLAGS]
    with cache.scratch("probe") as tmp:
        Path(tmp, "shared.c").write_text(_SHARED_PROBE_SOURCE)
        Path(tmp, "probe.c").write_text(_PROBE_SOURCE)
        made = Path(tmp, "probe.so")
        (status,) = _run_all(argv, tmp, [[*cflags, *_ALL_AT_ONCE, "-o", made.name]])
        if status == 0 and made.exists() and \
                cache.shared_object_problem(made.read_bytes()) is None:
            return list(cflags), True
        shared, everything = _run_all(argv, tmp, [[*base, "shared.c", "-o", "shared.so"],
                                                  _vector_math_probe(cflags)])
        _check_shared(shared, Path(tmp, "shared.so"))
        if everything == 0:
            return list(cflags), True
        statuses = _run_all(argv, tmp, [["-std=c11", flag, "probe.c", "-o", f"probe{k}"]
                                        for k, flag in enumerate(OPTIONAL_FLAGS)])
        rejected = {flag for flag, status in zip(OPTIONAL_FLAGS, statuses, strict=True)
                    if status != 0}
        accepted = [flag for flag in cflags if flag not in rejected]
        (vector,) = _run_all(argv, tmp, [_vector_math_probe(tuple(accepted))])
        return accepted, vector == 0


def _vector_math_probe(flags: tuple[str, ...]) -> list[str]:
    """The compiler's arguments building the probe program with vectorised math functions
    (glibc's libmvec) and those of the flags that shape the loop's code."""
    wanted = [f for f in flags if f.startswith(("-march", "-fopenmp", "-O"))]
    return ["-std=c11", *wanted, "-fno-math-errno", "-DPB_MVEC_PROBE", "probe.c", "-o",
            "probe", "-lmvec", "-lm"]


def _run_all(argv: tuple[str, ...], cwd: Path, commands: list[list[str]]) -> list[int]:
    """Run the compiler with each argument list, all at once, in cwd (as ``_run``); their
    exit statuses."""
    env = {**os.environ, "TMPDIR": str(cwd)}
    procs = [subprocess.Popen([*argv, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for args in commands]
    return [proc.wait() for proc in procs]


def _check_shared(status: int, made: Path) -> None:
    """Raise NoCompilerError (and remember why, for the rest of the process) unless the
    compiler built the shared library ``made`` (exit status ``status``): a program that
    answers --version and exits 0 without writing anything (PULLBACK_CC=echo) is no
    compiler."""
    problem = (f"exit status {status}" if status != 0 else
               "it wrote nothing" if not made.exists() else
               cache.shared_object_problem(made.read_bytes()))
    if problem is not None:
        command = config.compiler()
        _unusable[command] = (f"`{command}` is not a working C compiler: it built no shared "
                              f"library from a one-line C file ({problem})")
        raise NoCompilerError(_unusable[command],
                              hint="set PULLBACK_CC to a C compiler (gcc or clang)")


def _compile(command: list[str], ldflags: list[str], source: str, module_name: str,
             headers: dict[str, str], out: Path, pending: Sequence[Future[Path]] = (),
             prelude: Path | None = None) -> None:
    """Compile source into the shared object out, in a scratch directory removed however
    the build ends (Ctrl-C included) but for a failed compile, whose source is kept and
    said where.  A source the emitter marked (``units``) compiles as one translation unit
    per usable core, at once, and they are linked; with builds pending (the libraries it
    links), it compiles to object files, waits for them, then links.  ``prelude``: the
    precompiled prelude, linked in beside its header."""
    with cache.scratch(module_name, keep_on=BuildError) as build_dir:
        for name, text in headers.items():
            (build_dir / name).write_text(text)
        if prelude is not None:
            (build_dir / _GCH).symlink_to(prelude)
        source_path = build_dir / f"{module_name}.c"
        source_path.write_text(source)
        pieces = units.units(source, units.usable_cores())
        if len(pieces) == 1 and not pending:
            _check(_run([*command, source_path.name, "-o", str(out), *ldflags], build_dir),
                   source_path)
            return
        names = [source_path.name]
        if len(pieces) > 1:
            command = [*command, units.PART_FLAG]
            names = [f"{module_name}.unit{k}.c" for k in range(len(pieces))]
            for name, text in zip(names, pieces, strict=True):
                (build_dir / name).write_text(text)
        objects = [f"{name[:-2]}.o" for name in names]
        for proc in _run_at_once(
                [[*command, "-c", name, "-o", obj] for name, obj in zip(names, objects,
                                                                        strict=True)],
                build_dir):
            _check(proc, source_path)
        _finish(pending)
        _check(_run([*command, *objects, "-o", str(out), *ldflags], build_dir), source_path)


def _check(proc: subprocess.CompletedProcess[str], source_path: Path) -> None:
    """Raise BuildError unless the compiler succeeded."""
    if proc.returncode != 0:
        raise BuildError(_failure_message(proc.args, proc, source_path),
                         hint="check $PULLBACK_CC and $PULLBACK_CFLAGS; if they are "
                              "not the cause, this is a pullback bug: please report "
                              "it with the source file")


def _run_at_once(commands: list[list[str]], cwd: Path
                 ) -> list[subprocess.CompletedProcess[str]]:
    """Run the compiler with each argument list at once, in cwd (as ``_run``); those
    still running when this is interrupted are killed (their directory goes)."""
    env = {**os.environ, "TMPDIR": str(cwd)}
    procs: list[subprocess.Popen[str]] = []
    try:
        for argv in commands:
            procs.append(subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outputs = [proc.communicate() for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [subprocess.CompletedProcess(argv, proc.returncode, *output)
            for argv, proc, output in zip(commands, procs, outputs, strict=True)]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the compiler in cwd (relative file names keep the output free of temp paths),
    its own temporary files there too (TMPDIR), so that they go with it."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(cwd)})


def _failure_message(argv: list[str], proc: subprocess.CompletedProcess[str],
                     source_path: Path) -> str:
    """The command, where the source is kept, and the head of the compiler's stderr."""
    lines = proc.stderr.splitlines()
    shown = lines[:STDERR_LINES]
    if len(lines) > STDERR_LINES:
        shown.append(f"... ({len(lines) - STDERR_LINES} more lines)")
    return "\n".join([f"the C compiler failed (exit status {proc.returncode})",
                      f"  command: {shlex.join(argv)}",
                      f"  source kept in {source_path}",
                      *shown])


def _check_names(module_name: str, headers: Mapping[str, str]) -> None:
    """The module name must make a C identifier; header names must stay in the build dir."""
    if not (module_name.isidentifier() and module_name.isascii()):
        raise ValueError(f"module name {module_name!r} is not a C identifier")
    for name in headers:
        if Path(name).name != name or name in (".", ".."):
            raise ValueError(f"header name {name!r} is not a plain file name")


@functools.cache
def _openblas() -> Path:
    """The scipy-openblas32 package's folder, found without importing it (its import
    reads package metadata: tens of milliseconds on every cache hit)."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("the scipy-openblas32 package is missing",
                         hint="pip install scipy-openblas32 (a pullback dependency)")
    return Path(next(iter(spec.submodule_search_locations)))


#: How long idle OpenMP threads spin before they sleep, where our own kernels compute the
#: large products: long enough to meet the next barrier of a packed product (an MLP step
#: on two threads: 14.6 ms sleeping at once, 9.8 ms spinning 3000 times), short enough
#: that BLAS threads are not starved.
SPIN = "3000"
#: How long they spin where OpenBLAS computes the large products: about a hundred
#: microseconds, so a worker meets a loop that follows a product or a short step of a
#: time loop awake, and sleeps through a long product (2 threads, AMD EPYC: the LSTM
#: step 80.7 -> 61.0 ms median sleeping at once against this spin, the transformer 101
#: -> 78 ms, the CNN 19.1 -> 14.0 ms, the MLP 19.1 -> 19.2 ms; spinning without end,
#: the MLP's OpenBLAS threads starve: 54 ms against 16).
BLAS_SPIN = "100000"


def choose_threading() -> None:
    """How idle OpenMP threads wait, read once when the first compiled module loads
    OpenMP, unless the user has set it.  Where OpenBLAS computes the large products, they
    spin ``BLAS_SPIN`` times, then sleep.  Where the runtime's packed kernels do
    (``PULLBACK_GEMM=packed``, or measured faster on this machine by an earlier process:
    ``tuning.gemm_choice``), they spin ``SPIN`` times first."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    packed = (config.gemm() or _measured_gemm()) == "packed"
    os.environ["GOMP_SPINCOUNT"] = SPIN if packed else BLAS_SPIN


def _measured_gemm() -> str:
    """The GEMM choice an earlier process measured on this machine, without measuring
    or building anything (``""`` when none did)."""
    if not tuning.has_avx512(tuning.cpu_id()):
        return ""
    with contextlib.suppress(Exception):  # no usable cache or OpenBLAS: not measured
        return tuning.cached_gemm_choice(openblas_library(), tuning.cpu_id(),
                                         libraries.LIBRARIES["pbpacked"][0], units.team_size())
    return ""


# before any module this backend builds loads OpenMP and OpenBLAS
choose_threading()
