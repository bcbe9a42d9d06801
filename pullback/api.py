"""The public entry points: ``jit`` compiles a Python function per argument signature,
``make_ir`` shows what it compiles to.

Arguments are pytrees.  NumPy arrays, NumPy scalars and Python floats are run-time
values; Python ints, bools, strings, None and other objects are compile-time (static)
values, part of the cache key, as are the arguments named in ``static_argnames``.
``PULLBACK_VERIFY=1`` runs the IR verifier on every specialisation (the tests do).
Specialisations run as native code (``backend="c"``, the default) or on the interpreter
(``backend="interp"`` or ``PULLBACK_BACKEND=interp``; also where no C compiler works).
"""

from __future__ import annotations

import functools
import inspect
import operator
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from . import numpy_api  # noqa: F401  (registers the NumPy mappings)
from .backends import interp
from .errors import ConcretizationError, UnsupportedError, array_subclass, internal_errors
from .frontend.lowering import has_ref
from .frontend.stager import Stager
from .frontend.values import Ref
from .ir.builder import Builder
from .ir.core import Func
from .ir.types import type_of_value
from .ir.verify import verify
from .keys import Registry, callable_key, value_key
from .passes.manager import optimize, verifying
from .tree import TreeDef, tree_flatten, tree_unflatten

BACKENDS = ("interp", "c")


def _leaf_kind(x: Any) -> str | None:
    """How a leaf is passed: 'array', 'scalar' (NumPy), 'python' (float), None (static)."""
    if isinstance(x, np.ndarray):
        return "array"
    if isinstance(x, np.generic):
        return "scalar"
    if isinstance(x, float):
        return "python"
    return None


def _static_key(x: Any) -> Any:
    """A compile-time value in the cache key: by value, never by ``id`` (a later object may
    reuse it); what cannot be compared by value is refused."""
    return value_key(x, strict=True)


@dataclass
class Signature:
    """What a compiled specialisation depends on, and how to feed it."""

    key: tuple
    tree: TreeDef
    leaves: list
    dynamic: list[int]  # positions of run-time leaves, first occurrence of each array
    alias: list[int]  # for each run-time leaf, the position of its first occurrence


def signature(fn: Callable, args: tuple, kwargs: dict, static_argnames: Sequence[str],
              params: inspect.Signature | None = None) -> Signature:
    """The cache key and feeding plan of a call; ``params`` is ``fn``'s signature when the
    caller has it already."""
    bound = (params or inspect.signature(fn)).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    static = {n: arguments.pop(n) for n in static_argnames if n in arguments}
    leaves, tree = tree_flatten(arguments)
    key_parts, dynamic, alias = [], [], []
    first: dict[int, int] = {}
    for i, x in enumerate(leaves):
        kind = _leaf_kind(x)
        if kind is None:
            key_parts.append(_static_key(x))
            continue
        if kind == "array" and type(x) is not np.ndarray:
            raise array_subclass(x)
        j = first.setdefault(id(x), i) if kind == "array" else i
        if j == i:
            dynamic.append(i)
        alias.append(j)
        contiguous = bool(x.flags.c_contiguous) if kind == "array" else True
        key_parts.append((kind, np.shape(x), np.asarray(x).dtype.str, contiguous, j))
    key = (tree, tuple(key_parts), tuple(sorted((n, _static_key(v)) for n, v in static.items())))
    return Signature(key, tree, [*leaves, static], dynamic, alias)


@dataclass
class Staged:
    """A staged specialisation: the IR and how to rebuild results and write back."""

    func: Func
    outputs: list  # per result leaf: ('dyn', kind, weak), ('arg', leaf) or ('static', value)
    out_tree: TreeDef
    writeback: list[int]  # leaf positions of arguments the function mutates
    runner: Callable[..., list] | None = None  # the compiled function (None: interpreter)
    staged_func: Func | None = None  # the IR as staged, before the optimisation passes
    extra: int = 0  # parameters the staging added after the arguments' (see pb.vjp)

    def run(self, *inputs: Any) -> list:
        if self.runner is not None:
            return self.runner(*inputs)
        return interp.run(self.func, *inputs)


@dataclass
class Lowered:
    """One specialisation, stage by stage (``pb.jit(f).lower(*args)``)."""

    staged: Func  # the IR the frontend staged
    passes: list[tuple[str, Func]]  # the IR after each optimisation pass
    ir: Func  # the IR that runs
    backend: str

    @property
    def source(self) -> str:
        """The generated C (the native backend's module for this IR)."""
        from .backends import c

        return c.source_of(self.ir).text

    @property
    def loops(self) -> str:
        """The loop IR the C is printed from: kernels, buffers, library calls."""
        from .backends import c

        return c.source_of(self.ir).loops

    def compile(self) -> Callable[..., list]:
        """A callable running the IR natively (``c``) or on the interpreter."""
        if self.backend == "c":
            from .backends import c

            return c.compile_func(self.ir)
        return lambda *inputs: interp.run(self.ir, *inputs)


