"""Calls: NumPy mappings, the builtins and idioms the frontend stages itself, user
functions and methods staged inline, classes; a call that meets itself with the same
abstract arguments becomes a recursive IR function (``subfunction.py``)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import types
from typing import Any

import numpy as np

from ..errors import ConcretizationError, UnsupportedError, users_call
from ..ir.core import Lit
from ..ir.types import complex_unsupported
from ..numpy_api import CALLABLES, METHODS
from ..numpy_api.core import WRITES_FIRST
from ..numpy_api.optional import optional_mapping
from ..numpy_api.stateful_random import refuse_hidden_state
from ..tree import tree_flatten, tree_unflatten
from .builtins import BUILTINS
from .control import Choice
from .idioms import IDIOMS, NAMEDTUPLE_REPLACE, instance_handler, namedtuple_replace, sort_list
from .interface import Staging
from .lifting import has_ref, lift, lower
from .scope import DEAD, RETURNED, RETVAL, Frame, StagedFunction, local_names
from .source import Source, function_source
from .values import Ref, RefMethod
from .views import call_view_function, call_view_method

_NATIVE_MODULES = ("math", "builtins", "operator", "cmath")
_LIST_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                  "update", "setdefault", "popitem", "add", "discard", "__setitem__",
                  "__delitem__"}


class _Recurse(Exception):
    def __init__(self, key: tuple):
        self.key = key


def _key_leaf(x: Any) -> Any:
    if isinstance(x, Ref):
        return ("dyn", x.get().type, x.kind)
    try:
        hash(x)
        return ("static", type(x), x)
    except TypeError:
        return ("object", id(x))


class CallMixin(Staging):
    def make_function(self, node: ast.FunctionDef | ast.Lambda) -> StagedFunction:
        args = node.args
        defaults = [self.eval(d) for d in args.defaults]
        kw = {a.arg: self.eval(d) for a, d in zip(args.kwonlyargs, args.kw_defaults,
                                                   strict=True) if d is not None}
        name = getattr(node, "name", "<lambda>")
        return StagedFunction(Source(node, self.src.file, name), self.frame, defaults, kw)

    # -- dispatch ---------------------------------------------------------------------

    def call(self, fn: Any, args: list, kwargs: dict, node: ast.AST | None = None) -> Any:
        if isinstance(fn, RefMethod):
            return self.call_method(fn, args, kwargs)
        refuse_hidden_state(fn)  # np.random.*, Generator methods: never frozen
        staging = getattr(type(fn), "__pb_stage__", None)
        if staging is not None:  # pullback's own transforms (grad, jvp, ...)
            return staging(fn, self, args, kwargs)
        if _from_pullback(fn) and fn not in _HANDLERS and not (has_ref(args) or
                                                                has_ref(kwargs)):
            return self.adopt(users_call(fn, *args, **kwargs))  # pb.grad(f), pb.custom_vjp(f) ...
        if isinstance(fn, StagedFunction):
            return self.stage_call(fn, args, kwargs)
        if isinstance(fn, functools.partial):
            return self.call(fn.func, [*fn.args, *args], {**fn.keywords, **kwargs}, node)
        if isinstance(fn, Ref):
            raise TypeError("'numpy.ndarray' object is not callable")
        if isinstance(fn, Choice):  # a callee chosen at run time: a cond over the calls
            return self.branch_value(fn.pred.get(), lambda: self.call(fn.then, args, kwargs),
                                     lambda: self.call(fn.orelse, args, kwargs))
        try:
            special = _HANDLERS.get(fn) or instance_handler(fn)
            mapping = CALLABLES.get(fn) or optional_mapping(fn)
        except TypeError:  # unhashable callables
            special = mapping = None
        if special is not None:
            out = special(self, *args, **kwargs)
            if out is not NotImplemented:  # (else the NumPy mapping's case)
                return out
        dynamic = has_ref(args) or has_ref(kwargs)
        if mapping is not None:
            if fn in WRITES_FIRST:  # np.copyto(dst, ...), np.add.at(a, ...): dst is written
                self.setitem(args[0], Ellipsis, mapping(*lower(args), **lower(kwargs)))
                return None
            if not dynamic and getattr(fn, "__module__", None) in _NATIVE_MODULES:
                return self.adopt(users_call(fn, *args, **kwargs))
            view = call_view_function(fn, args, kwargs)
            if view is not None:
                return view
            kind = "array" if fn in _ARRAY_MAKERS else None
            return lift(mapping(*lower(args), **lower(kwargs)), kind)
        if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            if fn.__func__.__code__ is NAMEDTUPLE_REPLACE:  # its _make has no source
                return namedtuple_replace(self, fn.__self__, *args, **kwargs)
            return self.call(fn.__func__, [fn.__self__, *args], kwargs, node)
        if isinstance(fn, type):
            return self.construct(fn, args, kwargs)
        if isinstance(fn, types.FunctionType):
            module = getattr(fn, "__module__", "") or ""
            if module.split(".")[0] in ("numpy", "scipy"):
                if not dynamic:
                    return self.adopt(users_call(fn, *args, **kwargs))
                raise UnsupportedError(
                    f"{module}.{fn.__qualname__} is not supported by pullback",
                    hint="see docs/numpy_coverage.md for the supported functions")
            return self.stage_call(fn, args, kwargs)
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, (list, dict, set)) and not isinstance(owner, type):
            if fn.__name__ in _LIST_MUTATORS:
                self.check_mutable(owner, f".{fn.__name__}()")
            if fn.__name__ in ("index", "count", "remove") and dynamic:
                raise UnsupportedError(f"list.{fn.__name__} compares arrays elementwise")
            if fn.__name__ == "sort" and isinstance(owner, list):
                return sort_list(self, owner, *args, **kwargs)
            return self.adopt(users_call(fn, *args, **kwargs))
        user_call = inspect.getattr_static(type(fn), "__call__", None)
        if isinstance(user_call, types.FunctionType):
            return self.call(user_call, [fn, *args], kwargs, node)
        if dynamic:
            name = getattr(fn, "__qualname__", None) or repr(fn)
            module = getattr(fn, "__module__", None) or ""
            if module == "cmath":
                raise complex_unsupported(f"cmath.{name}")
            if module.split(".")[0] == "numpy":
                raise UnsupportedError(
                    f"np.{name} is not supported by pullback",
                    hint="see docs/numpy_coverage.md for the supported functions")
            raise UnsupportedError(
                f"{name} has no Python source, so it cannot be called on run-time values",
                hint="use a NumPy function pullback supports (docs/numpy_coverage.md) or a "
                "Python function")
        return self.adopt(users_call(fn, *args, **kwargs))

    def call_method(self, m: RefMethod, args: list, kwargs: dict) -> Any:
        view = call_view_method(m.ref, m.name, args, kwargs)
        if view is not None:
            return view
        kind = "array" if m.name in ("copy", "astype") else None
        out = METHODS[m.name](m.ref.get(), *lower(args), **lower(kwargs))
        return lift(out, kind if m.ref.kind == "array" or m.name != "astype" else None)

    # -- classes ----------------------------------------------------------------------

    def construct(self, cls: type, args: list, kwargs: dict) -> Any:
        dynamic = has_ref(args) or has_ref(kwargs)
        if issubclass(cls, BaseException):
            return users_call(cls, *args, **kwargs)
        if dynamic and issubclass(cls, (complex, np.complexfloating)):
            raise complex_unsupported(f"{cls.__name__}() of run-time values")
        if cls in (list, tuple) and args:
            out = self.unroll(args[0], None)
            return self.new(list(out)) if cls is list else tuple(out)
        if dataclasses.is_dataclass(cls) and hasattr(cls, "__post_init__") and dynamic:
            obj = object.__new__(cls)
            bound = inspect.signature(cls).bind(*args, **kwargs)
            bound.apply_defaults()
            for f in dataclasses.fields(cls):
                if f.name in bound.arguments:
                    object.__setattr__(obj, f.name, bound.arguments[f.name])
                elif f.default_factory is not dataclasses.MISSING:
                    object.__setattr__(obj, f.name, f.default_factory())
                elif f.default is not dataclasses.MISSING:
                    object.__setattr__(obj, f.name, f.default)
            self.new(obj)
            self.call(cls.__post_init__, [obj], {})
            return obj
        init = cls.__init__
        if isinstance(init, types.FunctionType) and not _generated(init):
            obj = cls.__new__(cls)
            self.new(obj)
            self.call(init, [obj, *args], kwargs)
            return obj
        if dynamic and not (dataclasses.is_dataclass(cls) or _is_namedtuple(cls)
                            or cls in (dict, slice, functools.partial)):
            raise UnsupportedError(
                f"{cls.__qualname__} has no Python source, so it cannot be given run-time "
                "values", hint="use a dataclass, a NamedTuple or a plain class")
        return self.new(users_call(cls, *args, **kwargs))

    # -- user functions ---------------------------------------------------------------

    def stage_call(self, fn: Any, args: list, kwargs: dict) -> Any:
        if isinstance(fn, StagedFunction):
            src, sig, parent = fn.src, fn.signature, fn.frame
            closure, globals_ = {}, fn.frame.globals
            ident = (id(fn.src.node), id(fn.frame))  # one closure: its code and its frame
        else:
            src = function_source(fn)
            sig = inspect.signature(fn)
            parent = None
            closure = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
            globals_ = fn.__globals__
            ident = id(fn)  # closures of one code are different functions
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        leaves, tree = tree_flatten(arguments)
        scope = (src, parent, closure, globals_)
        if self.region >= 0 and sum(k[0] == ident for k in self.active) >= self.GENERALISE_AT \
                and any(_is_counter(x) for x in leaves):
            # deep recursion under a run-time branch: numbers that only count the depth
            # become run-time values, so the recursion can become a recursive function
            # (unless the function needs them at compile time)
            general = [Ref(Lit(x)) if _is_counter(x) else x for x in leaves]
            try:
                return self._enter_call(tree_unflatten(tree, general), general, tree, ident,
                                        scope)
            except ConcretizationError:
                pass
        return self._enter_call(arguments, leaves, tree, ident, scope)

    def _enter_call(self, arguments: dict, leaves: list, tree, ident: int, scope: tuple) -> Any:
        """Stage a call inline, or as a recursive function when it meets itself."""
        src, parent, closure, globals_ = scope
        key = (ident, tree, tuple(_key_leaf(x) for x in leaves))

        def enter(arguments: dict) -> Any:
            locals_, declared = local_names(src)
            frame = Frame(src.name, src.file, locals_, declared, parent, closure, globals_,
                          self.outside)
            frame.vars.update(arguments)
            frame.vars[RETURNED] = False
            return self.run_function(src, frame)

        if key in self.recursive:
            return self.recursive_call(key, leaves)
        if key in self.active:
            raise _Recurse(key)
        self.budget()
        if len(self.active) >= self.MAX_STATIC_DEPTH:
            raise UnsupportedError(
                f"calls nest more than {self.MAX_STATIC_DEPTH} deep at compile time "
                f"(in {src.name})",
                hint="recursion must end on a compile-time condition, or recurse on "
                "run-time values with the same argument shapes each time")
        self.active.append(key)
        try:
            return enter(arguments)
        except _Recurse as r:
            if r.key != key:
                raise
            return self.stage_recursive(key, src.name, leaves, tree, enter)
        finally:
            self.active.pop()

    def budget(self) -> None:
        self.steps += 1
        if self.steps > self.MAX_STEPS:
            raise UnsupportedError(
                f"staging took more than {self.MAX_STEPS} calls and unrolled iterations",
                hint="recursion or loops that only end at compile time unroll the whole "
                "computation; make them depend on run-time values")

    def run_function(self, src: Source, frame: Frame) -> Any:
        saved = (self.frame, self.src, self.region)
        self.frame, self.src = frame, src
        self.frames.append(frame)
        try:
            if isinstance(src.node, ast.Lambda):
                return self.eval(src.node.body)
            self.exec_block(src.node.body)
            returned = frame.vars.get(RETURNED, False)
            if returned is True:
                return frame.vars.get(RETVAL)
            if returned is False or frame.vars.get(DEAD) is True:
                return None
            return self.branch_value(returned.get(), lambda: frame.vars.get(RETVAL),
                                     lambda: None)
        finally:
            self.frames.pop()
            self.frame, self.src, _ = saved


#: pullback's library layers: plain Python + NumPy, staged like the user's code.
_LIBRARY = ("pullback.nn", "pullback.optim", "pullback.train")


def _from_pullback(fn: Any) -> bool:
    """pullback's own API (transforms, custom rules): made at compile time, natively."""
    module = getattr(fn, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] == "pullback" and \
        not module.startswith(_LIBRARY) and \
        isinstance(fn, (type, types.FunctionType))


def _is_counter(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _generated(fn: types.FunctionType) -> bool:
    return fn.__code__.co_filename.startswith("<")


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


#: Callables the frontend stages itself rather than by a NumPy mapping or their source.
_HANDLERS = {**BUILTINS, **IDIOMS}

#: NumPy calls whose 0-d results are arrays, not NumPy scalars.
_ARRAY_MAKERS = {np.array, np.asarray, np.zeros, np.ones, np.empty, np.full, np.zeros_like,
                 np.ones_like, np.empty_like, np.full_like, np.copy, np.ascontiguousarray,
                 np.atleast_1d, np.atleast_2d, np.atleast_3d}
_ARRAY_MAKERS = {f for f in _ARRAY_MAKERS if f in CALLABLES}
