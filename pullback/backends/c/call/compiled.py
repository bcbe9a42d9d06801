"""A built module as a Python callable, and what its prints and faults say.

What a module's hooks need of lowering is data (``Site``, ``Printed``), not IR, so that
a module taken from the cache's index (``index.py``) is called without lowering again."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ....errors import Loc, at_run_time
from ....ir.core import Eqn, Func
from ....ir.op import get_op
from ....ops.control import CHECK_EXCEPTIONS
from . import limits
from .convention import ARRAY, LIST, form


class Site(NamedTuple):
    """A fault site: where its exception points (``loc``) and, for a ``check``, the
    exception it raises, its message's format and the dtypes of the values formatted."""

    loc: Loc | None
    exc: str | None = None  # None: not a check (the code names the exception)
    fmt: str = ""
    dtypes: tuple[str, ...] = ()

    @classmethod
    def of(cls, eqn: Eqn) -> Site:
        if eqn.op.name != "check":
            return cls(eqn.loc)
        return cls(eqn.loc, eqn.params["exc"], eqn.params["fmt"],
                   tuple(v.type.dtype.name for v in eqn.inputs[1:]))


class Printed(NamedTuple):
    """A print: its op, the op's params and the dtype and shape of each value printed."""

    op: str
    params: dict[str, Any]
    values: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def of(cls, eqn: Eqn) -> Printed:
        return cls(eqn.op.name, dict(eqn.params),
                   tuple((x.type.dtype.name, tuple(x.type.shape)) for x in eqn.inputs))


class Compiled:
    """A function compiled to native code, called like ``interp.run``; ``call(args,
    form)`` is the fast entry for callers that know the argument and result forms.
    ``source``: the module's C, or what makes it again when asked (a module the index
    gave has none at hand).  ``upgrade``: for a module built quickly, what builds it
    optimised (``tiered``), else None."""

    def __init__(self, func: Func, module: Any, sites: Sequence[Site],
                 prints: Sequence[Printed], source: str | Callable[[], str]):
        self.func = func
        self.call = module.call
        self.bind = module.bind  # the entry bound to a call's fixed scalars and globals
        self.file: str = module.__file__  # the cache entry it was loaded from
        self.sites = list(sites)
        self.prints = list(prints)
        self._source = source
        self.upgrade: Callable[[], Compiled] | None = None
        hooks = _Hooks(self.sites, self.prints)
        module.set_hooks(hooks._print, hooks._exception)
        limits.apply(module)
        weakref.finalize(self, module.release).atexit = False  # exit frees it all
        self.in_types = list(func.in_types)
        n_in = len(func.in_types)
        self.list_form = form(LIST, [(ARRAY, k) for k in range(n_in)],
                              [ARRAY] * len(func.out_types))

    @property
    def source(self) -> str:
        """The module's C text."""
        if callable(self._source):
            self._source = self._source()
        return self._source

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

    def __init__(self, sites: list[Site], prints: list[Printed]):
        self.sites = sites
        self.prints = prints

    def _print(self, k: int, data: tuple) -> None:
        printed = self.prints[k]
        values = [np.frombuffer(b, dtype).reshape(shape).copy()
                  for b, (dtype, shape) in zip(data, printed.values, strict=True)]
        get_op(printed.op).impl(*values, **printed.params)

    def _exception(self, exc: str, msg: str, site: int, fvalues, ivalues) -> Exception:
        """The exception of a fault: a failed check's, formatted from the values it
        recorded, or the one the code named; either names the line of its fault site."""
        where = self.sites[site] if site >= 0 else None
        if where is not None and where.exc is not None:
            values = [np.asarray(f if np.dtype(t).kind == "f" else i, t)[()]
                      for t, f, i in zip(where.dtypes, fvalues, ivalues, strict=False)]
            error = CHECK_EXCEPTIONS[where.exc](where.fmt.format(*values))
        else:
            kind = CHECK_EXCEPTIONS.get(exc) or _RUNTIME_EXCEPTIONS.get(exc, RuntimeError)
            error = kind(msg)
        return at_run_time(error, where.loc if where is not None else None)


#: What the runtime itself raises besides checks' exceptions (``runtime.h``, ``glue.c``).
_RUNTIME_EXCEPTIONS = {e.__name__: e for e in (MemoryError, RecursionError)}


def _contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous and a.flags.aligned else a.copy()
