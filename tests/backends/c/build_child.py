"""A separate process for the cache tests, and the tiny extension module they compiler.

`python build_child.py load NAME [BARRIER_DIR PARTIES]` builds (or loads from the cache)
the module NAME and prints JSON: add(1.5, 2.0) and the seconds build_module took. With a
barrier it first waits until PARTIES processes are ready, so that they compile at once.
`python build_child.py linked NAME` builds (or loads) the module NAME that links two
libraries (LIBRARIES) and prints f(0.5).  `python build_child.py warn` calls
warn_no_compiler_once twice and prints how many warnings came out.
"""

import json
import os
import string
import sys
import time
import warnings
from array import array
from pathlib import Path

from pullback.backends.c.build import compiler

HEADERS = {"offset.h": "#ifndef OFFSET\n#define OFFSET 0.0\n#endif\n"}

_SOURCE = string.Template(r"""
#include <Python.h>
$includes

$body

static PyMethodDef methods[] = {{"f", f, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "$name", NULL, -1, methods};
PyMODINIT_FUNC PyInit_$name(void) { return PyModule_Create(&def); }
""")

_ADD = r"""
/* f(buffer of two doubles) -> their sum + OFFSET */
static PyObject *f(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const double *x = view.buf;
    double sum = view.len == 2 * sizeof(double) ? x[0] + x[1] + OFFSET : NAN;
    PyBuffer_Release(&view);
    return PyFloat_FromDouble(sum);
}
"""


def module_source(name: str, includes: str, body: str) -> str:
    """C source of a module `name` whose one function `f` is defined by body."""
    return _SOURCE.substitute(name=name, includes=includes, body=body)


def add_source(name: str) -> str:
    """The module adding two doubles from a buffer; it includes HEADERS' offset.h."""
    return module_source(name, '#include "offset.h"', _ADD)


def load(name: str, barrier: list[str]) -> None:
    if barrier:
        _wait(Path(barrier[0]), int(barrier[1]))
    start = time.perf_counter()
    module = compiler.build_module(add_source(name), name, headers=HEADERS)
    seconds = time.perf_counter() - start
    print(json.dumps({"result": module.f(array("d", [1.5, 2.0])), "seconds": seconds}))


def _wait(barrier: Path, parties: int) -> None:
    (barrier / str(os.getpid())).touch()
    deadline = time.monotonic() + 30
    while len(list(barrier.iterdir())) < parties and time.monotonic() < deadline:
        time.sleep(0.001)

#: f(x) = twice(x) + 1 by two libraries a module links.
_LINKED = r"""
double pb_t_twice(double x);
double pb_t_inc(double x);
static PyObject *f(PyObject *self, PyObject *args) {
    double x;
    if (!PyArg_ParseTuple(args, "d", &x)) return NULL;
    return PyFloat_FromDouble(pb_t_inc(pb_t_twice(x)));
}
"""
LIBRARIES = {"pbtwice": "double pb_t_twice(double x) { return 2 * x; }\n",
             "pbinc": "double pb_t_inc(double x) { return x + 1; }\n"}


def linked_module(name: str):
    return compiler.build_module(module_source(name, "", _LINKED), name, libraries=LIBRARIES)


def warn() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiler.warn_no_compiler_once()
        compiler.warn_no_compiler_once()
    print(json.dumps({"warnings": [str(w.message) for w in caught]}))


if __name__ == "__main__":
    if sys.argv[1] == "load":
        load(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "linked":
        print(json.dumps({"result": linked_module(sys.argv[2]).f(0.5)}))
    else:
        warn()
