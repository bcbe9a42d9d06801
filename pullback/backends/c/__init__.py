"""The native CPU backend: graph IR compiled to C, built into a CPython extension module.

``compile_func(func)`` generates C for the function and every function it calls
(``codegen``), wraps the entry in a CPython function ``run(inputs, outputs)`` that reads
and writes NumPy buffers directly, builds it with the system compiler (``build``,
cached on disk), and returns a callable with the interpreter's calling convention:
NumPy arguments in, a list of NumPy results out, faults raised as the Python exception
plain execution raises.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.core import Func, Module
from ...ir.types import StackType, TensorType
from ...ops.control import CHECK_EXCEPTIONS
from .build import NoCompilerError, build_module, warn_no_compiler_once
from .codegen import Unsupported, ctype, generate

RUNTIME = (Path(__file__).parent / "runtime.h").read_text()

__all__ = ["Compiled", "NoCompilerError", "Unsupported", "compile_func", "source_of",
           "warn_no_compiler_once"]


def _wrapper(func: Func) -> str:
    """The module's Python entry: buffers in, the entry function, results copied out."""
    ins, outs = func.in_types, func.out_types
    if any(isinstance(t, StackType) for t in [*ins, *outs]):
        raise Unsupported("a compiled function cannot take or return a stack")
    lines = [
        "static PyObject *pb_printer = NULL;",
        "",
        "/* debug_print: the operands' bytes to the Python printer, holding the GIL. */",
        "static int pb_print(int k, int n, const void **data, const size_t *bytes) {",
        "    PyGILState_STATE gil = PyGILState_Ensure();",
        "    PyObject *values = PyTuple_New(n);",
        "    for (int j = 0; j < n; j++)",
        "        PyTuple_SET_ITEM(values, j, PyBytes_FromStringAndSize(data[j], bytes[j]));",
        "    PyObject *r = PyObject_CallFunction(pb_printer, \"iN\", k, values);",
        "    int failed = r == NULL;",
        "    if (failed) PyErr_Clear();",
        "    Py_XDECREF(r);",
        "    PyGILState_Release(gil);",
        "    return failed;",
        "}",
        "",
        "static PyObject *pb_set_printer(PyObject *self, PyObject *fn) {",
        "    Py_XINCREF(fn);",
        "    Py_XSETREF(pb_printer, fn);",
        "    Py_RETURN_NONE;",
        "}",
        "",
        "static PyObject *pb_run(PyObject *self, PyObject *args) {",
        "    PyObject *ins, *outs;",
        "    if (!PyArg_ParseTuple(args, \"O!O!\", &PyTuple_Type, &ins, &PyTuple_Type, &outs))",
        "        return NULL;",
        f"    if (PyTuple_GET_SIZE(ins) != {len(ins)} || PyTuple_GET_SIZE(outs) != {len(outs)}) {{",
        "        PyErr_SetString(PyExc_TypeError, \"wrong number of buffers\");",
        "        return NULL;",
        "    }",
        f"    Py_buffer b[{len(ins) + len(outs) + 1}];",
        "    int got = 0;",
        f"    for (; got < {len(ins) + len(outs)}; got++) {{",
        f"        int out = got >= {len(ins)};",
        f"        PyObject *o = out ? PyTuple_GET_ITEM(outs, got - {len(ins)}) : "
        "PyTuple_GET_ITEM(ins, got);",
        "        if (PyObject_GetBuffer(o, &b[got], PyBUF_C_CONTIGUOUS | "
        "(out ? PyBUF_WRITABLE : 0)) < 0) {",
        "            while (got--) PyBuffer_Release(&b[got]);",
        "            return NULL;",
        "        }",
        "    }",
        "    pb_ctx ctx;",
        "    pb_ctx_init(&ctx);",
        "    ctx.print = pb_print;",
    ]
    call = []
    for k, t in enumerate(ins):
        ct = ctype(t.dtype)
        call.append(f"*({ct} *)b[{k}].buf" if t.shape == () else f"(const {ct} *)b[{k}].buf")
    for k, t in enumerate(outs):
        ct = ctype(t.dtype)
        if t.shape == ():
            lines.append(f"    {ct} r{k} = 0;")
            call.append(f"&r{k}")
        else:
            call.append(f"({ct} *)b[{len(ins) + k}].buf")
    lines += [
        "    int status;",
        "    Py_BEGIN_ALLOW_THREADS",
        f"    status = pbf_0(&ctx{''.join(', ' + c for c in call)});",
        "    if (!status) {",
    ]
    for k, t in enumerate(outs):
        if t.shape == ():
            lines.append(f"        *({ctype(t.dtype)} *)b[{len(ins) + k}].buf = r{k};")
    lines += [
        "    }",
        "    pb_free_all(&ctx);",
        "    Py_END_ALLOW_THREADS",
        f"    for (int k = 0; k < {len(ins) + len(outs)}; k++) PyBuffer_Release(&b[k]);",
        "    if (!status) Py_RETURN_NONE;",
        "    PyObject *fv = PyTuple_New(ctx.n_values), *iv = PyTuple_New(ctx.n_values);",
        "    for (int j = 0; j < ctx.n_values; j++) {",
        "        PyTuple_SET_ITEM(fv, j, PyFloat_FromDouble(ctx.fvalues[j]));",
        "        PyTuple_SET_ITEM(iv, j, PyLong_FromLongLong(ctx.ivalues[j]));",
        "    }",
        "    return Py_BuildValue(\"(ssiNN)\", ctx.exc ? ctx.exc : \"\", ctx.msg, ctx.check_id, "
        "fv, iv);",
        "}",
    ]
    return "\n".join(lines)


