"""Calls: NumPy mappings, builtins that need the frontend, user functions staged inline,
classes, and recursion on run-time data turned into recursive IR functions."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import inspect
import itertools
import types
from typing import Any

import numpy as np

from ..errors import CompileError, ConcretizationError, UnsupportedError, users_call
from ..ir.builder import Builder, current, declare_func
from ..ir.core import Lit
from ..ir.types import bool_, complex_unsupported, float64, int64
from ..numpy_api import CALLABLES
from ..numpy_api.core import WRITES_FIRST, convert
from ..numpy_api.optional import optional_mapping
from ..numpy_api.stateful_random import refuse_hidden_state
from ..ops import control as C
from ..ops import elementwise as E
from ..tree import tree_flatten, tree_unflatten
from .control import Choice
from .idioms import (
    NAMEDTUPLE_REPLACE,
    SPECIAL,
    instance_handler,
    namedtuple_replace,
    sort_list,
)
from .iteration import Counted, enumerate_counted, range_counted, reversed_counted, zip_counted
from .lifting import concrete, has_ref, lift, lower
from .regions import Bottom
from .scope import DEAD, RETURNED, RETVAL, Frame, stores
from .source import Source, function_source
from .values import CAPTURES, FUNC_DEPTH, DynStr, Ref, RefMethod
from .views import call_view_function, call_view_method

_NATIVE_MODULES = ("math", "builtins", "operator", "cmath")
_LIST_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                  "update", "setdefault", "popitem", "add", "discard", "__setitem__",
                  "__delitem__"}
_locals_cache: dict[int, tuple[set[str], dict[str, str]]] = {}
_names = itertools.count()


class StagedFunction:
    """A ``def`` or ``lambda`` evaluated while staging: its AST, defaults, and the frame
    it closes over (read when called, as Python's closures are)."""

    def __init__(self, src: Source, frame: Frame, defaults: list, kw_defaults: dict):
        self.src = src
        self.frame = frame
        args = src.node.args
        params = []
        kinds = inspect.Parameter
        pos = [*args.posonlyargs, *args.args]
        first_default = len(pos) - len(defaults)
        for k, a in enumerate(pos):
            kind = kinds.POSITIONAL_ONLY if k < len(args.posonlyargs) else \
                kinds.POSITIONAL_OR_KEYWORD
            d = defaults[k - first_default] if k >= first_default else kinds.empty
            params.append(kinds(a.arg, kind, default=d))
        if args.vararg:
            params.append(kinds(args.vararg.arg, kinds.VAR_POSITIONAL))
        for a in args.kwonlyargs:
            params.append(kinds(a.arg, kinds.KEYWORD_ONLY,
                                default=kw_defaults.get(a.arg, kinds.empty)))
        if args.kwarg:
            params.append(kinds(args.kwarg.arg, kinds.VAR_KEYWORD))
        self.signature = inspect.Signature(params)
        self.__name__ = src.name
        self.__qualname__ = src.name


@dataclasses.dataclass
class SubFunction:
    """A call staged as a function of its own: ``func`` takes ``operands`` (the run-time
    leaves of the arguments, in order, then the caller's values it reads)."""

    func: Any
    operands: list
    arg_leaves: list[list]  # per positional argument, its leaves (cells and statics)
    arg_trees: list
    out_spec: tuple  # (tree, leaves) as ``_rebuild`` takes them
    n_args: int  # how many operands come from the arguments

    def rebuild(self, outs) -> Any:
        tree, leaves, _ = self.out_spec
        it = iter(outs)
        return tree_unflatten(tree, [Ref(next(it), s[2]) if s[0] == "dyn" else s[1]
                                     for s in leaves])


class _Recurse(Exception):
    def __init__(self, key: tuple):
        self.key = key


def _local_names(src: Source) -> tuple[set[str], dict[str, str]]:
    node = src.node
    hit = _locals_cache.get(id(node))
    if hit is None or hit[0] is not node:
        a = node.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        if isinstance(node, ast.Lambda):
            body_stores = stores([ast.Expr(node.body)])
        else:
            body_stores = stores(node.body)
        names = (params | body_stores.names) - set(body_stores.declared)
        hit = (node, names, body_stores.declared)
        _locals_cache[id(node)] = hit
    return hit[1], hit[2]


def _key_leaf(x: Any) -> Any:
    if isinstance(x, Ref):
        return ("dyn", x.get().type, x.kind)
    try:
        hash(x)
        return ("static", type(x), x)
    except TypeError:
        return ("object", id(x))


def _representative(ref: Ref) -> Any:
    """A concrete value of the cell's Python type, for isinstance/type."""
    t = ref.type
    if t.weak:
        return {"b": False, "i": 0, "f": 0.0}[t.dtype.kind]
    arr = np.zeros(t.shape, t.dtype.np)
    return arr[()] if ref.kind == "scalar" else arr


class CallMixin:
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
        if _from_pullback(fn) and not (has_ref(args) or has_ref(kwargs)):
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
            special = _SPECIAL.get(fn) or instance_handler(fn)
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
        from ..numpy_api import METHODS

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
            locals_, declared = _local_names(src)
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

    # -- functions staged on their own -----------------------------------------------

    def stage_subfunction(self, fn: Any, args: list, kwargs: dict) -> SubFunction:
        """Stage ``fn(*args, **kwargs)`` as a function of its own (for a transform to
        rewrite): each run-time leaf of the arguments becomes a parameter, and so does
        each run-time value of the caller that ``fn`` reads."""
        flat = [tree_flatten(a) for a in args]
        kw_leaves, kw_tree = tree_flatten(kwargs)
        refs = [x for leaves, _ in flat for x in leaves if isinstance(x, Ref)]
        refs += [x for x in kw_leaves if isinstance(x, Ref)]
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "src", None), "name", "f")
        values = [r.get() for r in refs]  # in the caller: a view reads its base here
        with Builder(current().loc) as b:
            params = [b.param(v.type) for v in values]
            captures: dict = {}
            tokens = (FUNC_DEPTH.set(FUNC_DEPTH.get() + 1), CAPTURES.set(captures))
            cells = iter([Ref(p, r.kind, r.contiguous) for p, r in zip(params, refs,
                                                                        strict=True)])

            def inner(leaves: list) -> list:
                return [next(cells) if isinstance(x, Ref) else x for x in leaves]

            try:
                new_args = [tree_unflatten(tree, inner(leaves)) for leaves, tree in flat]
                new_kwargs = tree_unflatten(kw_tree, inner(kw_leaves))
                result = self.call(fn, new_args, new_kwargs)
                out_leaves, out_tree = tree_flatten(result)
                if any(isinstance(x, DynStr) for x in out_leaves):
                    raise UnsupportedError("a function cannot return an f-string of run-time "
                                           "values")
                results = [x.get() for x in out_leaves if isinstance(x, Ref)]
                spec_leaves = [("dyn", x.type, x.kind) if isinstance(x, Ref) else ("static", x)
                               for x in out_leaves]
            finally:
                FUNC_DEPTH.reset(tokens[0])
                CAPTURES.reset(tokens[1])
            b.frame.params.extend(v for _, v in captures.values())
            func = b.finish(name.replace("<lambda>", "lambda"), results)
        operands = values + [r.get() for r, _ in captures.values()]
        return SubFunction(func, operands, [leaves for leaves, _ in flat],
                           [tree for _, tree in flat], (out_tree, spec_leaves, None),
                           len(refs))

    # -- recursion on run-time data ---------------------------------------------------

    def stage_recursive(self, key: tuple, name: str, leaves: list, tree, enter) -> Any:
        """A function that calls itself with the same abstract arguments: its depth is
        decided at run time, so it becomes an IR function with a recursive ``call``.
        Run-time values it closes over become extra parameters."""
        dyn = [x for x in leaves if isinstance(x, Ref)]
        fname = f"{name}_{next(_names)}"
        result_spec = None
        captured: list[Ref] = []
        for _ in range(8):
            in_types = [x.get().type for x in [*dyn, *captured]]
            func = declare_func(fname, in_types, [] if result_spec is None else result_spec[2])
            self.recursive[key] = (func, result_spec, captured)
            saved_active = self.active
            self.active = [key]
            with Builder(current().loc) as b:
                params = [b.param(t) for t in in_types]
                captures = {id(r): (r, p) for r, p in zip(captured, params[len(dyn):],
                                                         strict=True)}
                tokens = (FUNC_DEPTH.set(FUNC_DEPTH.get() + 1), CAPTURES.set(captures))
                try:
                    result = enter(tree_unflatten(tree, self._parameters(leaves, params)))
                except Bottom:
                    raise UnsupportedError(
                        f"recursive function {name} never returns without calling itself",
                        hint="give it a base case that does not recurse") from None
                finally:
                    FUNC_DEPTH.reset(tokens[0])
                    CAPTURES.reset(tokens[1])
                    self.active = saved_active
                    del self.recursive[key]
                out_leaves, out_tree = tree_flatten(result)
                body = b.finish(fname, [x.get() for x in out_leaves if isinstance(x, Ref)])
            spec_leaves = [("dyn", x.raw().type, x.kind) if isinstance(x, Ref) else ("static", x)
                           for x in out_leaves]
            spec = (out_tree, spec_leaves, [s[1] for s in spec_leaves if s[0] == "dyn"])
            new = [r for r, _ in captures.values() if r not in captured]
            if not new and result_spec is not None and _same_spec(spec, result_spec):
                func.block = body.block
                operands = [x.get() for x in [*dyn, *captured]]
                return self._rebuild(result_spec, C.call(*operands, callee=func))
            captured.extend(new)
            result_spec = spec
        raise CompileError(f"the result type of recursive function {name} does not settle",
                           hint="return the same types on every path")

    def _parameters(self, leaves: list, params: list) -> list:
        """The arguments inside a recursive function: cells of its parameters, which it
        must not write (the caller's arrays would change)."""
        it = iter(params)
        out = []
        for x in leaves:
            if isinstance(x, Ref):
                cell = Ref(next(it), x.kind)
                cell.note = ("a recursive function cannot write to its arguments (the "
                             "caller's array would change)")
                out.append(cell)
            else:
                out.append(x)
        return out

    def recursive_call(self, key: tuple, leaves: list) -> Any:
        func, spec, captured = self.recursive[key]
        if spec is None:
            raise Bottom
        operands = [x.get() for x in leaves if isinstance(x, Ref)]
        outs = C.call(*operands, *[r.get() for r in captured], callee=func)
        return self._rebuild(spec, outs)

    def _rebuild(self, spec, outs) -> Any:
        return SubFunction(None, [], [], [], spec, 0).rebuild(outs)

    # -- iteration ----------------------------------------------------------------------

    def iterable(self, v: Any, node: ast.AST | None) -> Counted | list:
        """What ``for`` iterates: a ``Counted`` (may stay rolled) or a static list."""
        if isinstance(v, Counted):
            return v
        if isinstance(v, range):
            return range_counted(v.start, v.stop, v.step)
        if isinstance(v, Ref):
            shape = v.type.shape
            if not shape:
                raise TypeError("iteration over a 0-d array")
            return Counted(shape[0], lambda k: self.getitem(v, k))
        if isinstance(v, DynStr):
            raise ConcretizationError("cannot iterate over an f-string of run-time values")
        if isinstance(v, dict):
            return list(v)
        try:
            return list(v)
        except TypeError:
            raise TypeError(f"'{type(v).__name__}' object is not iterable") from None

    def unroll(self, v: Any, node: ast.AST | None) -> list:
        it = self.iterable(v, node)
        items = it.items() if isinstance(it, Counted) else it
        if len(items) > self.MAX_UNROLL:
            raise UnsupportedError(f"more than {self.MAX_UNROLL} items to unroll at compile "
                                   "time", hint="use a rolled for loop over range()")
        return items


