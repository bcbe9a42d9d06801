"""A built module as a Python callable, and what its prints and faults say."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ....errors import at_run_time
from ....ir.core import Func
from ....ops.control import CHECK_EXCEPTIONS
from . import limits
from .convention import ARRAY, LIST, form


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