def _compile(staged: Staged, backend: str) -> None:
    """Native code for ``staged`` when the backend is ``c``; the interpreter runs what the
    C backend cannot compile yet (with a warning once per reason)."""
    if backend != "c":
        return
    from .backends import c

    try:
        staged.runner = c.compile_func(staged.func)
    except c.Unsupported as e:
        _warn_once(f"pullback: running {staged.func.name} on the interpreter: {e}")
    except c.NoCompilerError:
        c.warn_no_compiler_once()


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def stage(fn: Callable, sig: Signature, name: str) -> Staged:
    *leaves, static = sig.leaves
    stager = Stager()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 12000))  # staging nests deeper than running
    try:
        return _stage(fn, sig, name, stager, leaves, static)
    finally:
        sys.setrecursionlimit(limit)


def _stage(fn: Callable, sig: Signature, name: str, stager: Stager, leaves: list,
           static: dict) -> Staged:
    with Builder() as b:
        cells: dict[int, Ref] = {}
        abstract = []
        runtime = [i for i, x in enumerate(leaves) if _leaf_kind(x) is not None]
        first = dict(zip(runtime, sig.alias, strict=True))
        for i, x in enumerate(leaves):
            kind = _leaf_kind(x)
            if kind is None:
                abstract.append(x)
                continue
            j = first[i]
            if j not in cells:
                var = b.param(type_of_value(x), hint=f"arg{i}")
                cells[j] = Ref(var, "array" if kind == "array" else "scalar",
                               bool(x.flags.c_contiguous) if kind == "array" else True)
            abstract.append(cells[j])
        stager.arguments = list(cells.values())
        arguments = tree_unflatten(sig.tree, abstract)
        sig_fn = inspect.signature(fn)
        merged = {**arguments, **static}
        bound = inspect.BoundArguments(sig_fn, {n: merged[n] for n in sig_fn.parameters
                                                if n in merged})
        result = stager.call(fn, list(bound.args), dict(bound.kwargs))
        out_leaves, out_tree = tree_flatten(result)
        results, outputs = [], []
        arg_of = {id(cell): j for j, cell in cells.items() if cell.kind == "array"}
        for x in out_leaves:
            if id(x) in arg_of:  # the caller's own array, as plain Python returns it
                outputs.append(("arg", arg_of[id(x)]))
            elif isinstance(x, Ref):
                results.append(x.get())
                outputs.append(("dyn", x.kind, x.get().type.weak))
            else:
                if hasattr(x, "fmt"):
                    raise UnsupportedError("a function cannot return an f-string of run-time "
                                           "values")
                outputs.append(("static", x))
        writeback = []
        params = list(b.frame.params)
        extra = len(params) - len(cells)
        for (j, cell), param in zip(cells.items(), params[:len(cells)], strict=True):
            if cell.kind == "array" and cell.raw() is not param:
                writeback.append(j)
                results.append(cell.raw())
        func = b.finish(name, results)
    return Staged(func, outputs, out_tree, writeback, extra=extra)


def _output(value: np.ndarray, spec: tuple, inputs: list) -> Any:
    _, kind, weak = spec
    if weak:
        return value.item()
    if kind == "scalar":
        return value[()]
    if not value.flags.writeable or any(value is a for a in inputs):
        return value.copy()
    return value


def run(staged: Staged, sig: Signature, extra: Sequence[Any] = ()) -> Any:
    """Run a specialisation on the run-time leaves of a call's arguments (and on the
    values of its ``extra`` parameters); its result, and the arguments it mutates
    written back."""
    leaves = sig.leaves[:-1]
    inputs = [leaves[i] for i in sig.dynamic]
    outs = staged.run(*inputs, *extra)
    n = len(outs) - len(staged.writeback)
    it = iter(outs[:n])
    result = [_output(next(it), s, inputs) if s[0] == "dyn" else
              leaves[s[1]] if s[0] == "arg" else s[1] for s in staged.outputs]
    for i, value in zip(staged.writeback, outs[n:], strict=True):
        np.copyto(leaves[i], value, casting="no")
    return tree_unflatten(staged.out_tree, result)


class FastEntry(NamedTuple):
    """A call straight to native code (see ``_fast_entry``)."""

    call: Callable
    form: bytes
    tree: TreeDef | None  # the positional arguments' structure, unless all are leaves
    taken: tuple[int, ...] | None  # the leaves passed on (all: None)
    guard: tuple  # (leaf count, (place, type, value) of the Python scalars fixed)
    nest: Callable[[tuple], Any] | None  # nests the flat results (None: as they come)


