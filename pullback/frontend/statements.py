"""Statements: assignment, mutation, ``if``/``for``/``while``, ``return``/``break``/
``continue``, ``assert``, ``raise``, nested ``def`` s, and the statements refused."""

from __future__ import annotations

import ast
import importlib
import operator
from typing import Any

import numpy as np

from ..errors import CompileError, ConcretizationError, UnsupportedError, users_call
from ..ir.builder import current
from ..ir.core import Lit
from ..ir.types import bool_, type_of_value
from ..numpy_api import OPERATORS
from ..numpy_api.core import convert
from ..numpy_api.creation import as_array
from ..numpy_api.indexing import (
    masked_operand,
    masked_source,
    merge_masked,
    run_time_mask,
    value_as,
)
from ..ops import control as C
from .control import ForForm, WhileForm
from .interface import Staging
from .iteration import Counted
from .lifting import has_ref, lower
from .operators import BINOPS
from .scope import BROKE, CONTINUED, DEAD, RETURNED, RETVAL, loop_stores
from .source import annotate
from .values import DynStr, Ref, next_serial

_REFUSED = {
    "AsyncFunctionDef": "async functions", "AsyncFor": "async for", "AsyncWith": "async with",
    "ClassDef": "class definitions inside a compiled function",
    "Match": "match statements", "TryStar": "try/except*",
}


def _updated(name: str, a: Any, b: Any) -> Any:
    """The new content of array ``a`` after ``a op= b`` (NumPy's 'same_kind' casting)."""
    r = OPERATORS[name](a, b)
    ta, tr = a.type, r.type
    if tr.shape != ta.shape:
        raise ValueError(f"non-broadcastable output operand with shape {ta.shape} "
                         f"doesn't match the broadcast shape {tr.shape}")
    if tr.dtype != ta.dtype:
        if not np.can_cast(tr.dtype.np, ta.dtype.np, "same_kind"):
            raise TypeError(
                f"Cannot cast ufunc '{name}' output from dtype('{tr.dtype.name}') to "
                f"dtype('{ta.dtype.name}') with casting rule 'same_kind'")
        r = convert(r, ta.dtype)
    return r