def _same_spec(a, b) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(
        x[0] == y[0] and (x[1:] == y[1:] if x[0] == "dyn" else x[1] is y[1] or x[1] == y[1])
        for x, y in zip(a[1], b[1], strict=True))


def _from_pullback(fn: Any) -> bool:
    """pullback's own API (transforms, custom rules): made at compile time, natively."""
    module = getattr(fn, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] == "pullback" and \
        isinstance(fn, (type, types.FunctionType))


def _is_counter(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _generated(fn: types.FunctionType) -> bool:
    return fn.__code__.co_filename.startswith("<")


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


# -- builtins the frontend implements itself -------------------------------------------


def _print(st, *args, sep=" ", end="\n", file=None, flush=False) -> None:
    if file is not None or has_ref([sep, end]):
        raise UnsupportedError("print to a file, or with run-time sep/end, is not supported")
    parts, operands = [], []
    for a in args:
        if isinstance(a, Ref):
            parts.append("{}")
            operands.append(a.get())
        elif isinstance(a, DynStr):
            parts.append(a.fmt)
            operands.extend(r.get() for r in a.args)
        else:
            if has_ref(a):
                raise UnsupportedError("printing a container of run-time arrays",
                                       hint="print the arrays one by one")
            parts.append(str(a).replace("{", "{{").replace("}", "}}"))
    C.debug_print(*operands, fmt=str(sep).replace("{", "{{").replace("}", "}}").join(parts)
                  + str(end).replace("{", "{{").replace("}", "}}"))


def _len(st, x) -> int:
    if isinstance(x, Ref):
        if not x.type.shape:
            raise TypeError("len() of unsized object")
        return x.type.shape[0]
    if isinstance(x, Counted):
        return st.static_value(x.length if isinstance(x.length, Ref) else x.length,
                               "the length")
    return len(x)


def _range(st, *args) -> Any:
    if not has_ref(args):
        return users_call(range, *args)
    for a in args:
        if isinstance(a, Ref) and not a.type.dtype.is_int and not a.type.dtype.is_bool:
            raise TypeError(f"'{a.type.dtype.name}' object cannot be interpreted as an "
                            "integer")
    lo, hi, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    static = [concrete(a) for a in (lo, hi, step)]
    if all(s is not None for s in static):
        return range(*(int(s) for s in static))
    return range_counted(lo, hi, step)


def _zip(st, *its, strict=False):
    parts = [st.iterable(i, None) for i in its]
    if all(isinstance(p, list) for p in parts):
        return list(zip(*parts, strict=strict))
    counted = [p if isinstance(p, Counted) else Counted(len(p), p.__getitem__) for p in parts]
    if all(c.static_length is not None for c in counted):
        return list(zip(*(c.items() for c in counted), strict=strict))
    return zip_counted(counted)


def _enumerate(st, it, start=0):
    p = st.iterable(it, None)
    if isinstance(p, list):
        return list(enumerate(p, start))
    return enumerate_counted(p, start)


def _reversed(st, it):
    if isinstance(it, (list, tuple)) and not isinstance(it, Counted):
        return list(reversed(it))
    p = st.iterable(it, None)
    if isinstance(p, list):
        return list(reversed(p))
    return reversed_counted(p)


def _isinstance(st, obj, cls) -> bool:
    if has_ref(cls):
        raise TypeError("isinstance() arg 2 must be a type")
    return isinstance(_representative(obj) if isinstance(obj, Ref) else obj, cls)


def _type(st, obj, *rest):
    if rest:
        raise UnsupportedError("type() with three arguments cannot be compiled")
    return type(_representative(obj) if isinstance(obj, Ref) else obj)


def _scalar(kind: str):
    def conv(st, x=0, *rest):
        if rest or not isinstance(x, Ref):
            if has_ref(rest):
                raise ConcretizationError(f"{kind}() of run-time values")
            return users_call({"int": int, "float": float, "bool": bool}[kind], x, *rest)
        c = concrete(x)
        if c is not None:
            return users_call({"int": int, "float": float, "bool": bool}[kind], c)
        if x.type.size != 1:
            raise TypeError("only length-1 arrays can be converted to Python scalars")
        if kind == "bool":
            return Ref(convert(st.truth(x), bool_, True))
        a = x.get()
        if a.type.shape != ():
            from ..ops import shape as S

            a = S.reshape(a, shape=())
        if kind == "int":
            if a.type.dtype.is_float:
                a = E.trunc(a)
                _check_fits_int64(a)
            return Ref(convert(a, int64, True))
        return Ref(convert(a, float64, True))
    return conv


def _check_fits_int64(t) -> None:
    """``int()`` of a run-time float, whose result is an int64 in compiled code: NaN and
    the infinities raise what Python raises; a value an int64 cannot hold (Python's exact
    int) raises OverflowError instead of wrapping."""
    dt = t.type.dtype.np
    C.check(E.eq(t, t), exc="ValueError", fmt="cannot convert float NaN to integer")
    C.check(E.lt(E.abs_(t), Lit(np.asarray(np.inf, dt))), exc="OverflowError",
            fmt="cannot convert float infinity to integer")
    big = Lit(np.asarray(2.0 ** 63, dt))
    where = str(current().loc).replace("{", "{{").replace("}", "}}")
    C.check(E.and_(E.ge(t, E.neg(big)), E.lt(t, big)), t, exc="OverflowError",
            fmt=f"int() of {{}} at {where} does not fit in the 64-bit integer compiled code "
            "holds it in (Python's int would be exact)")


def _any_all(is_all: bool):
    def fn(st, items):
        out: Any = is_all
        for item in st.unroll(items, None):
            t = st.truth(item)
            if isinstance(t, bool):
                if t != is_all:
                    return t
                continue
            out = t if isinstance(out, bool) else (E.and_(out, t) if is_all else E.or_(out, t))
        return out if isinstance(out, bool) else Ref(convert(out, bool_, True))
    return fn


def _map(st, fn, *its):
    lists = [st.unroll(i, None) for i in its]
    return st.new([st.call(fn, list(args), {}) for args in zip(*lists, strict=False)])


def _filter(st, fn, it):
    out = []
    for x in st.unroll(it, None):
        t = st.truth(x if fn is None else st.call(fn, [x], {}))
        if not isinstance(t, bool):
            raise ConcretizationError("filter() on run-time values gives a data-dependent "
                                      "length", hint="use np.where")
        if t:
            out.append(x)
    return st.new(out)


def _getattr(st, obj, name, *default):
    try:
        return st.getattr(obj, name)
    except AttributeError:
        if default:
            return default[0]
        raise


def _hasattr(st, obj, name) -> bool:
    if isinstance(obj, Ref):
        from ..numpy_api import ATTRIBUTES, METHODS

        return name in ATTRIBUTES or name in METHODS
    return hasattr(obj, name)


def _setattr(st, obj, name, value) -> None:
    st.check_mutable(obj, f"setting .{name}")
    setattr(obj, name, value)


def _refuse(what: str, hint: str):
    def fn(st, *args, **kwargs):
        if has_ref(args) or what == "super":
            raise UnsupportedError(f"{what}() cannot be compiled here", hint=hint)
        return getattr(builtins, what)(*args, **kwargs)
    return fn


_SPECIAL = {
    print: _print, len: _len, range: _range, zip: _zip, enumerate: _enumerate,
    reversed: _reversed, isinstance: _isinstance, type: _type, int: _scalar("int"),
    float: _scalar("float"), bool: _scalar("bool"), any: _any_all(False),
    all: _any_all(True), map: _map, filter: _filter, getattr: _getattr, hasattr: _hasattr,
    setattr: _setattr, iter: _refuse("iter", "use a for loop"),
    next: _refuse("next", "use a for loop"), super: _refuse("super", "call the base class "
                                                            "method explicitly"),
    id: _refuse("id", "arrays have no identity at compile time"),
    hash: _refuse("hash", "arrays are unhashable"), **SPECIAL,
}

#: NumPy calls whose 0-d results are arrays, not NumPy scalars.
_ARRAY_MAKERS = {np.array, np.asarray, np.zeros, np.ones, np.empty, np.full, np.zeros_like,
                 np.ones_like, np.empty_like, np.full_like, np.copy, np.ascontiguousarray,
                 np.atleast_1d, np.atleast_2d, np.atleast_3d}
_ARRAY_MAKERS = {f for f in _ARRAY_MAKERS if f in CALLABLES}