def _nesting(shape: Any) -> Callable[[tuple], Any] | None:
    """For results nested in tuples and lists (``(loss, (g1, g2))``), a function that
    builds that nesting from the flat tuple of results; None for any other structure."""
    if type(shape) is int:
        return operator.itemgetter(shape)
    if type(shape) not in (tuple, list):
        return None
    parts = [_nesting(s) for s in shape]
    if any(p is None for p in parts):
        return None
    kind = type(shape)
    return lambda flat: kind([p(flat) for p in parts])


def _rebuild(tree: TreeDef, shape: Any) -> Callable[[tuple], Any]:
    """What gives the flat tuple of results the structure ``tree`` (whose leaves numbered
    in order are ``shape``): tuples and lists directly, other pytrees (dicts,
    dataclasses) by unflattening."""
    return _nesting(shape) or (lambda flat: tree_unflatten(tree, list(flat)))


def _fast_entry(staged: Staged, sig: Signature, args: tuple) -> FastEntry | None:
    """The compiled entry when a call like this one can go straight to native code:
    positional arguments only (arrays and scalars, or pytrees of them, each array a
    parameter of its own), besides Python scalars the specialisation is for (checked on
    each call), nothing static by name, nothing written back, results made by the
    function (alone, or in any pytree: the C entry returns them as a tuple, nested in
    Python).  The entry answers NotImplemented to any other call.  (Parameters follow
    the flattened arguments' order, which the form maps to places.)"""
    from .backends import c

    call = getattr(staged.runner, "call", None)
    *leaves, static = sig.leaves
    flat, tree = tree_flatten(args)
    kinds = [_leaf_kind(a) for a in flat]
    if call is None or static or staged.writeback or len(leaves) != len(flat) or \
            len(sig.dynamic) != sum(k is not None for k in kinds) or \
            any(s[0] != "dyn" for s in staged.outputs) or \
            any(k is None and type(a) not in (int, bool, str, type(None))
                for a, k in zip(flat, kinds, strict=True)):
        return None
    passed = [a for a, k in zip(flat, kinds, strict=True) if k is not None]
    positions: list[int] = []  # each parameter's place among the arguments passed
    for x in (x for x in leaves if _leaf_kind(x) is not None):
        j = next((j for j, a in enumerate(passed) if a is x and j not in positions), None)
        if j is None:
            return None
        positions.append(j)
    n_out = len(staged.outputs)
    order = list(range(n_out))
    shape = tree_unflatten(staged.out_tree, order)
    nest = None
    if type(shape) is int and n_out == 1:
        shape_form = c.ONE
    elif type(shape) in (tuple, list) and list(shape) == order:
        shape_form = c.TUPLE if type(shape) is tuple else c.LIST
    else:
        shape_form, nest = c.TUPLE, _rebuild(staged.out_tree, shape)
    how = {"array": c.ARRAY, "scalar": c.SCALAR, "python": c.FLOAT}
    ins = [(how[_leaf_kind(passed[j])], j) for j in positions]
    outs = [c.PYTHON if weak else c.NUMPY if kind == "scalar" else c.ARRAY
            for _, kind, weak in staged.outputs]
    guard = tuple((j, type(a), a) for j, (a, k) in enumerate(zip(flat, kinds, strict=True))
                  if k is None)
    taken = tuple(j for j, k in enumerate(kinds) if k is not None) if guard else None
    all_leaves = len(flat) == len(args) and all(a is x for a, x in zip(args, flat, strict=True))
    nested = None if all_leaves else tree
    return FastEntry(call, c.form(shape_form, ins, outs), nested, taken,
                     (len(flat), guard) if guard else (), nest)


def _fast_call(fast: FastEntry, args: tuple) -> Any:
    """A fast entry's call of pytree arguments, or of fixed Python scalars among them."""
    leaves = args
    if fast.tree is not None:
        flat, tree = tree_flatten(args)
        if tree != fast.tree:
            return NotImplemented
        leaves = tuple(flat)
    if fast.taken is None:
        return fast.call(leaves, fast.form)
    size, fixed = fast.guard
    if len(leaves) != size or not all(type(leaves[j]) is t and leaves[j] == v
                                      for j, t, v in fixed):
        return NotImplemented
    return fast.call(tuple([leaves[j] for j in fast.taken]), fast.form)


