"""Compile generated C into a CPython extension module and import it, through the cache.

The compiler is ``$PULLBACK_CC`` (else ``cc``), run with ``-O3 -march=native -fopenmp``
(the last two dropped where the compiler rejects them, e.g. clang without libomp) and
``$PULLBACK_CFLAGS`` appended. Matrix products link OpenBLAS from the ``scipy-openblas32``
wheel: its CBLAS symbols carry the prefix ``BLAS_PREFIX`` (``scipy_cblas_dgemm``; the
enums keep their names, ``CblasRowMajor``) and its integers are 32-bit ``blasint``.
Generated modules include ``runtime.h``, ``BLAS_HEADER`` and ``<omp.h>``; the runtime
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
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy

from .... import config
from ....errors import CompileError
from ..build import cache

if TYPE_CHECKING:
    from concurrent.futures import Future

BLAS_PREFIX = "scipy_"
BLAS_HEADER = "cblas.h"

BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-std=c11", "-fno-strict-aliasing",
              "-fno-math-errno", "-Werror=implicit-function-declaration")
OPTIONAL_FLAGS = ("-march=native", "-fopenmp")
STDERR_LINES = 50

# A loop calling a math function that glibc's libmvec has in vector form: when it links,
# generated code may declare those functions `omp declare simd` (PB_MVEC) and link -lmvec.
_MVEC_PROBE = """\
#include <math.h>
#pragma omp declare simd notinbranch
float expf(float);
float x[64];
int main(void) {
    #pragma omp simd
    for (int i = 0; i < 64; i++) x[i] = expf(x[i]);
    return 0;
}
"""

_SHARED_PROBE_SOURCE = "int pb_probe(void) { return 0; }\n"

_PROBE_SOURCE = """\
#ifdef _OPENMP
#include <omp.h>
#endif
int main(void) {
#ifdef _OPENMP
    return omp_get_max_threads() > 0 ? 0 : 1;
#else
    return 0;
#endif
}
"""


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
                 libraries: Mapping[str, str] | None = None) -> ModuleType:
    """Compile source (which defines PyInit_<module_name>) and import it, or take it from
    the cache; headers (file name -> text) are written beside the source and beside the
    libraries' (name -> C source): shared libraries the module links, each built once.
    Libraries not yet in the cache build on threads of their own while the module
    compiles (the first module with products on a machine waits for the longest build,
    not for all of them in turn)."""
    headers = dict(headers or {})
    _check_names(module_name, headers)
    found = _compiler()
    if found is None:
        raise NoCompilerError(_no_compiler_message(),
                              hint="install gcc or clang, or set PULLBACK_CC to a C compiler")
    argv, version = found
    cflags = _cflags()
    linked = [_library(argv, version, tuple(cflags), name, text, headers)
              for name, text in sorted((libraries or {}).items())]
    paths = [cache.path(key, file) for key, file, _ in linked]
    ldflags = [*map(str, paths), *(f"-Wl,-rpath,{p.parent}" for p in paths[:1]), *_ldflags()]
    key = cache.key(source, sorted(headers.items()), argv, version, cflags, ldflags,
                    module_name, numpy.__version__, sysconfig.get_config_var("EXT_SUFFIX"),
                    _cpu_id())
    missing = [entry for entry in linked if cache.existing(*entry[:2]) is None]
    if missing:
        _probed(argv, version, tuple(cflags))  # once, before the threads that read it
    with _building(missing) as pending:

        def build(out: Path) -> None:
            accepted, vector = _probed(argv, version, tuple(cflags))
            command = [*argv, *accepted, *(["-DPB_MVEC"] if vector else [])]
            link = [*ldflags, *(["-lmvec", "-lm"] if vector else [])]
            _compile(command, link, source, module_name, headers, out, pending)

        if pending and cache.existing(key, f"{module_name}.so") is not None:
            _finish(pending)  # a module found in the cache loads its libraries at once
        return cache.load(key, module_name, build)


def _library(argv: tuple[str, ...], version: str, cflags: tuple[str, ...], name: str,
             source: str, headers: dict[str, str]
             ) -> tuple[str, str, Callable[[Path], None]]:
    """The cache key, file name and build of the shared library ``lib<name>`` (its file
    name, with the key, is also its soname: the modules linking it find it through an
    rpath)."""
    key = cache.key("library", name, source, sorted(headers.items()), argv, version, cflags,
                    numpy.__version__, sysconfig.get_config_var("EXT_SUFFIX"), _cpu_id())
    soname = f"lib{name}-{key}.so"

    def build(out: Path) -> None:
        accepted, _ = _probed(argv, version, cflags)
        install = f"-Wl,-install_name,@rpath/{soname}" if platform.system() == "Darwin" \
            else f"-Wl,-soname,{soname}"
        python = ["-undefined", "dynamic_lookup"] if platform.system() == "Darwin" else []
        _compile([*argv, *accepted, "-ffp-contract=fast", install], python, source,
                 f"lib{name}", headers, out)

    return key, f"lib{name}.so", build


@contextlib.contextmanager
def _building(entries: list[tuple[str, str, Callable[[Path], None]]]
              ) -> Iterator[list[Future[Path]]]:
    """The cache entries built, each on a thread of its own (a compiler process), while
    the body runs; on the way out every build has ended."""
    if not entries:
        yield []
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(entries), thread_name_prefix="pullback-library") as pool:
        yield [pool.submit(cache.entry, *entry) for entry in entries]


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


@functools.cache
def _probed(argv: tuple[str, ...], version: str, cflags: tuple[str, ...]
            ) -> tuple[list[str], bool]:
    """The flags this compiler accepts and whether vector math links: probes that build
    small programs (a fifth of a second), so their answers are cached on disk too."""

    def probe(out: Path) -> None:
        _check_builds_shared_libraries(argv, cflags)
        rejected = _rejected_flags(argv)
        accepted = [flag for flag in cflags if flag not in rejected]
        out.write_text(json.dumps([accepted, _has_vector_math(argv, tuple(accepted))]))

    path = cache.entry(cache.key("probes", argv, version, cflags), "probes.json", probe)
    accepted, vector = json.loads(cache.payload(path))
    return accepted, vector


def _check_builds_shared_libraries(argv: tuple[str, ...], cflags: tuple[str, ...]) -> None:
    """Raise NoCompilerError (and remember why, for the rest of the process) unless the
    compiler builds a shared library from a one-line C file: a program that answers
    --version and exits 0 without writing anything (PULLBACK_CC=echo) is no compiler."""
    base = [flag for flag in cflags if flag in BASE_FLAGS]
    with cache.scratch("probe") as tmp:
        Path(tmp, "probe.c").write_text(_SHARED_PROBE_SOURCE)
        proc = _run([*argv, *base, "probe.c", "-o", "probe.so"], tmp)
        made = Path(tmp, "probe.so")
        problem = (f"exit status {proc.returncode}" if proc.returncode != 0 else
                   "it wrote nothing" if not made.exists() else
                   cache.shared_object_problem(made.read_bytes()))
    if problem is not None:
        command = config.compiler()
        _unusable[command] = (f"`{command}` is not a working C compiler: it built no shared "
                              f"library from a one-line C file ({problem})")
        raise NoCompilerError(_unusable[command],
                              hint="set PULLBACK_CC to a C compiler (gcc or clang)")


def _rejected_flags(argv: tuple[str, ...]) -> frozenset[str]:
    """The optional flags this compiler cannot build and link a program with."""
    with cache.scratch("probe") as tmp:
        Path(tmp, "probe.c").write_text(_PROBE_SOURCE)
        return frozenset(flag for flag in OPTIONAL_FLAGS
                         if _run([*argv, "-std=c11", flag, "probe.c", "-o", "probe"],
                                 tmp).returncode != 0)


def _has_vector_math(argv: tuple[str, ...], flags: tuple[str, ...]) -> bool:
    """Whether vectorised math functions (glibc's libmvec) link with these flags."""
    wanted = [f for f in flags if f.startswith(("-march", "-fopenmp", "-O"))]
    with cache.scratch("probe") as tmp:
        Path(tmp, "probe.c").write_text(_MVEC_PROBE)
        return _run([*argv, *wanted, "-fno-math-errno", "probe.c", "-o", "probe", "-lmvec",
                     "-lm"], tmp).returncode == 0


def _compile(command: list[str], ldflags: list[str], source: str, module_name: str,
             headers: dict[str, str], out: Path, pending: Sequence[Future[Path]] = ()
             ) -> None:
    """Compile source into the shared object out, in a scratch directory removed however
    the build ends (Ctrl-C included) but for a failed compile, whose source is kept and
    said where.  With builds pending (the libraries it links), compile to an object
    file, wait for them, then link."""
    with cache.scratch(module_name, keep_on=BuildError) as build_dir:
        for name, text in headers.items():
            (build_dir / name).write_text(text)
        source_path = build_dir / f"{module_name}.c"
        source_path.write_text(source)
        steps = [[*command, source_path.name, "-o", str(out), *ldflags]]
        if pending:
            steps = [[*command, "-c", source_path.name, "-o", f"{module_name}.o"],
                     [*command, f"{module_name}.o", "-o", str(out), *ldflags]]
        for k, argv in enumerate(steps):
            if k:
                _finish(pending)
            proc = _run(argv, build_dir)
            if proc.returncode != 0:
                raise BuildError(_failure_message(argv, proc, source_path),
                                 hint="check $PULLBACK_CC and $PULLBACK_CFLAGS; if they are "
                                      "not the cause, this is a pullback bug: please report "
                                      "it with the source file")


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


#: The AVX-512 subsets OpenBLAS's SkylakeX kernels use.
_AVX512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


def blas_core(cpuinfo: str) -> str | None:
    """The OpenBLAS core type to ask for on this CPU, when its own choice is worse: its
    dynamic dispatch gives AMD processors with AVX-512 (Zen 4 and later) the AVX2
    "Haswell" kernels, at half the speed of its AVX-512 "SkylakeX" kernels on them
    (sgemm 256x1024x1024, one thread: 110 against 200 GFLOP/s)."""
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, re.M)
    flags = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    if vendor and vendor[1] == "AuthenticAMD" and flags and _AVX512 <= set(flags[1].split()):
        return "SkylakeX"
    return None


