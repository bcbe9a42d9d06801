"""The native CPU backend: graph IR compiled to C, built into a CPython extension module.

``compile_func(func)`` generates C for the function and every function it calls
(``codegen``), wraps the entry in a CPython function ``call(args, form)`` that checks
and reads NumPy arguments in place and makes NumPy results, builds it with the system
compiler (``build``, cached on disk), and returns a callable with the interpreter's
calling convention: NumPy arguments in, a list of NumPy results out, faults raised as
the Python exception plain execution raises.

Threads: OpenMP loops and OpenBLAS's own threads take turns on the same cores, and how
idle OpenMP threads wait is read once, when the first compiled module loads OpenMP;
``build.choose_threading`` sets it (and ``OPENBLAS_CORETYPE`` where OpenBLAS would pick
slower kernels than the CPU runs) unless the user has.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.core import Func, Module
from ...ir.types import StackType, TensorType
from ...ops.control import CHECK_EXCEPTIONS
from .build import NoCompilerError, build_module, choose_threading, warn_no_compiler_once
from .codegen import generate
from .loop_ir import LoopModule, Unsupported, ctype
from .loop_print import format_module
from .lower import lower_module

RUNTIME = (Path(__file__).parent / "runtime.h").read_text()
#: The runtime libraries modules link: what every module does alike between Python and
#: C, and routines too large to compile into each (products).
GLUE = (Path(__file__).parent / "glue.c").read_text()
KERNELS = (Path(__file__).parent / "kernels.c").read_text()
choose_threading()

__all__ = ["Compiled", "NoCompilerError", "Unsupported", "compile_func", "source_of",
           "warn_no_compiler_once"]


#: Result arrays of at least this many bytes take memory NumPy freed from earlier ones
#: (``PB_BIG`` in ``glue.c``).
BIG_RESULT = 1 << 20
NPY_TYPES = {"bool": "NPY_BOOL", "int32": "NPY_INT32", "int64": "NPY_INT64",
             "float32": "NPY_FLOAT32", "float64": "NPY_FLOAT64"}

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


_HOOKS = """\
static PyObject *pb_printer = NULL, *pb_faulter = NULL;

/* debug_print: the operands' bytes to the Python printer, holding the GIL. */
static int pb_print(int k, int n, const void **data, const size_t *bytes) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *values = PyTuple_New(n);
    for (int j = 0; j < n; j++)
        PyTuple_SET_ITEM(values, j, PyBytes_FromStringAndSize(data[j], bytes[j]));
    PyObject *r = PyObject_CallFunction(pb_printer, "iN", k, values);
    int failed = r == NULL;
    if (failed) PyErr_Clear();
    Py_XDECREF(r);
    PyGILState_Release(gil);
    return failed;
}

static PyObject *pb_set_hooks(PyObject *self, PyObject *args) {
    PyObject *printer, *faulter;
    if (!PyArg_ParseTuple(args, "OO", &printer, &faulter)) return NULL;
    Py_INCREF(printer);
    Py_XSETREF(pb_printer, printer);
    Py_INCREF(faulter);
    Py_XSETREF(pb_faulter, faulter);
    Py_RETURN_NONE;
}