class _Specialisations:
    """What every ``Jitted`` of one computation shares (see ``keys``): the compiled
    specialisations, the fast entry of the last call, the function's signature."""

    __slots__ = ("cache", "lock", "fast", "params")

    def __init__(self) -> None:
        self.cache: dict[tuple, Staged] = {}
        self.lock = threading.Lock()
        self.fast: FastEntry | None = None  # see _fast_entry
        self.params: inspect.Signature | None = None  # fn's signature, once asked


_SPECIALISATIONS = Registry()


class Jitted:
    """A compiled function: staged once per argument signature, then run."""

    def __init__(self, fn: Callable, static_argnames: Sequence[str], backend: str | None):
        backend = backend or os.environ.get("PULLBACK_BACKEND") or "c"
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
        if not callable(fn):
            raise TypeError(f"pb.jit: {type(fn).__name__} object is not callable")
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.static_argnames = tuple(static_argnames)
        self.backend = backend
        self._spec: _Specialisations = _SPECIALISATIONS.get(callable_key(self),
                                                            _Specialisations)

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("jit", key_of(self.fn), self.static_argnames, self.backend)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        """Met while staging: the wrapped function, staged where it is called."""
        if self.static_argnames:
            bound = self.signature().bind(*args, **kwargs)
            for name in self.static_argnames:
                if name in bound.arguments and has_ref(bound.arguments[name]):
                    raise ConcretizationError(
                        f"argument {name!r} of {self.__name__} is static (static_argnames) "
                        "but is given a run-time value here",
                        hint="pass a value known at compile time (a Python int, a shape, "
                        "a static argument of the caller)")
        return st.call(self.fn, args, kwargs)

    def signature(self) -> inspect.Signature:
        spec = self._spec
        if spec.params is None:
            spec.params = inspect.signature(self.fn)
        return spec.params

    def specialise(self, *args: Any, **kwargs: Any) -> tuple[Staged, Signature]:
        spec = self._spec
        sig = signature(self.fn, args, kwargs, self.static_argnames, self.signature())
        staged = spec.cache.get(sig.key)
        if staged is None:
            with spec.lock:
                staged = spec.cache.get(sig.key)
                if staged is None:
                    staged = self._build(sig)
                    spec.cache[sig.key] = staged
        return staged, sig

    def _build(self, sig: Signature) -> Staged:
        """Stage, optimise and compile one specialisation; anything but the errors a
        user may see becomes an ``InternalError`` naming where staging was."""
        name = getattr(self.fn, "__name__", "f").replace("<lambda>", "lambda")
        with internal_errors(self.fn):
            staged = stage(self.fn, sig, name)
            staged.staged_func, staged.func = staged.func, optimize(staged.func)
            if "ir" in os.environ.get("PULLBACK_DUMP", "").split(","):
                print(staged.func)
            if verifying():
                verify(staged.func)
            _compile(staged, self.backend)
        return staged

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """What this function compiles to for these arguments: the IR as staged and
        after each pass, and the C source."""
        staged, _ = self.specialise(*args, **kwargs)
        passes: list[tuple[str, Func]] = []
        with internal_errors(self.fn):
            optimize(staged.staged_func, trace=passes)
        return Lowered(staged.staged_func, passes, staged.func, self.backend)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        spec = self._spec
        fast = spec.fast
        if fast is not None and not kwargs:
            call, form, tree, taken, _, nest = fast
            out = call(args, form) if tree is None and taken is None else _fast_call(fast, args)
            if out is not NotImplemented:
                return out if nest is None else nest(out)
        staged, sig = self.specialise(*args, **kwargs)
        result = run(staged, sig)
        if not kwargs:
            spec.fast = _fast_entry(staged, sig, args) or spec.fast
        return result

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


def jit(fn: Callable | None = None, *, static_argnames: Sequence[str] | str = (),
        backend: str | None = None) -> Any:
    """Compile ``fn``: staged from its source per argument signature, cached."""
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    if fn is None:
        return lambda f: jit(f, static_argnames=static_argnames, backend=backend)
    if isinstance(fn, Jitted):  # jit(jit(f)) is jit(f)
        names = (*fn.static_argnames, *(n for n in static_argnames
                                        if n not in fn.static_argnames))
        if names == fn.static_argnames and backend in (None, fn.backend):
            return fn
        return Jitted(fn.fn, names, backend or fn.backend)
    return Jitted(fn, static_argnames, backend)


def make_ir(fn: Callable, *, static_argnames: Sequence[str] | str = ()) -> Callable[..., Func]:
    """``make_ir(f)(*args)``: the IR ``jit(f)`` runs for these arguments (printable)."""
    jitted = jit(fn, static_argnames=static_argnames)

    def ir(*args: Any, **kwargs: Any) -> Func:
        return jitted.specialise(*args, **kwargs)[0].func

    return ir