#: OpenBLAS core types with AVX-512 kernels (the runtime's packed products defer to them).
WIDE_CORES = ("Skylake", "Cooperlake", "SapphireRapids")
#: How long idle OpenMP threads spin before they sleep, where our own kernels compute the
#: large products: long enough to meet the next barrier of a packed product (an MLP step
#: on two threads: 14.6 ms sleeping at once, 9.8 ms spinning 3000 times), short enough
#: that BLAS threads are not starved.
SPIN = "3000"


def _first_cpu() -> str:
    """The first processor's entry of /proc/cpuinfo (empty elsewhere)."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as cpuinfo:
            return "".join(iter(cpuinfo.readline, "\n"))
    return ""


def choose_threading() -> None:
    """Settings read once, when the first compiled module loads OpenBLAS and OpenMP, that
    the user has not made: ``OPENBLAS_CORETYPE`` where ``blas_core`` asks for one, and how
    idle OpenMP threads wait.  Where OpenBLAS computes the large products, they sleep at
    once (``OMP_WAIT_POLICY=PASSIVE``): spinning, they starve OpenBLAS's threads (an MLP
    step on two threads: 54 ms spinning, 16 ms sleeping).  Where the runtime's packed
    kernels do (see ``runtime.h``), they spin ``SPIN`` times first."""
    cpu = _first_cpu()
    wanted = blas_core(cpu)
    if "OPENBLAS_CORETYPE" not in os.environ and wanted:
        os.environ["OPENBLAS_CORETYPE"] = wanted
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    flags = re.search(r"^flags\s*:(.*)$", cpu, re.M)
    core = os.environ.get("OPENBLAS_CORETYPE", "")
    choice = config.gemm()
    packed = choice == "packed" or (choice != "blas" and flags is not None and
                                    "avx512f" in flags[1].split() and core != "" and
                                    not any(w.lower() in core.lower() for w in WIDE_CORES))
    if packed:
        os.environ["GOMP_SPINCOUNT"] = SPIN
    else:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


@functools.cache
def _cpu_id() -> str:
    """What -march=native targets: the feature list of the first CPU (Linux), else the
    processor's name."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):  # x86, arm
                    return line.strip()
    return f"{platform.machine()} {platform.processor()}"


# before any module this backend builds loads OpenMP and OpenBLAS
choose_threading()
