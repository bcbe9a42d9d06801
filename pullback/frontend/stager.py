"""The abstract interpreter over the Python AST (DESIGN §4).

It walks a function's AST with a ``Frame`` of abstract values: static Python objects are
simply computed, dynamic values (``Ref`` cells) become IR emitted into the current
builder.  Expressions and values are here; statements, control flow, calls and
functions staged on their own are mixins in ``statements.py``, ``control.py``,
``calls.py`` and ``subfunction.py``, which use each other only through ``Staging``
(``interface.py``).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CompileError, ConcretizationError, Loc, UnsupportedError, users_call
from ..ir.builder import current
from ..ir.core import Atom, Lit
from ..ir.types import bool_
from ..numpy_api import ATTRIBUTES, METHODS, OPERATORS
from ..numpy_api.core import SUBSCRIPTS, convert
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import shape as S
from .calls import CallMixin
from .control import Choice, ControlMixin
from .iteration import Counted, range_counted
from .lifting import concrete, has_ref, lift, lower
from .operators import BINOPS, COMPARE, SYMBOL, UNARY
from .outside import Outside
from .scope import Frame, defined_flag
from .source import Source, annotate
from .statements import StatementMixin
from .subfunction import SubFunctionMixin
from .values import DynStr, Ref, RefMethod, next_serial
from .views import index_view, view_attribute


class Stager(StatementMixin, ControlMixin, CallMixin, SubFunctionMixin):
    """Stages one top-level call; ``frame`` and ``src`` follow the user's call stack."""

    MAX_UNROLL = 1000
    MAX_STATIC_DEPTH = 64
    GENERALISE_AT = 6
    MAX_STEPS = 20000

    def __init__(self) -> None:
        self.frame: Frame | None = None
        self.src: Source | None = None
        self.active: list[tuple] = []  # keys of the user calls being staged
        self.recursive: dict[tuple, Any] = {}
        self.born: dict[int, tuple[Any, int]] = {}  # containers made while staging
        self.fetched: dict[int, Any] = {}  # ... or read from objects that outlive the call
        self.region: int = -1  # serial where the innermost dynamic region began
        self.steps = 0  # staged calls and unrolled iterations, against MAX_STEPS
        self.frames: list[Frame] = []  # the staged call stack
        self.arguments: list[Ref] = []  # cells of the top-level arguments
        self.argument_params: list[Atom] = []  # ... and what they held at first
        self.deferred: Exception | None = None  # the last error moved to run time
        self.in_rules: list = []  # custom-derivative functions whose rules are staged
        self.outside: Outside | None = None  # reads of globals and closure cells

    # -- locations and dispatch -----------------------------------------------------

    def loc(self, node: ast.AST) -> Loc:
        return self.src.loc(node)

    def eval(self, node: ast.expr) -> Any:
        b = current()
        saved = b.loc
        loc = b.loc = self.loc(node)
        try:
            return getattr(self, "expr_" + type(node).__name__, self._unsupported)(node)
        except CompileError as e:
            raise e.with_loc(loc) from None
        except Exception as e:
            annotate(e, loc)
            raise
        finally:
            b.loc = saved

    def _unsupported(self, node: ast.AST) -> Any:
        what = {"Yield": "generators (yield)", "YieldFrom": "generators (yield from)",
                "Await": "await"}.get(type(node).__name__, type(node).__name__)
        raise UnsupportedError(f"{what} cannot be compiled", self.loc(node),
                               hint="write a plain function that returns its results")

    def new(self, obj: Any) -> Any:
        """Record a container made while staging (it may be mutated in its region)."""
        self.born[id(obj)] = (obj, next_serial())
        return obj

    def check_mutable(self, obj: Any, what: str) -> None:
        """Python objects made outside a run-time branch or loop cannot change inside it:
        the change would happen once at compile time, not on the paths taken at run time."""
        if self.region < 0:
            return
        entry = self.born.get(id(obj))
        if entry is None or entry[0] is not obj or entry[1] <= self.region:
            raise UnsupportedError(
                f"{what} of a Python {type(obj).__name__} made outside a branch or loop "
                "that depends on run-time values",
                hint="build a new value inside and assign it to a variable (variables are "
                "merged across branches and iterations), or use an array and x[i] = v",
            )

    # -- values ---------------------------------------------------------------------

    def adopt(self, x: Any) -> Any:
        """A value made by native Python: NumPy arrays become (constant) cells."""
        if isinstance(x, np.ndarray):
            return lift(x)
        if type(x) in (list, dict, set):
            self.new(x)
        return x

    def truth(self, v: Any) -> bool | Atom:
        """``bool(v)``: a Python bool when known at compile time, else a 0-d bool value."""
        if isinstance(v, Ref):
            c = concrete(v)
            if c is not None:
                return bool(c)
            a = v.get()
            t = a.type
            if t.size == 0:
                raise ValueError("The truth value of an empty array is ambiguous. Use "
                                 "`array.size > 0` to check that an array is not empty.")
            if t.size > 1:
                raise ValueError("The truth value of an array with more than one element "
                                 "is ambiguous. Use a.any() or a.all()")
            if t.shape != ():
                a = S.reshape(a, shape=())
            return a if t.dtype.is_bool else OPERATORS["ne"](a, 0)
        if isinstance(v, DynStr):
            return True
        return bool(v)

    def static_value(self, v: Any, what: str) -> Any:
        """``v`` where Python needs a concrete value (a shape, a range bound ...)."""
        if isinstance(v, Ref):
            c = concrete(v)
            if c is None:
                raise ConcretizationError(
                    f"{what} must be known at compile time, but it is a run-time value of "
                    f"type {v.type}",
                    hint="compute it from shapes or static arguments (static_argnames), "
                    "not from array data",
                )
            return c
        return v

    # -- expressions ----------------------------------------------------------------

    def expr_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def expr_Name(self, node: ast.Name) -> Any:
        value = self.frame.read(node.id)
        flag = self.frame.vars.get(defined_flag(node.id))
        if isinstance(flag, Ref):  # assigned on some run-time paths only
            C.check(flag.get(), exc="UnboundLocalError",
                    fmt=f"cannot access local variable '{node.id}' where it is not associated "
                    "with a value")
        return value

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Any:
        v = self.eval(node.value)
        self.assign(node.target, v)
        return v

    def binop(self, name: str, a: Any, b: Any) -> Any:
        if name == "mul" and (isinstance(a, (list, tuple)) or isinstance(b, (list, tuple))):
            seq, count = (a, b) if isinstance(a, (list, tuple)) else (b, a)
            if isinstance(count, Ref) and count.type.dtype.is_int and count.type.shape == ():
                count = self.static_value(count, "the number of times a list is repeated")
                return self.adopt(seq * count)
        if isinstance(a, (Ref, DynStr)) or isinstance(b, (Ref, DynStr)):
            fn = OPERATORS.get(name)
            if fn is None:
                raise UnsupportedError(f"operator {SYMBOL.get(name, name)} on arrays is not "
                                       "supported", hint="use np.left_shift/np.right_shift")
            return lift(fn(lower(a), lower(b)))
        return self.adopt(users_call(getattr(operator, name), a, b))

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(BINOPS[type(node.op)], self.eval(node.left), self.eval(node.right))

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return self.not_(self.truth(v))
        return self.unary(UNARY[type(node.op)], v)

    def unary(self, name: str, v: Any) -> Any:
        if isinstance(v, Ref):
            return lift(OPERATORS[name](v.get()))
        return self.adopt(users_call(getattr(operator, name), v))

    def not_(self, t: bool | Atom) -> Any:
        return (not t) if isinstance(t, bool) else Ref(convert(E.not_(t), bool_, True))

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        return self._boolop(isinstance(node.op, ast.And), [lambda n=n: self.eval(n)
                                                            for n in node.values])

    def _boolop(self, is_and: bool, parts: list[Callable[[], Any]],
                norm: Callable[[Any], Any] = lambda v: v) -> Any:
        """``a and b ...`` with Python's short circuit; on run-time truth, a ``cond``.
        ``norm`` maps both outcomes to one type (truths, in conditions)."""
        v = parts[0]()
        for k, part in enumerate(parts[1:], 1):
            t = self.truth(v)
            if not isinstance(t, bool):
                rest = lambda k=k: norm(self._boolop(is_and, parts[k:], norm))  # noqa: E731
                keep = lambda v=v: norm(v)  # noqa: E731
                return self.branch_value(t, rest, keep) if is_and else \
                    self.branch_value(t, keep, rest)
            if t != is_and:
                return v
            v = part()
        return v

    def test(self, node: ast.expr) -> bool | Atom:
        """The truth of a condition; ``and``/``or``/``not`` combine truths, so that
        ``if x > 0 and n:`` needs no common type between its operands."""
        if isinstance(node, ast.BoolOp):
            out = self._boolop(isinstance(node.op, ast.And),
                               [lambda n=n: self._truth_value(n) for n in node.values],
                               self.truth_cell)
            return out.get() if isinstance(out, Ref) else out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            t = self.test(node.operand)
            return (not t) if isinstance(t, bool) else E.not_(t)
        return self.truth(self.eval(node))

    def _truth_value(self, node: ast.expr) -> Any:
        t = self.test(node)
        return t if isinstance(t, bool) else Ref(t)

    def truth_cell(self, v: Any) -> Ref:
        """A truth as a NumPy bool cell, so static and run-time truths merge."""
        t = self.truth(v)
        return Ref(Lit(np.bool_(t))) if isinstance(t, bool) else Ref(t)

    def compare(self, op: ast.cmpop, a: Any, b: Any) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)):
            return (a is b) == isinstance(op, ast.Is)
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(b, dict) and not has_ref(a):  # only the keys, never arrays
                return users_call(operator.contains, b, a) == isinstance(op, ast.In)
            if has_ref(a) or has_ref(b):
                raise UnsupportedError(
                    "`in` on arrays compares elementwise and is ambiguous here",
                    hint="use np.any(x == v) or np.isin")
            return users_call(operator.contains, b, a) == isinstance(op, ast.In)
        return self.binop(COMPARE[type(op)], a, b)

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        pairs = list(zip(node.ops, node.comparators, strict=True))

        def chain(left: Any, k: int) -> Any:
            op, comp = pairs[k]
            right = self.eval(comp)
            r = self.compare(op, left, right)
            if k + 1 == len(pairs):
                return r
            t = self.truth(r)
            if isinstance(t, bool):
                return chain(right, k + 1) if t else r
            return self.branch_value(t, lambda: chain(right, k + 1), lambda: r)

        return chain(left, 0)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        t = self.test(node.test)
        if isinstance(t, bool):
            return self.eval(node.body if t else node.orelse)
        return self.branch_value(t, lambda: self.eval(node.body),
                                 lambda: self.eval(node.orelse))

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        return self.getattr(self.eval(node.value), node.attr)

    def getattr(self, obj: Any, name: str) -> Any:
        if isinstance(obj, Choice):
            raise UnsupportedError(
                f"reading .{name} of a callable chosen by a run-time condition: only calls "
                "are staged on both choices", hint="call it, or read the attribute inside "
                "each branch")
        if isinstance(obj, Ref):
            view = view_attribute(self, obj, name)
            if view is not None:
                return view
            if name in ATTRIBUTES:
                return lift(ATTRIBUTES[name](obj.get()))
            if name in METHODS or name in ("reshape", "ravel", "transpose", "swapaxes",
                                           "squeeze"):
                return RefMethod(obj, name)
            raise UnsupportedError(f"ndarray attribute .{name} is not supported",
                                   hint="see docs/numpy_coverage.md for what is supported")
        prop = getattr(type(obj), name, None)
        if isinstance(prop, property) and prop.fget is not None and not isinstance(obj, type):
            return self.call(prop.fget, [obj], {})
        return self.adopt(self.member(obj, name, users_call(getattr, obj, name), True))

    def member(self, obj: Any, key: Any, value: Any, attribute: bool) -> Any:
        """``value``, read from ``obj``: an array of an object that outlives the call is
        read when the function is called (see ``frontend.outside``)."""
        if self.outside is None or isinstance(obj, Ref) or \
                (id(obj) in self.born and id(obj) not in self.fetched):
            return value
        if type(value) is not np.ndarray:
            self.fetched[id(value)] = value  # (kept: its id is not reused meanwhile)
            return value
        try:
            hash(key)
        except TypeError:
            return value
        return self.outside.member(obj, key, value, attribute)

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        return self.getitem(self.eval(node.value), self.eval(node.slice))

    def getitem(self, obj: Any, idx: Any) -> Any:
        if isinstance(obj, Ref):
            return self.index_array(obj, idx)
        if has_ref(idx) and id(obj) in SUBSCRIPTS:  # np.r_[a, 0, b], np.c_[...]
            return lift(SUBSCRIPTS[id(obj)](lower(idx)))
        if has_ref(idx):
            idx = self.static_value(idx, "an index into a Python " + type(obj).__name__) \
                if isinstance(idx, Ref) else idx
            if has_ref(idx):
                raise ConcretizationError(
                    f"an index into a Python {type(obj).__name__} must be known at compile "
                    "time", hint="use an array (np.stack the items) to index with data")
        return self.adopt(self.member(obj, idx, users_call(operator.getitem, obj, idx), False))

    def index_array(self, ref: Ref, idx: Any) -> Ref:
        return index_view(ref, idx)

    def expr_Slice(self, node: ast.Slice) -> slice:
        part = lambda n: None if n is None else self.eval(n)  # noqa: E731
        return slice(part(node.lower), part(node.upper), part(node.step))

    def elements(self, nodes: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for n in nodes:
            if isinstance(n, ast.Starred):
                out.extend(self.unroll(self.eval(n.value), n))
            else:
                out.append(self.eval(n))
        return out

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

    def expr_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.elements(node.elts))

    def expr_List(self, node: ast.List) -> list:
        return self.new(self.elements(node.elts))

    def expr_Set(self, node: ast.Set) -> set:
        elts = self.elements(node.elts)
        if has_ref(elts):
            raise UnsupportedError("sets of arrays cannot be compiled (arrays are unhashable)")
        return self.new(set(elts))

    def expr_Dict(self, node: ast.Dict) -> dict:
        out: dict = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                out.update(self.eval(v))
            else:
                key = self.eval(k)
                if has_ref(key):
                    raise UnsupportedError("arrays cannot be dict keys (they are unhashable)")
                out[key] = self.eval(v)
        return self.new(out)

    def expr_JoinedStr(self, node: ast.JoinedStr) -> str | DynStr:
        fmt, args = [], []
        for part in node.values:
            if isinstance(part, ast.Constant):
                fmt.append(str(part.value).replace("{", "{{").replace("}", "}}"))
                continue
            v = self.eval(part.value)
            spec = "" if part.format_spec is None else self.eval(part.format_spec)
            if isinstance(spec, DynStr):
                raise ConcretizationError("a format spec must be known at compile time")
            conv = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[part.conversion]
            if isinstance(v, Ref):
                if conv == "!r" and v.get().type.weak:
                    conv = "!s"  # a Python number's repr is its str
                fmt.append("{" + conv + (":" + spec if spec else "") + "}")
                args.append(v)
            elif isinstance(v, DynStr):
                fmt.append(v.fmt)
                args.extend(v.args)
            else:
                text = {"!s": str, "!r": repr, "!a": ascii}.get(conv, lambda x: x)(v)
                fmt.append(format(text, spec).replace("{", "{{").replace("}", "}}"))
        text = "".join(fmt)
        return DynStr(text, args) if args else text.replace("{{", "{").replace("}}", "}")

    def expr_Lambda(self, node: ast.Lambda) -> Any:
        return self.make_function(node)

    def _comprehension(self, node: ast.AST, build: Callable[[list], Any]) -> Any:
        names: set[str] = set()
        for g in node.generators:
            for t in ast.walk(g.target):
                if isinstance(t, ast.Name):
                    names.add(t.id)
        outer = self.frame
        inner = Frame(outer.name, outer.file, names, {}, outer, {}, outer.globals)
        results: list = []

        def run(k: int) -> None:
            if k == len(node.generators):
                results.append(self._comprehension_item(node))
                return
            gen = node.generators[k]
            self.frame = outer if k == 0 else inner
            items = self.unroll(self.eval(gen.iter), gen.iter)
            self.frame = inner
            for item in items:
                self.assign(gen.target, item)
                keep = True
                for cond in gen.ifs:
                    t = self.test(cond)
                    if not isinstance(t, bool):
                        raise ConcretizationError(
                            "a comprehension filter on run-time data gives a result whose "
                            "length depends on data", self.loc(cond),
                            hint="compute all items and combine them with np.where")
                    if not t:
                        keep = False
                        break
                if keep:
                    run(k + 1)

        try:
            run(0)
        finally:
            self.frame = outer
        return build(results)

    def _comprehension_item(self, node: ast.AST) -> Any:
        if isinstance(node, ast.DictComp):
            return (self.eval(node.key), self.eval(node.value))
        return self.eval(node.elt)

    def expr_ListComp(self, node: ast.ListComp) -> list:
        return self._comprehension(node, lambda r: self.new(list(r)))

    expr_GeneratorExp = expr_ListComp  # consumed eagerly: same values, same order

    def expr_SetComp(self, node: ast.SetComp) -> set:
        return self._comprehension(node, lambda r: self.new(set(r)))

    def expr_DictComp(self, node: ast.DictComp) -> dict:
        return self._comprehension(node, lambda r: self.new(dict(r)))

    def expr_Call(self, node: ast.Call) -> Any:
        fn = self.eval(node.func)
        args = self.elements(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        return self.call(fn, args, kwargs, node)

    def expr_Starred(self, node: ast.Starred) -> Any:
        raise UnsupportedError("a starred expression is only allowed in calls, literals "
                               "and assignments", self.loc(node))


