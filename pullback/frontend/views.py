"""Which NumPy operations return views, and how a write through one reaches its base.

Basic indexing writes back with ``setitem`` (``values.indexed``, which cells iterated
by native Python use too); axis permutations (``.T``, ``transpose``, ``swapaxes``,
``moveaxis``) and reshapes scatter the view's elements back to the positions they came
from, found by applying the same NumPy call to ``arange``.
``reshape``/``ravel`` are views only when the base is contiguous; of a strided array
NumPy may copy or not, so the result is entangled with the base instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import users_call
from ..ir.core import Atom, Lit
from ..numpy_api import ATTRIBUTES, CALLABLES, METHODS, OPERATORS
from ..numpy_api.manip import reshape_to
from .interface import Staging
from .lifting import has_ref, lower
from .values import Ref, View, indexed

#: ndarray methods and NumPy functions whose result is a view of their first argument.
VIEW_METHODS = {"transpose", "swapaxes", "reshape", "ravel", "squeeze"}
VIEW_FUNCTIONS = {np.transpose: "transpose", np.swapaxes: "swapaxes", np.reshape: "reshape",
                  np.ravel: "ravel", np.squeeze: "squeeze", np.expand_dims: "expand_dims",
                  np.moveaxis: "moveaxis", np.rollaxis: "rollaxis"}
#: NumPy functions whose results are a list of views of their first argument.
_SPLITS = {np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit}
_LAYOUT_DEPENDENT = {"reshape", "ravel"}
_READ_ONLY = {np.broadcast_to, np.diagonal, np.imag}  # imag: a real array's zeros
_READ_ONLY_METHODS = {"diagonal"}


def index_view(ref: Ref, idx: Any) -> Ref:
    return indexed(ref, idx, lower(idx), not has_ref(idx))


def _scatter_back(shape: tuple[int, ...], native: Callable[[np.ndarray], np.ndarray]
                  ) -> Callable[[Atom, Atom], Atom]:
    positions = np.asarray(users_call(native, np.arange(int(np.prod(shape))).reshape(shape)))
    positions = positions.ravel()
    flat = Lit(positions.astype(np.int64))

    def bwd(base: Atom, new: Atom) -> Atom:  # (a split's piece holds fewer elements)
        whole = reshape_to(base, (int(np.prod(shape)),))
        out = OPERATORS["setitem"](whole, flat, reshape_to(new, (positions.size,)))
        return reshape_to(out, shape)

    return bwd


def view_call(ref: Ref, name: str, mapping: Callable, args: list, kwargs: dict,
              native: Callable[[np.ndarray], Any]) -> Ref:
    """``mapping(ref, *args)`` as a view of ``ref`` (or entangled with it)."""
    low_args, low_kw = lower(args), lower(kwargs)
    fwd = lambda b: mapping(b, *low_args, **low_kw)  # noqa: E731
    static = not (has_ref(args) or has_ref(kwargs))
    if ref.kind != "array":
        return Ref(fwd(ref.get()))
    shape = ref.type.shape
    if name in _LAYOUT_DEPENDENT and not ref.contiguous:
        out = Ref(fwd(ref.get()), "array")
        out.entangle([ref])
        return out
    if name in _LAYOUT_DEPENDENT or name in ("squeeze", "expand_dims"):
        return View(ref, fwd, lambda b, new: reshape_to(new, shape), ref.contiguous,
                    native if static else None)
    return View(ref, fwd, _scatter_back(shape, native), native=native if static else None)


def view_attribute(stager: Staging, ref: Ref, name: str) -> Ref | None:
    if name == "real" and ref.kind == "array":  # a real array's real part is itself
        return ref
    if name == "imag":
        return read_only(Ref(ATTRIBUTES["imag"](ref.get())))
    if name != "T":
        return None
    if ref.kind != "array" or len(ref.type.shape) < 2:
        return ref if ref.kind == "array" else Ref(ref.get())
    return View(ref, ATTRIBUTES["T"], lambda b, new: ATTRIBUTES["T"](new),
                native=lambda a: a.T)


def call_view_method(ref: Ref, name: str, args: list, kwargs: dict) -> Ref | None:
    if name in VIEW_METHODS:
        return view_call(ref, name, METHODS[name], args, kwargs,
                         lambda a: getattr(a, name)(*args, **kwargs))
    if name in _READ_ONLY_METHODS:
        return read_only(Ref(METHODS[name](ref.get(), *lower(args), **lower(kwargs))))
    return None


def call_view_function(fn: Any, args: list, kwargs: dict) -> Ref | None:
    if not args or not isinstance(args[0], Ref):
        return None
    if fn in VIEW_FUNCTIONS:
        rest = args[1:]
        return view_call(args[0], VIEW_FUNCTIONS[fn], CALLABLES[fn], rest, kwargs,
                         lambda a: fn(a, *rest, **kwargs))
    if fn in _READ_ONLY:
        return read_only(Ref(CALLABLES[fn](*lower(args), **lower(kwargs))))
    if fn in _SPLITS and args[0].kind == "array" and not (has_ref(args[1:]) or has_ref(kwargs)):
        return _split_views(fn, args[0], args[1:], kwargs)
    if fn in (np.asarray, np.asanyarray, np.real) and len(args) == 1 and not kwargs \
            and args[0].kind == "array":
        return args[0]
    return None


def _split_views(fn: Any, ref: Ref, rest: list, kwargs: dict) -> list[Ref]:
    """The pieces of ``np.split`` and its kin, each a view written back through the
    positions NumPy's own split of ``arange`` gives it."""
    count = len(CALLABLES[fn](ref.get(), *rest, **kwargs))

    def piece(i: int) -> Ref:
        native = lambda a: fn(a, *rest, **kwargs)[i]  # noqa: E731
        return View(ref, lambda b: CALLABLES[fn](b, *rest, **kwargs)[i],
                    _scatter_back(ref.type.shape, native), native=native)

    return [piece(i) for i in range(count)]


def read_only(ref: Ref) -> Ref:
    ref.readonly = "assignment destination is read-only"
    return ref
