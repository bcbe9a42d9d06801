"""The native CPU backend: graph IR compiled to C, built into a CPython extension module.

``compile_func(func)`` generates C for the function and every function it calls
(``codegen``) and describes its entry (``pb_entry``): the glue library (``glue.c``),
linked by every module, makes of it a CPython function ``call(args, form)`` that checks
and reads NumPy arguments in place and makes NumPy results.  It builds the module with
the system compiler (``build``, cached on disk) and returns a callable with the
interpreter's calling convention: NumPy arguments in, a list of NumPy results out,
faults raised as the Python exception plain execution raises.

Threads: OpenMP loops and OpenBLAS's own threads take turns on the same cores, and how
idle OpenMP threads wait is read once, when the first compiled module loads OpenMP;
``build.choose_threading`` sets it (and ``OPENBLAS_CORETYPE`` where OpenBLAS would pick
slower kernels than the CPU runs) unless the user has.  How many threads, and how much
memory compiled functions keep between calls, ``limits`` reads and hands to the glue
library; a compiled function collected hands its kept memory back.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import config
from ...errors import at_run_time
from ...ir.core import Func, Module
from ...ir.types import StackType, TensorType
from ...ops.control import CHECK_EXCEPTIONS
from .build.compiler import NoCompilerError, build_module, choose_threading, warn_no_compiler_once
from .build.long_builds import check_size, reported
from .call import limits
from .emit.codegen import generate
from .loops.ir import LoopModule, Unsupported, ctype
from .loops.passes import run_loop_passes
from .loops.printer import format_module
from .lower.lowering import lower_module
from .plan.module import plan_module
from .prepare.columns import split_columns

_HERE = Path(__file__).parent / "runtime"
#: The headers of modules and runtime libraries.
HEADERS = {name: (_HERE / name).read_text() for name in ("runtime.h", "kernels.h")}
#: The runtime libraries modules link, and what a module calls that needs each: the
#: Python side of every call and the memory of calls (glue), and routines too large to
#: compile into each module: small products (kernels), large ones (packed) and LAPACK's
#: factorizations (lapack).  A
#: machine's first module builds those it needs at once, beside its own compile.
LIBRARIES = {name: ((_HERE / file).read_text(), re.compile(calls))
             for name, file, calls in (("pbglue", "glue.c", ""),
                                       ("pbkernels", "kernels.c", r"\bpb_gemm_(?:float|int)"),
                                       ("pbpacked", "packed.c", r"\bpb_gemm_packed_"),
                                       ("pblapack", "lapack.c", r"\bpb_lapack_"))}
choose_threading()

__all__ = ["Compiled", "NoCompilerError", "Unsupported", "compile_func", "source_of",
           "warn_no_compiler_once"]


#: Result arrays of at least this many bytes take memory NumPy freed from earlier ones
#: (``PB_BIG`` in ``glue.c``).
BIG_RESULT = 1 << 20

# The entry's calling convention, ``call(args, form)``: ``form`` is bytes, form[0] how the
# results come back (LIST, ONE: the only result, TUPLE), then three bytes per parameter:
# how it comes (ARRAY; SCALAR: a NumPy scalar of its type; FLOAT: a Python float for a weak
# float64 scalar) and its place in ``args`` (16 bits, little-endian), then one byte per
# result (ARRAY; NUMPY: a NumPy scalar; PYTHON: a Python scalar).  Arguments not of the
# compiled types give NotImplemented, so a caller can fall back to a converting path.
LIST, ONE, TUPLE = 0, 1, 2
ARRAY, SCALAR, FLOAT = 0, 1, 2
NUMPY, PYTHON = 1, 2

def form(shape: int, params: list[tuple[int, int]], results: list[int]) -> bytes:
    """The ``form`` argument of ``call``: (how, place) per parameter, how per result."""
    return bytes([shape, *(b for how, at in params for b in (how, at & 255, at >> 8)),
                  *results])


#: pullback's dtype codes in a module's entry (``PB_BOOL`` ... in ``runtime.h``).
PB_TYPES = {"bool": "PB_BOOL", "int32": "PB_INT32", "int64": "PB_INT64",
            "float32": "PB_FLOAT32", "float64": "PB_FLOAT64"}


def _entry(func: Func, name: str, notes: str) -> str:
    """The module's entry: ``pb_run``, which computes the results from the arguments the
    glue library read, and the description (``pb_entry``) the glue reads them by."""
    ins, outs = func.in_types, func.out_types
    if any(isinstance(t, StackType) for t in [*ins, *outs]):
        raise Unsupported("a compiled function cannot take or return a stack")
    args = [f"*(const {ctype(t.dtype)} *)in[{k}]" if t.shape == () else
            f"(const {ctype(t.dtype)} *)in[{k}]" for k, t in enumerate(ins)]
    args += [f"({ctype(t.dtype)} *)out[{k}]" for k, t in enumerate(outs)]
    lines = [f"/* what faults and prints say: {notes} */",
             "static int pb_run(pb_ctx *ctx, void *const *in, void *const *out) {",
             f"    return pbf_0(ctx{''.join(', ' + a for a in args)});",
             "}",
             "static pb_pool *pb_kept;"]
    params = []
    for k, t in enumerate([*ins, *outs]):
        dims = "NULL"
        if t.shape:
            lines.append(f"static const int64_t pb_dims{k}[] = {{{', '.join(map(str, t.shape))}}};")
            dims = f"pb_dims{k}"
        params.append(f"{{{PB_TYPES[t.dtype.name]}, {len(t.shape)}, {dims}}}")
    big = any(t.size * t.dtype.np.itemsize >= BIG_RESULT for t in outs if t.shape)
    lines += [
        f"static const pb_param pb_params[] = {{{', '.join(params) or '{0, 0, NULL}'}}};",
        f"static const pb_entry pb_this = {{{len(ins)}, {len(outs)}, {int(big)}, pb_params, "
        "pb_run, &pb_kept};",
        "",
        f"void *PyInit_{name}(void) {{  /* the module object */",
        f'    return pb_module_new("{name}", &pb_this);',
        "}",
        ""]
    return "\n".join(lines)


#: What every module includes: no Python or NumPy header (the glue library is the
#: Python side), so that a small module compiles in a few tens of milliseconds.
INCLUDES = "\n".join([
    '#include "runtime.h"',
    "#include <cblas.h>",
    "#ifdef _OPENMP",
    "#include <omp.h>",
    "#endif",
    "",
])


class Compiled:
    """A function compiled to native code, called like ``interp.run``; ``call(args,
    form)`` is the fast entry for callers that know the argument and result forms."""

    def __init__(self, func: Func, module: Any, checks: list, prints: list, source: str):
        self.func = func
        self.call = module.call
        self.checks = checks
        self.prints = prints
        self.source = source
        hooks = _Hooks(checks, prints)
        module.set_hooks(hooks._print, hooks._exception)
        limits.apply(module)
        weakref.finalize(self, module.release).atexit = False  # exit frees it all
        self.in_types = list(func.in_types)
        n_in = len(func.in_types)
        self.list_form = form(LIST, [(ARRAY, k) for k in range(n_in)],
                              [ARRAY] * len(func.out_types))

    def __call__(self, *args: Any) -> list[np.ndarray]:
        ins = tuple(_contiguous(np.asarray(x, dtype=t.dtype.np))
                    for x, t in zip(args, self.in_types, strict=True))
        outs = self.call(ins, self.list_form)
        if outs is NotImplemented:
            shapes = ", ".join(str(x.shape) for x in ins)
            types = ", ".join(map(str, self.in_types))
            raise ValueError(f"arguments of shapes ({shapes}) do not match ({types})")
        return outs


class _Hooks:
    """What a module's prints and faults say.  The module holds its hooks for good, so
    they hold only what they read: bound to a ``Compiled``, they would keep it from ever
    being collected (and its memory from being handed back)."""

    def __init__(self, checks: list, prints: list):
        self.checks = checks
        self.prints = prints

    def _print(self, k: int, data: tuple) -> None:
        eqn = self.prints[k]
        values = [np.frombuffer(b, x.type.dtype.np).reshape(x.type.shape).copy()
                  for b, x in zip(data, eqn.inputs, strict=True)]
        eqn.op.impl(*values, **eqn.params)

    def _exception(self, exc: str, msg: str, site: int, fvalues, ivalues) -> Exception:
        """The exception of a fault: a failed check's, formatted from the values it
        recorded, or the one the code named; either names the line of its fault site."""
        eqn = self.checks[site] if site >= 0 else None
        if eqn is not None and eqn.op.name == "check":
            values = [np.asarray(f if v.type.dtype.is_float else i, v.type.dtype.np)[()]
                      for v, f, i in zip(eqn.inputs[1:], fvalues, ivalues, strict=False)]
            error = CHECK_EXCEPTIONS[eqn.params["exc"]](eqn.params["fmt"].format(*values))
        else:
            kind = CHECK_EXCEPTIONS.get(exc) or _RUNTIME_EXCEPTIONS.get(exc, RuntimeError)
            error = kind(msg)
        return at_run_time(error, eqn.loc if eqn is not None else None)


#: What the runtime itself raises besides checks' exceptions (``runtime.h``, ``glue.c``).
_RUNTIME_EXCEPTIONS = {e.__name__: e for e in (MemoryError, RecursionError)}


def _contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous and a.flags.aligned else a.copy()


@dataclass
class Source:
    """A function's extension module before it is built: its name and C text, its loop
    IR as text, and the checks and prints its faults and output refer to."""

    name: str
    text: str
    module: LoopModule
    checks: list
    prints: list

    @property
    def loops(self) -> str:
        return format_module(self.module)


def source_of(func: Func) -> Source:
    """The C source of ``func``'s extension module (``PULLBACK_DUMP=loops`` prints its
    loop IR, ``PULLBACK_DUMP=c`` the C)."""
    module = Module.of(func)
    if any(not isinstance(t, TensorType) for t in [*func.in_types, *func.out_types]):
        raise Unsupported("a compiled function cannot take or return a stack")
    check_size(module)
    if config.columns():
        module = split_columns(module)
        if config.verifying():
            from ...ir.verify import verify
            verify(module)
    loops, checks, prints = lower_module(module, plan_module(module))
    loops = run_loop_passes(loops)
    body = generate(loops)
    # checks and prints share code whatever they say, and modules of one source share
    # their hooks: what they say (and the lines faults name) goes in the source, so
    # different messages differ
    notes = repr([(e.op.name, sorted(e.params.items())) for e in [*checks, *prints]] +
                 [(str(e.loc), e.loc.func) for e in checks if e.loc is not None])
    notes = notes.replace("*/", "* /")
    name = f"pb_{hashlib.sha256((body + _entry(func, '', notes)).encode()).hexdigest()[:16]}"
    return Source(name, "\n".join([INCLUDES, body, _entry(func, name, notes)]), loops, checks,
                  prints)


def compile_func(func: Func) -> Compiled:
    """Native code for ``func``; raises ``Unsupported`` for what the backend lacks."""
    src = source_of(func)
    if config.dumps("loops"):
        print(src.loops)
    if config.dumps("c"):
        print(src.text)
    libraries = {name: text for name, (text, calls) in LIBRARIES.items()
                 if calls.search(src.text)}
    lines = src.text.count("\n") + 1
    with reported(f"compiling {func.name} ({lines} lines of C)"):
        built = build_module(src.text, src.name, headers=HEADERS, libraries=libraries)
    return Compiled(func, built, src.checks, src.prints, src.text)