class StatementMixin(Staging):
    def exec_block(self, stmts: list[ast.stmt]) -> None:
        for k, stmt in enumerate(stmts):
            flow, names = self.flow()
            if flow is True:
                return
            if flow is not False:
                self.guarded(flow, names, lambda k=k: self.exec_block(stmts[k:]))
                return
            self.exec(stmt)

    def exec(self, node: ast.stmt) -> None:
        b = current()
        saved = b.loc
        loc = b.loc = self.loc(node)
        try:
            getattr(self, "stmt_" + type(node).__name__, self._refused)(node)
        except CompileError as e:
            raise e.with_loc(loc) from None
        except Exception as e:
            annotate(e, loc)
            raise
        finally:
            b.loc = saved

    def _refused(self, node: ast.stmt) -> None:
        what = _REFUSED.get(type(node).__name__, type(node).__name__)
        raise UnsupportedError(f"{what} cannot be compiled", self.loc(node),
                               hint="move it out of the compiled function")

    # -- simple statements ------------------------------------------------------------

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        self.eval(node.value)

    def stmt_Global(self, node: ast.Global) -> None:
        pass

    stmt_Nonlocal = stmt_Global

    def stmt_Return(self, node: ast.Return) -> None:
        value = None if node.value is None else self.eval(node.value)
        self.frame.assign(RETVAL, value, self.loc(node))
        self.frame.vars[RETURNED] = True

    def stmt_Break(self, node: ast.Break) -> None:
        self.frame.vars[BROKE] = True

    def stmt_Continue(self, node: ast.Continue) -> None:
        self.frame.vars[CONTINUED] = True

    def stmt_Import(self, node: ast.Import) -> None:
        for a in node.names:
            mod = importlib.import_module(a.name)
            if a.asname:
                self.frame.assign(a.asname, mod, self.loc(node))
            else:
                self.frame.assign(a.name.split(".")[0],
                                  importlib.import_module(a.name.split(".")[0]), self.loc(node))

    def stmt_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            raise UnsupportedError("relative imports inside a compiled function",
                                   hint="import at module level")
        mod = importlib.import_module(node.module)
        for a in node.names:
            value = getattr(mod, a.name) if hasattr(mod, a.name) else \
                importlib.import_module(f"{node.module}.{a.name}")
            self.frame.assign(a.asname or a.name, value, self.loc(node))

    def stmt_FunctionDef(self, node: ast.FunctionDef) -> None:
        fn = self.make_function(node)
        for d in reversed(node.decorator_list):
            fn = self.call(self.eval(d), [fn], {}, d)
        self.frame.assign(node.name, fn, self.loc(node))

    def stmt_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.frame.read(t.id)
                del self.frame.vars[t.id]
            elif isinstance(t, ast.Subscript):
                obj = self.eval(t.value)
                if isinstance(obj, Ref):
                    raise ValueError("cannot delete array elements")
                self.check_mutable(obj, "deleting items")
                users_call(operator.delitem, obj, self.static_value(self.eval(t.slice), "an index"))
            else:
                raise UnsupportedError("del of attributes cannot be compiled")

    def stmt_Assert(self, node: ast.Assert) -> None:
        t = self.test(node.test)
        if t is True:
            return
        if t is False and self.region < 0:  # fails whenever the function runs
            raise AssertionError(*(() if node.msg is None else (self._message(node.msg),)))
        fmt, args = ("", []) if node.msg is None else self._format(self.eval(node.msg))
        C.check(Lit(False) if t is False else t, *args, exc="AssertionError", fmt=fmt)
        if t is False:  # fails on this run-time path only
            self.frame.vars[DEAD] = True

    def _message(self, node: ast.expr) -> Any:
        v = self.eval(node)
        if isinstance(v, DynStr) or isinstance(v, Ref):
            raise ConcretizationError("the message of an exception raised at compile time "
                                      "cannot hold run-time values")
        return v

    def _format(self, v: Any) -> tuple[str, list]:
        """A message as a run-time format string and its operands."""
        if isinstance(v, DynStr):
            return v.fmt, [a.get() for a in v.args]
        if isinstance(v, Ref):
            return "{}", [v.get()]
        return str(v).replace("{", "{{").replace("}", "}}"), []

    def stmt_Raise(self, node: ast.Raise) -> None:
        if node.exc is None:
            raise UnsupportedError("a bare `raise` cannot be compiled (there is no "
                                   "exception being handled)")
        exc = self.eval(node.exc)
        if isinstance(exc, type) and issubclass(exc, BaseException):
            exc = exc()
        if not isinstance(exc, BaseException):
            raise TypeError("exceptions must derive from BaseException")
        if self.region < 0:
            raise exc
        name = type(exc).__name__
        if name not in C.CHECK_EXCEPTIONS or C.CHECK_EXCEPTIONS[name] is not type(exc):
            raise UnsupportedError(
                f"raising {name} on a path chosen at run time is not supported",
                hint=f"raise one of {', '.join(sorted(C.CHECK_EXCEPTIONS))}, or an assert")
        fmt, args = self._format(exc.args[0]) if exc.args else ("", [])
        C.check(Lit(False), *args, exc=name, fmt=fmt)
        self.frame.vars[DEAD] = True

    def stmt_With(self, node: ast.With) -> None:
        managers = []
        for item in node.items:
            cm = self.eval(item.context_expr)
            if has_ref(cm):
                raise UnsupportedError("a `with` on run-time values cannot be compiled")
            value = cm.__enter__()
            managers.append(cm)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value)
        try:
            self.exec_block(node.body)
        finally:
            for cm in reversed(managers):
                cm.__exit__(None, None, None)

    def stmt_Try(self, node: ast.Try) -> None:
        count = _emitted()
        try:
            self.exec_block(node.body)
        except CompileError:
            raise
        except Exception as e:
            if _emitted() != count or self.region >= 0:
                raise self._try_refused(node) from None
            for h in node.handlers:
                kind = None if h.type is None else self.eval(h.type)
                if kind is None or isinstance(e, kind):
                    if h.name:
                        self.frame.assign(h.name, e, self.loc(h))
                    self.exec_block(h.body)
                    break
            else:
                raise
        else:
            if _emitted() != count and node.handlers:
                raise self._try_refused(node)
            self.exec_block(node.orelse)
        finally:
            self.exec_block(node.finalbody)

    def _try_refused(self, node: ast.Try) -> UnsupportedError:
        return UnsupportedError(
            "try/except around code on run-time values cannot be compiled",
            self.loc(node),
            hint="test the condition explicitly (if/assert) instead of catching an exception")

    # -- assignment -------------------------------------------------------------------

    def stmt_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0]
        if len(node.targets) == 1 and isinstance(target, ast.Subscript):
            source = self._masked_read(node.value)
            if source is not None:
                self._masked_copy(target, *source)
                return
        value = self.eval(node.value)
        for t in node.targets:
            self.assign(t, value)

    def _masked_read(self, node: ast.expr) -> tuple[Ref, Any] | None:
        """``x`` and ``m`` when ``node`` reads ``x[m]`` through a run-time boolean mask
        held in a variable (a name: reading it twice has no effect), else None."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name)):
            return None
        idx = self.eval(node.slice)
        mask = run_time_mask(lower(idx)) if isinstance(idx, Ref) else None
        if mask is None:
            return None
        source = self.eval(node.value)
        return (source, mask) if isinstance(source, Ref) else None

    def _masked_copy(self, target: ast.Subscript, source: Ref, mask: Any) -> None:
        """``y[m] = x[m]`` for a run-time mask ``m``: ``x[m]`` alone has a data-dependent
        shape, but the copy is ``y`` with ``x`` where ``m`` holds."""
        obj = self.eval(target.value)
        idx = self.eval(target.slice)
        same = isinstance(obj, Ref) and isinstance(idx, Ref) and \
            run_time_mask(lower(idx)) is mask
        if not same:
            raise UnsupportedError(
                "reading x[mask] with a run-time boolean mask gives a data-dependent shape; "
                "it compiles only when assigned through the same mask, y[m] = x[m]",
                hint="name the mask once (m = ...; y[m] = x[m]) or use np.where(mask, x, y)")
        x = obj.get()
        obj.set(merge_masked(x, mask, value_as(masked_source(x, mask, source.get()), x)))

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.eval(node.value))

    def assign(self, target: ast.expr, value: Any) -> None:
        loc = self.loc(target)
        if isinstance(target, ast.Name):
            if target.id in self.frame.declared and has_ref(value):
                raise UnsupportedError(
                    f"{self.frame.declared[target.id]} '{target.id}' cannot be given a "
                    "run-time value", loc, hint="return the value instead")
            self.frame.assign(target.id, value, loc)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._unpack(target, value)
        elif isinstance(target, ast.Subscript):
            self.setitem(self.eval(target.value), self.eval(target.slice), value)
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value)
            if isinstance(obj, Ref):
                raise UnsupportedError(f"cannot set ndarray attribute .{target.attr}")
            self.check_mutable(obj, f"setting .{target.attr}")
            users_call(setattr, obj, target.attr, value)
        elif isinstance(target, ast.Starred):
            raise SyntaxError("starred assignment target must be in a list or tuple")
        else:
            raise UnsupportedError(f"cannot assign to {type(target).__name__}")

    def _unpack(self, target: ast.Tuple | ast.List, value: Any) -> None:
        items = self.unroll(value, target)
        stars = [k for k, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
        n = len(target.elts)
        if not stars:
            if len(items) != n:
                word = "many" if len(items) > n else "enough"
                raise ValueError(f"too {word} values to unpack (expected {n}, got "
                                 f"{len(items)})")
            for t, v in zip(target.elts, items, strict=True):
                self.assign(t, v)
            return
        s = stars[0]
        after = n - s - 1
        if len(items) < n - 1:
            raise ValueError(f"not enough values to unpack (expected at least {n - 1}, got "
                             f"{len(items)})")
        for t, v in zip(target.elts[:s], items[:s], strict=True):
            self.assign(t, v)
        self.assign(target.elts[s].value, self.new(list(items[s:len(items) - after])))
        for t, v in zip(target.elts[s + 1:], items[len(items) - after:], strict=True):
            self.assign(t, v)

    def setitem(self, obj: Any, idx: Any, value: Any) -> None:
        if isinstance(obj, Ref):
            if isinstance(value, DynStr):
                raise ConcretizationError("cannot store a string in an array")
            obj.set(OPERATORS["setitem"](obj.get(), lower(idx), lower(value)))
            return
        if isinstance(obj, np.ndarray):
            raise UnsupportedError(
                "writing to an array the function closes over (a global or closure "
                "constant): it is baked into the compiled code",
                hint="pass the array as an argument, or write to a copy")
        if has_ref(idx):
            idx = self.static_value(idx, f"an index into a Python {type(obj).__name__}")
        self.check_mutable(obj, "item assignment")
        users_call(operator.setitem, obj, idx, value)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        name = BINOPS[type(node.op)]
        t = node.target
        if isinstance(t, ast.Name):
            current_value = self.frame.read(t.id)
            self.frame.assign(t.id, self.inplace(name, current_value, self.eval(node.value)),
                              self.loc(t))
        elif isinstance(t, ast.Subscript):
            obj, idx = self.eval(t.value), self.eval(t.slice)
            mask = run_time_mask(lower(idx)) if isinstance(obj, Ref) else None
            if mask is not None:
                self._masked_update(name, obj, mask, node.value)
                return
            old = self.getitem(obj, idx)
            self.setitem(obj, idx, self.inplace(name, old, self.eval(node.value)))
        elif isinstance(t, ast.Attribute):
            obj = self.eval(t.value)
            new = self.inplace(name, self.getattr(obj, t.attr), self.eval(node.value))
            self.check_mutable(obj, f"setting .{t.attr}")
            users_call(setattr, obj, t.attr, new)
        else:
            raise UnsupportedError("unsupported augmented assignment target")

    def _masked_update(self, name: str, obj: Ref, mask: Any, value: ast.expr) -> None:
        """``y[m] op= v`` for a run-time mask ``m``: ``y op v`` (``v`` spread to where
        ``m`` holds when it has a row per True value) kept where ``m`` holds."""
        y = obj.get()
        read = self._masked_read(value)
        if read is not None and read[1] is mask:  # y[m] += x[m]
            operand = masked_source(y, mask, read[0].get())
        else:
            operand = masked_operand(y, mask, as_array(lower(self.eval(value))))
        obj.set(merge_masked(y, mask, _updated(name, y, operand)))

    def inplace(self, name: str, a: Any, b: Any) -> Any:
        """``a op= b``: arrays are updated in place (NumPy's casting rule), the rest
        rebinds."""
        if isinstance(a, Ref) and a.kind == "array":
            a.set(_updated(name, a.get(), lower(b)))
            return a
        if isinstance(a, list) and name == "add":
            self.check_mutable(a, "+=")
            a.extend(self.unroll(b, None))
            return a
        return self.binop(name, a, b)

    # -- if ----------------------------------------------------------------------------

    def stmt_If(self, node: ast.If) -> None:
        t = self.test(node.test)
        if isinstance(t, bool):
            self.exec_block(node.body if t else node.orelse)
            return
        self.branch(t, lambda: self.exec_block(node.body),
                    lambda: self.exec_block(node.orelse))

    # -- loops -------------------------------------------------------------------------

    def _loop_scope(self):
        saved = {f: self.frame.vars.get(f, False) for f in (BROKE, CONTINUED)}
        self.frame.vars[BROKE] = False
        self.frame.vars[CONTINUED] = False
        return saved

    def _after_loop(self, saved: dict, orelse: list[ast.stmt]) -> None:
        broke = self.frame.vars.get(BROKE, False)
        self.frame.vars[CONTINUED] = False
        if orelse:
            if broke is False:
                self.exec_block(orelse)
            elif broke is not True:
                self.branch(self.not_(broke.get()).get(), lambda: self.exec_block(orelse),
                            lambda: None)
        self.frame.vars.update(saved)

    def stmt_While(self, node: ast.While) -> None:
        saved = self._loop_scope()
        names = loop_stores(node.body) | loop_stores([ast.Expr(node.test)])
        for _ in range(self.MAX_UNROLL + 1):
            flow, _ = self.flow((RETURNED, BROKE, DEAD))
            if flow is True:
                break
            if flow is False:
                t = self.test(node.test)
            else:  # a break or return decided at run time: go on only where none happened
                t = self.branch_value(flow, lambda: False,
                                      lambda: self.truth_cell(self.test(node.test))).get()
            if t is False:
                break
            if t is not True:
                go = f".go{next_serial()}"
                self.frame.vars[go] = Ref(convert(t, bool_, True))
                form = WhileForm(self, lambda: self.exec_block(node.body),
                                 lambda: self.eval(node.test), go)
                self.carried_loop(names | {go}, form, None)
                self.frame.vars.pop(go, None)
                break
            self.exec_block(node.body)
            self.frame.vars[CONTINUED] = False
            self.budget()
        else:
            raise self._unroll_limit(node)
        self._after_loop(saved, node.orelse)

    def _unroll_limit(self, node: ast.AST) -> CompileError:
        return UnsupportedError(
            f"this loop runs more than {self.MAX_UNROLL} iterations at compile time",
            self.loc(node),
            hint="make the loop condition depend on run-time values, or write the loop so "
            "that it does not need its index at compile time")

    def stmt_For(self, node: ast.For) -> None:
        it = self.iterable(self.eval(node.iter), node.iter)
        saved = self._loop_scope()
        names = loop_stores(node.body) | _targets(node.target)
        body = lambda: self.exec_block(node.body)  # noqa: E731
        bind = lambda v: self.assign(node.target, v)  # noqa: E731
        if isinstance(it, Counted):
            self._counted_loop(node, it, names, bind, body)
        else:
            self._unrolled(node, list(it), bind, body)
        self._after_loop(saved, node.orelse)

    def _counted_loop(self, node, it: Counted, names, bind, body) -> None:
        n = it.static_length
        exits = bool(loop_stores(node.body) & {BROKE, RETURNED})
        snapshot = (dict(self.frame.vars), dict(self.frame.where))
        try:
            if n == 0:
                return
            if exits:
                self._while_counted(it, names, bind, body, n)
            else:
                self.carried_loop(names, ForForm(self, it, bind, body), n)
            if n is not None and n > 0:
                self._bind_last(node, it, n)
        except CompileError:
            if n is None or n > self.MAX_UNROLL:
                raise
            self.frame.vars.clear()
            self.frame.vars.update(snapshot[0])
            self.frame.where.clear()
            self.frame.where.update(snapshot[1])
            self._unrolled(node, [it.at(k) for k in range(n)], bind, body)

    def _bind_last(self, node, it: Counted, n: int) -> None:
        """After a rolled loop, the target holds the last element, as in Python."""
        for name in _targets(node.target):
            self.frame.vars.pop(name, None)
        self.assign(node.target, it.at(n - 1))

    def _while_counted(self, it: Counted, names, bind, body, n: int | None) -> None:
        serial = next_serial()
        k, go = f".k{serial}", f".go{serial}"
        self.frame.vars[k] = Ref(Lit(0, type_of_value(0)))
        length = it.length

        def step() -> None:
            bind(it.at(self.frame.vars[k]))
            body()
            self.frame.vars[k] = self.binop("add", self.frame.vars[k], 1)

        test = lambda: self.binop("lt", self.frame.vars[k], length)  # noqa: E731
        self.frame.vars[go] = Ref(convert(self.truth(test()), bool_, True))
        self.carried_loop(names | {go, k}, WhileForm(self, step, test, go), n)
        self.frame.vars.pop(go, None)
        self.frame.vars.pop(k, None)

    def _unrolled(self, node, items: list, bind, body) -> None:
        if len(items) > self.MAX_UNROLL:
            raise self._unroll_limit(node)
        for k, item in enumerate(items):
            flow, names = self.flow((RETURNED, BROKE, DEAD))
            if flow is True:
                return
            if flow is not False:
                self.guarded(flow, names, lambda k=k: self._unrolled(node, items[k:], bind,
                                                                      body))
                return
            bind(item)
            body()
            self.frame.vars[CONTINUED] = False
            self.budget()


def _targets(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _emitted() -> int:
    return len(current().frame.eqns)


