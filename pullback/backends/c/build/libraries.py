"""The runtime's C sources a build needs: the headers of modules and runtime libraries,
and the libraries modules link."""

from __future__ import annotations

import re
from pathlib import Path

from .... import config
from . import tuning

_RUNTIME = Path(__file__).parent.parent / "runtime"
#: The header every module includes first and only (``emit/entry.py``), which the
#: compiler precompiles (``compiler.build_module``).
PRELUDE = "module.h"
#: The headers of modules and runtime libraries.
HEADERS = {name: (_RUNTIME / name).read_text() for name in ("runtime.h", "kernels.h", PRELUDE)}
#: The runtime libraries modules link, and what a module calls that needs each: the
#: Python side of every call and the memory of calls (glue), and routines too large to
#: compile into each module: small products (kernels, one library per element type, as
#: kernels.c's PB_KERNEL_TYPES picks), large ones (packed) and LAPACK's factorizations
#: (lapack).  A machine's first module builds those it needs at once, beside its own
#: compile.
_KERNEL_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t",
                 "int64": "int64_t"}
LIBRARIES = {
    **{name: ((_RUNTIME / file).read_text(), re.compile(calls))
       for name, file, calls in (("pbglue", "glue.c", ""),
                                 ("pbpacked", "packed.c", r"\bpb_gemm_packed_"),
                                 ("pblapack", "lapack.c", r"\bpb_lapack_"))},
    **{f"pbkernels_{s}": (f"#define PB_KERNEL_TYPES(X) X({s}, {t})\n"
                          + (_RUNTIME / "kernels.c").read_text(),
                          re.compile(rf"\bpb_gemm_{s}\b"))
       for s, t in _KERNEL_TYPES.items()}}


#: Flags a library's build adds to the modules' (part of its cache key): the glue's code
#: (checking arguments, making results, the pool) runs once per call or buffer, and -O1
#: builds it in 60% of the CPU time -O3 takes (0.29 against 0.47 s), most of a first
#: call's start-up, for the same code per call (a call of a two-argument function:
#: 1,538 instructions in the glue at -O1, 1,544 at -O3, 1,627 at -Og; callgrind).
FLAGS = {"pbglue": ("-O1",)}


def needed(text: str) -> dict[str, str]:
    """The libraries (name: C text) a module of C ``text`` links: not the packed kernels
    where its compile drops their calls (``packed_called``)."""
    return {name: source for name, (source, calls) in LIBRARIES.items()
            if calls.search(text) and (name != "pbpacked" or packed_called())}


def packed_called() -> bool:
    """Whether modules may call the packed kernels: runtime.h's ``pb_packed_gemm`` is a
    constant 0 unless they compile for AVX-512, and their calls are dropped, so a
    machine's first module with large products does not wait for the library's build
    (0.05 s of CPU and a compiler process; AMD EPYC).  With flags of the user's
    (``PULLBACK_CFLAGS``, which may ask for AVX-512) they are linked as before."""
    return bool(config.cflags()) or tuning.has_avx512(tuning.cpu_id())


def linked_by_all() -> dict[str, str]:
    """The libraries (name: C text) every module links, whatever it calls."""
    return needed("")