/* Raise the fault the context records, as the exception the Python hook builds. */
static PyObject *pb_raise(const pb_ctx *ctx) {
    PyObject *fv = PyTuple_New(ctx->n_values), *iv = PyTuple_New(ctx->n_values);
    for (int j = 0; j < ctx->n_values; j++) {
        PyTuple_SET_ITEM(fv, j, PyFloat_FromDouble(ctx->fvalues[j]));
        PyTuple_SET_ITEM(iv, j, PyLong_FromLongLong(ctx->ivalues[j]));
    }
    PyObject *e = PyObject_CallFunction(pb_faulter, "ssiNN", ctx->exc ? ctx->exc : "",
                                        ctx->msg, ctx->check_id, fv, iv);
    if (e != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
    return NULL;
}

/* The runtime's glue library (glue.c, built once and linked by every module). */
extern PyObject *pb_kept_capsule;
int pb_glue_init(void);
void *pb_array_in(PyObject *o, int type, int nd, const npy_intp *dims);
int pb_scalar_in(PyObject *o, int type, void *v);
PyObject *pb_scalar_out(const void *v, int type, unsigned char code);
PyObject *pb_results(PyObject **r, int n, unsigned char shape);
"""


def _wrapper(func: Func, notes: str) -> str:
    """The module's Python entry ``call(args, form)``: arguments checked and read in
    place, array results allocated as NumPy arrays the entry function writes into."""
    ins, outs = func.in_types, func.out_types
    if any(isinstance(t, StackType) for t in [*ins, *outs]):
        raise Unsupported("a compiled function cannot take or return a stack")
    n_in, n_out = len(ins), len(outs)
    lines = [_HOOKS, f"/* what faults and prints say: {notes} */"]
    for k, t in enumerate([*ins, *outs]):
        if t.shape:
            dims = ", ".join(map(str, t.shape))
            lines.append(f"static const npy_intp pb_dims{k}[] = {{{dims}}};")
    lines += [
        "",
        "static PyObject *pb_call(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {",
        "    if (argc != 2 || !PyTuple_Check(argv[0]) || !PyBytes_Check(argv[1]) ||",
        f"        PyBytes_GET_SIZE(argv[1]) != {1 + 3 * n_in + n_out}) {{",
        '        PyErr_SetString(PyExc_TypeError, "call(args: tuple, form: bytes)");',
        "        return NULL;",
        "    }",
        "    const unsigned char *form = (const unsigned char *)PyBytes_AS_STRING(argv[1]);",
        f"    if (PyTuple_GET_SIZE(argv[0]) != {n_in}) Py_RETURN_NOTIMPLEMENTED;",
        f"    Py_ssize_t at[{max(n_in, 1)}];",
        f"    for (int k = 0; k < {n_in}; k++) {{",
        "        at[k] = form[2 + 3 * k] | form[3 + 3 * k] << 8;",
        f"        if (at[k] >= {n_in}) {{",
        '            PyErr_SetString(PyExc_ValueError, "call: a place beyond the arguments");',
        "            return NULL;",
        "        }",
        "    }",
    ]
    call = []
    big = any(t.size * t.dtype.np.itemsize >= BIG_RESULT for t in outs if t.shape)
    for k, t in enumerate(ins):
        ct, npy = ctype(t.dtype), NPY_TYPES[t.dtype.name]
        item = f"PyTuple_GET_ITEM(argv[0], at[{k}])"
        dims = f"pb_dims{k}" if t.shape else "NULL"
        lines.append(f"    const {ct} *a{k} = pb_array_in({item}, {npy}, {len(t.shape)}, {dims});")
        if t.shape == ():
            lines += [f"    {ct} v{k};",
                      f"    if (form[{1 + 3 * k}] == {SCALAR} && pb_scalar_in({item}, {npy}, "
                      f"&v{k})) a{k} = &v{k};"]
        if t.shape == () and t.dtype.name == "float64":
            lines += [f"    if (form[{1 + 3 * k}] == {FLOAT} && PyFloat_CheckExact({item})) {{",
                      f"        v{k} = PyFloat_AS_DOUBLE({item});",
                      f"        a{k} = &v{k};",
                      "    }"]
        lines.append(f"    if (!a{k}) Py_RETURN_NOTIMPLEMENTED;")
        call.append(f"*a{k}" if t.shape == () else f"a{k}")
    lines.append(f"    PyObject *r[{max(n_out, 1)}] = {{NULL}};")
    if big:
        lines.append("    PyObject *pb_handler = PyDataMem_SetHandler(pb_kept_capsule);")
    for k, t in enumerate(outs):
        ct = ctype(t.dtype)
        if t.shape == ():
            lines.append(f"    {ct} s{k} = 0;")
            call.append(f"&s{k}")
            continue
        lines.append(f"    r[{k}] = PyArray_SimpleNew({len(t.shape)}, pb_dims{n_in + k}, "
                     f"{NPY_TYPES[t.dtype.name]});")
        call.append(f"({ct} *)PyArray_DATA((PyArrayObject *)r[{k}])")
    if big:
        lines += ["    Py_XDECREF(PyDataMem_SetHandler(pb_handler));",
                  "    Py_XDECREF(pb_handler);"]
    lines += [f"    if (!r[{k}]) goto error;" for k, t in enumerate(outs) if t.shape]
    lines += [
        "    pb_ctx ctx;",
        "    pb_ctx_init(&ctx);",
        "    ctx.print = pb_print;",
        "    int status;",
        "    Py_BEGIN_ALLOW_THREADS",
        f"    status = pbf_0(&ctx{''.join(', ' + c for c in call)});",
        "    pb_free_all(&ctx);",
        "    Py_END_ALLOW_THREADS",
        "    if (status) {",
        "        pb_raise(&ctx);",
        "        goto error;",
        "    }",
    ]
    for k, t in enumerate(outs):
        if t.shape == ():
            lines += [f"    r[{k}] = pb_scalar_out(&s{k}, {NPY_TYPES[t.dtype.name]}, "
                      f"form[{1 + 3 * n_in + k}]);",
                      f"    if (!r[{k}]) goto error;"]
    lines += [
        f"    return pb_results(r, {n_out}, form[0]);",
        "error:",
        f"    for (int k = 0; k < {n_out}; k++) Py_XDECREF(r[k]);",
        "    return NULL;",
        "}",
    ]
    return "\n".join(lines)


#: What every module includes first (the build parses it once, as a precompiled header).
PRELUDE = "\n".join([
    "#define PY_SSIZE_T_CLEAN",
    "#include <Python.h>",
    "#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION",
    "#define NPY_TARGET_VERSION NPY_1_22_API_VERSION  /* PyDataMem_SetHandler */",
    "#include <numpy/arrayobject.h>",
    '#include "runtime.h"',
    "#include <cblas.h>",
    "#ifdef _OPENMP",
    "#include <omp.h>",
    "#endif",
    "",
])


def _module_source(name: str, body: str, wrapper: str) -> str:
    return "\n".join([
        PRELUDE,
        body,
        wrapper,
        "",
        "static PyMethodDef pb_methods[] = {",
        '    {"call", (PyCFunction)(void (*)(void))pb_call, METH_FASTCALL, '
        '"call(args, form): the results, or NotImplemented for other argument types"},',
        '    {"set_hooks", pb_set_hooks, METH_VARARGS, '
        '"set_hooks(printer(k, operand bytes), faulter(exc, msg, check, floats, ints))"},',
        "    {NULL, NULL, 0, NULL}",
        "};",
        f"static struct PyModuleDef pb_module = {{PyModuleDef_HEAD_INIT, \"{name}\", NULL, "
        "-1, pb_methods};",
        f"PyMODINIT_FUNC PyInit_{name}(void) {{",
        '    const char *threads = getenv("PULLBACK_NUM_THREADS");',
        "    if (threads && atoi(threads) > 0) {  /* loops and BLAS alike */",
        "#ifdef _OPENMP",
        "        omp_set_num_threads(atoi(threads));",
        "#endif",
        "        scipy_openblas_set_num_threads(atoi(threads));",
        "    }",
        "    import_array();",
        "    if (pb_glue_init()) return NULL;",
        "    return PyModule_Create(&pb_module);",
        "}",
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
        module.set_hooks(self._print, self._exception)
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

    def _print(self, k: int, data: tuple) -> None:
        eqn = self.prints[k]
        values = [np.frombuffer(b, x.type.dtype.np).reshape(x.type.shape).copy()
                  for b, x in zip(data, eqn.inputs, strict=True)]
        eqn.op.impl(*values, **eqn.params)

    def _exception(self, exc: str, msg: str, check_id: int, fvalues, ivalues) -> Exception:
        if check_id >= 0:
            eqn = self.checks[check_id]
            values = [np.asarray(f if v.type.dtype.is_float else i, v.type.dtype.np)[()]
                      for v, f, i in zip(eqn.inputs[1:], fvalues, ivalues, strict=False)]
            return CHECK_EXCEPTIONS[eqn.params["exc"]](eqn.params["fmt"].format(*values))
        kind = CHECK_EXCEPTIONS.get(exc) or {"MemoryError": MemoryError}.get(exc, RuntimeError)
        return kind(msg)


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
    loops, checks, prints = lower_module(module)
    body = generate(loops)
    # checks and prints share code whatever they say, and modules of one source share
    # their hooks: what they say goes in the source, so different messages differ
    notes = repr([(e.op.name, sorted(e.params.items())) for e in [*checks, *prints]])
    wrapper = _wrapper(func, notes.replace("*/", "* /"))
    name = f"pb_{hashlib.sha256((body + wrapper).encode()).hexdigest()[:16]}"
    return Source(name, _module_source(name, body, wrapper), loops, checks, prints)


def compile_func(func: Func) -> Compiled:
    """Native code for ``func``; raises ``Unsupported`` for what the backend lacks."""
    src = source_of(func)
    dump = os.environ.get("PULLBACK_DUMP", "").split(",")
    if "loops" in dump:
        print(src.loops)
    if "c" in dump:
        print(src.text)
    # only modules with products need the kernels (their one-time build takes a second)
    libraries = {"pbglue": GLUE, **({"pbkernels": KERNELS} if "pb_gemm_" in src.text else {})}
    built = build_module(src.text, src.name, headers={"runtime.h": RUNTIME},
                         libraries=libraries, prelude=PRELUDE)
    return Compiled(func, built, src.checks, src.prints, src.text)