def _module_source(name: str, body: str, wrapper: str) -> str:
    return "\n".join([
        "#define PY_SSIZE_T_CLEAN",
        "#include <Python.h>",
        '#include "runtime.h"',
        "#include <cblas.h>",
        "#ifdef _OPENMP",
        "#include <omp.h>",
        "#endif",
        "",
        body,
        wrapper,
        "",
        "static PyMethodDef pb_methods[] = {",
        '    {"run", pb_run, METH_VARARGS, "run(inputs, outputs): None, or the fault"},',
        '    {"set_printer", pb_set_printer, METH_O, "set_printer(fn(k, operand bytes))"},',
        "    {NULL, NULL, 0, NULL}",
        "};",
        f"static struct PyModuleDef pb_module = {{PyModuleDef_HEAD_INIT, \"{name}\", NULL, "
        "-1, pb_methods};",
        f"PyMODINIT_FUNC PyInit_{name}(void) {{",
        "#ifdef _OPENMP",
        '    const char *threads = getenv("PULLBACK_NUM_THREADS");',
        "    if (threads && atoi(threads) > 0) omp_set_num_threads(atoi(threads));",
        "#endif",
        "    return PyModule_Create(&pb_module);",
        "}",
        "",
    ])


class Compiled:
    """A function compiled to native code, called like ``interp.run``."""

    def __init__(self, func: Func, module: Any, checks: list, prints: list, source: str):
        self.func = func
        self.module = module
        self.checks = checks
        self.prints = prints
        self.source = source
        module.set_printer(self._print)
        self.in_types = list(func.in_types)
        self.out_types = list(func.out_types)

    def __call__(self, *args: Any) -> list[np.ndarray]:
        ins = tuple(_contiguous(np.asarray(x, dtype=t.dtype.np))
                    for x, t in zip(args, self.in_types, strict=True))
        for x, t in zip(ins, self.in_types, strict=True):
            if x.shape != t.shape:
                raise ValueError(f"argument of shape {x.shape} does not match {t}")
        outs = [np.empty(t.shape, t.dtype.np) for t in self.out_types]
        fault = self.module.run(ins, tuple(outs))
        if fault is not None:
            raise self._exception(*fault)
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
    return a if a.flags.c_contiguous else a.copy()


def source_of(func: Func) -> tuple[str, str, list, list]:
    """The C source of ``func``'s extension module: its name, text, checks and prints."""
    module = Module.of(func)
    if any(not isinstance(t, TensorType) for t in [*func.in_types, *func.out_types]):
        raise Unsupported("a compiled function cannot take or return a stack")
    body, checks, prints = generate(module)
    wrapper = _wrapper(func)
    name = f"pb_{hashlib.sha256((body + wrapper).encode()).hexdigest()[:16]}"
    return name, _module_source(name, body, wrapper), checks, prints


def compile_func(func: Func) -> Compiled:
    """Native code for ``func``; raises ``Unsupported`` for what the backend lacks.
    ``PULLBACK_DUMP=c`` prints the C source."""
    name, source, checks, prints = source_of(func)
    if "c" in os.environ.get("PULLBACK_DUMP", "").split(","):
        print(source)
    built = build_module(source, name, headers={"runtime.h": RUNTIME})
    return Compiled(func, built, checks, prints, source)
