"""Control flow on run-time values: ``cond`` for branches, ``for_loop``/``while_loop`` for
loops, with the variables and cells they change found automatically (DESIGN §4).

``break``, ``continue`` and ``return`` set flag variables (``scope.FLAGS``); statements
after a flag that is only known at run time are staged under a ``cond`` on it, and
loops that may exit early run as ``while_loop`` s that test the flags.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CompileError, ShapeError
from ..ir.builder import current
from ..ir.core import Atom, Eqn, Lit, Var
from ..ir.types import TensorType, bool_, int64, type_of_value
from ..numpy_api.core import convert
from ..ops import control as C
from ..ops import elementwise as E
from ..tree import tree_flatten, tree_unflatten
from .interface import Staging
from .iteration import Counted
from .lifting import tree_leaves_refs
from .regions import (
    Bottom,
    End,
    MergeError,
    Slot,
    as_dynamic,
    merge_leaf,
    mismatch,
    run_region,
    zeros,
)
from .scope import BROKE, CONTINUED, DEAD, FLAGS, RETURNED, RETVAL, defined_flag
from .values import Ref, Undefined, is_static_number

VALUE = ".value"
CAUGHT = object()  # what _deferring returns when it moved an error to run time
PLACEHOLDER_OK = (RETVAL, VALUE)
_MISSING = object()


def _atom_of(end: End, leaf: Any) -> Atom:
    return end.atom(leaf) if isinstance(leaf, Ref) else Lit(leaf, type_of_value(leaf))


def _leaf_type(leaf: Any):
    return leaf.raw().type if isinstance(leaf, Ref) else type_of_value(leaf)


class Choice:
    """A callable that a run-time condition picks (``f = g if x < 0 else h``): calling
    it stages both calls under a ``cond`` on the condition."""

    def __init__(self, pred: Ref, then: Any, orelse: Any):
        self.pred, self.then, self.orelse = pred, then, orelse


def _callee(x: Any) -> bool:
    return isinstance(x, Choice) or (callable(x) and not isinstance(x, Ref))


def _export_choice(x: Any, at: int, ends: list[End], slots: list[Slot]) -> Callable:
    """How to rebuild the callee ``x`` that region ``ends[at]`` left, after the ``cond``:
    a choice made inside the region has its condition carried out as a slot."""
    if not isinstance(x, Choice):
        return lambda made: x
    then, orelse = (_export_choice(c, at, ends, slots) for c in (x.then, x.orelse))
    if all(x.pred.serial < e.start for e in ends):
        return lambda made: Choice(x.pred, then(made), orelse(made))
    k = len(slots)
    slots.append(Slot(x.pred.raw().type, "scalar",
                      [x.pred.raw() if i == at else Lit(np.False_) for i in range(len(ends))]))
    return lambda made: Choice(made[k], then(made), orelse(made))


class ControlMixin(Staging):
    # -- branches -------------------------------------------------------------------

    def branch_value(self, pred: Atom, then_fn: Callable[[], Any],
                     else_fn: Callable[[], Any]) -> Any:
        """``then_fn() if pred else else_fn()`` for a run-time ``pred``."""
        return self.branch(pred, then_fn, else_fn, value=True)

    def branch(self, pred: Atom, then_fn: Callable[[], Any], else_fn: Callable[[], Any],
               value: bool = False) -> Any:
        b = current()
        ends: list[End] = []

        def region(fn: Callable[[], Any]) -> Callable[[], list]:
            def build() -> list:
                end = run_region(self, lambda: self._deferring(fn))
                if value:
                    end.vars[VALUE] = end.value
                ends.append(end)
                return []
            return build

        blocks = [b.block([], region(then_fn)), b.block([], region(else_fn))]
        live = [e for e in ends if not e.bottom and e.vars.get(DEAD) is not True]
        if not live:
            if all(e.bottom for e in ends):
                raise Bottom
            C.cond(pred, then=blocks[0], orelse=blocks[1])
            self.frame.vars[DEAD] = True
            return None
        entry = dict(self.frame.vars)
        names = sorted({n for e in live for n in e.vars
                        if e.vars[n] is not entry.get(n, _MISSING)})
        slots: list[Slot] = []
        rebuild: list[tuple[str, Any, list, End]] = []
        merged: dict[str, list] = {}
        for name in names:
            vals = [e.vars.get(name, False if name in FLAGS else _MISSING) for e in live]
            unset = [v is _MISSING or isinstance(v, Undefined) for v in vals]
            if any(unset):
                known = [v for v, u in zip(vals, unset, strict=True) if not u]
                if not known:
                    self.frame.vars[name] = vals[0] if vals[0] is not _MISSING else Undefined(
                        name, "is not assigned on any path", live[0].where.get(name))
                    continue
                if name not in PLACEHOLDER_OK:  # assigned on some paths only: say which
                    flag = defined_flag(name)
                    for e, u in zip(live, unset, strict=True):
                        e.vars[flag] = False if u else e.vars.get(flag, True)
                    merged[flag] = [e.vars[flag] for e in live]
                filler = _placeholder(known[0])
                vals = [filler if u else v for v, u in zip(vals, unset, strict=True)]
            merged[name] = vals
        choice = Ref(pred) if len(live) == 2 else None  # (live: the then end first)
        for name, vals in merged.items():
            rebuild.append(self._merge_var(name, vals, live, slots, choice))
        writes = {r for e in live for r in e.writes}
        ref_slots = []
        for r in sorted(writes, key=lambda r: r.serial):
            atoms = [e.writes.get(r, r.raw()) for e in live]
            if all(a is r.raw() for a in atoms):  # (one live branch: compare with entry)
                continue
            ref_slots.append((r, len(slots)))
            slots.append(Slot(atoms[0].type, "array", atoms))
        for blk, e in zip(blocks, ends, strict=True):
            if e in live:
                blk.results = [_coerce_in(blk, s.atoms[live.index(e)], s.type) for s in slots]
            else:
                blk.results = [zeros(s.type) for s in slots]
        outs = C.cond(pred, then=blocks[0], orelse=blocks[1]) if slots or any(
            blk.eqns for blk in blocks) else []
        made: dict[int, Ref] = {}
        for k, s in enumerate(slots):
            made[k] = Ref(outs[k], s.kind)
            made[k].entangle(s.aliases)
        for name, td, plan, end in rebuild:
            leaves = [made[p] if isinstance(p, int) else p[0] if isinstance(p, tuple) else
                      p(made) for p in plan]
            self.frame.vars[name] = tree_unflatten(td, leaves)
            if name in end.where:
                self.frame.where[name] = end.where[name]
        for r, k in ref_slots:
            r.set(outs[k])
        result = self.frame.vars.pop(VALUE, None) if value else None
        return result

    def _deferring(self, fn: Callable[[], Any]) -> Any:
        """Run a branch; an error plain Python would raise only if the branch runs (an
        index out of range, a shape mismatch ...) is raised at run time on that path."""
        try:
            return fn()
        except (Bottom, MergeError):
            raise
        except (ValueError, IndexError, ArithmeticError, TypeError, NameError, KeyError,
                AttributeError) as e:
            if isinstance(e, CompileError) and not isinstance(e, ShapeError):
                raise
            exc = next((c.__name__ for c in type(e).__mro__
                        if C.CHECK_EXCEPTIONS.get(c.__name__) is c), None)
            if exc is None:
                raise
            self.deferred = e
            message = e.message if isinstance(e, CompileError) else str(e)
            C.check(Lit(False), exc=exc, fmt=message.replace("{", "{{").replace("}", "}}"))
            self.frame.vars[DEAD] = True
            return CAUGHT

    def _merge_var(self, name: str, vals: list[Any], ends: list[End], slots: list[Slot],
                   choice: Ref | None) -> tuple[str, Any, list, End]:
        flat = [tree_flatten(v) for v in vals]
        td = flat[0][1]
        for (_, t), v in zip(flat[1:], vals[1:], strict=True):
            if t != td:
                raise mismatch(name, [vals[0], v], [ends[0].where.get(name),
                                                      ends[-1].where.get(name)], "of the branch")
        plan: list = []
        shared: dict[tuple, int] = {}
        for k in range(len(flat[0][0])):
            leaves = [f[0][k] for f in flat]
            same, v = merge_leaf(leaves)
            if same and isinstance(v, Ref) and any(v.serial >= e.start for e in ends):
                same = False  # made inside the branch: its IR value does not exist outside
            if same:
                plan.append((v,))
                continue
            if choice is not None and all(_callee(x) for x in leaves):
                parts = [_export_choice(x, k, ends, slots) for k, x in enumerate(leaves)]
                plan.append(lambda made, parts=parts: Choice(choice, *(p(made) for p in parts)))
                continue
            ident = tuple(id(x) for x in leaves)
            if ident in shared and all(isinstance(x, Ref) for x in leaves):
                plan.append(shared[ident])
                continue
            types = [_leaf_type(x) for x in leaves]
            if all(joinable(t, types[0]) for t in types):
                types = [joined(*types)] * len(types)
            if any(t != types[0] for t in types):
                bad = next(i for i, t in enumerate(types) if t != types[0])
                raise mismatch(name, [as_dynamic(leaves[0]), as_dynamic(leaves[bad])],
                               [ends[0].where.get(name), ends[bad].where.get(name)],
                               "of the branch")
            kinds = [x.kind for x in leaves if isinstance(x, Ref)]
            # 0-d: a NumPy scalar on one path, a 0-d array on another: the scalar wins
            kind = "array" if types[0].shape or kinds and all(k == "array" for k in kinds) \
                else "scalar"
            shared[ident] = len(slots)
            plan.append(len(slots))
            aliases = [r for e, x in zip(ends, leaves, strict=True) for r in e.outer_arrays([x])]
            slots.append(Slot(types[0], kind, [_atom_of(e, x) for e, x in zip(ends, leaves,
                                                                              strict=True)],
                              aliases))
        return name, td, plan, ends[0]

    # -- flags ----------------------------------------------------------------------

    def flow(self, flags: tuple[str, ...] = FLAGS) -> tuple[bool | Atom, list[str]]:
        """Whether control has left the current statement list: static or run-time."""
        dynamic, names = [], []
        for f in flags:
            v = self.frame.vars.get(f, False)
            if v is True:
                return True, []
            if isinstance(v, Ref):
                dynamic.append(v.get())
                names.append(f)
        if not dynamic:
            return False, []
        out = dynamic[0]
        for d in dynamic[1:]:
            out = E.or_(out, d)
        return out, names

    def guarded(self, flow: Atom, names: list[str], rest: Callable[[], None]) -> None:
        """Stage ``rest`` only on the run-time path where no flag is set."""
        def going() -> None:
            for n in names:  # on this path every flag is known to be clear
                self.frame.vars[n] = False
            rest()

        def stopped() -> None:
            if len(names) == 1:  # on this path that one flag is known to be set
                self.frame.vars[names[0]] = True

        self.branch(E.not_(flow), going, stopped)

    # -- loops ----------------------------------------------------------------------

    def carried_loop(self, names: set[str], form: Any, min_trips: int | None) -> None:
        """Stage a rolled loop whose body may change ``names`` and any cell.

        ``form.emit(init, types, body)`` emits the loop op from the carried values' entry
        atoms and types and ``body(params) -> result atoms``; ``form.iteration()`` stages one
        iteration once the carried state is bound.  Attempts repeat until the carried
        state is stable: numbers that become run-time values, cells found written, and
        names first set inside the loop join the carries.
        """
        frame = self.frame
        names = names | {defined_flag(n) for n in names if not n.startswith(".")}
        identity: list[Ref] = []
        promoted: set[tuple[str, int]] = set()
        strong: set[tuple[str, int]] = set()  # Python numbers that meet NumPy ones
        placeholders: dict[str, Any] = {}
        loop_local: set[str] = set()
        for _ in range(12):
            entry: dict[str, tuple[list, Any]] = {}
            for name in sorted(names):
                v = frame.vars.get(name, _MISSING)
                if v is _MISSING or isinstance(v, Undefined):
                    if name not in placeholders:
                        continue
                    td, parts = placeholders[name]
                    v = tree_unflatten(td, [Ref(zeros(p[1]), p[2]) if p[0] == "type" else p[1]
                                            for p in parts])
                entry[name] = tree_flatten(v)
            spec: list[tuple] = []  # ('ref', R) | ('var', name, k)
            init: list[Atom] = []
            for r in identity:
                spec.append(("ref", r))
                init.append(r.get())
            for name, (leaves, _) in entry.items():
                for k, leaf in enumerate(leaves):
                    if isinstance(leaf, Ref) and leaf in identity:
                        continue
                    if isinstance(leaf, Ref) or (name, k) in promoted:
                        spec.append(("var", name, k))
                        a = leaf.get() if isinstance(leaf, Ref) else Lit(leaf,
                                                                         type_of_value(leaf))
                        init.append(convert(a, a.type.dtype) if (name, k) in strong else a)
            state: dict[str, Any] = {}

            def body(params: list[Atom], spec=spec, entry=entry, state=state) -> list[Atom]:
                def iteration() -> None:
                    bound = {n: list(leaves) for n, (leaves, _) in entry.items()}
                    fresh = {}
                    for s, p in zip(spec, params, strict=True):
                        if s[0] == "ref":
                            s[1].set(p)
                        else:
                            old = bound[s[1]][s[2]]
                            cell = Ref(p, old.kind if isinstance(old, Ref) else "scalar")
                            bound[s[1]][s[2]] = cell
                            fresh[id(cell)] = s
                    state["fresh"] = fresh
                    for n, (_, td) in entry.items():
                        frame.vars[n] = tree_unflatten(td, bound[n])
                    state["error"] = None
                    if self._deferring(form.iteration) is CAUGHT:
                        state["error"] = self.deferred

                end = run_region(self, iteration)
                if state["error"] is not None and (min_trips or 0) >= 1:
                    raise state["error"]  # the first iteration surely runs, and raises
                if end.vars.get(DEAD) is True:  # every iteration raises: nothing is carried
                    state["end"] = End({n: tree_unflatten(td, leaves)
                                        for n, (leaves, td) in entry.items()},
                                       {}, {}, {}, set(), start=end.start)
                    return list(params)
                state["end"] = end
                if self._loop_fixes(names, entry, spec, end, identity, promoted, strong,
                                    placeholders, loop_local, state["fresh"], min_trips):
                    raise _Retry
                return [_coerce(self._end_atom(end, s), p.type) for s, p in zip(spec, params,
                                                                                strict=True)]

            try:
                outs = form.emit(init, [a.type for a in init], body, spec)
            except _Retry:
                continue
            self._bind_loop_outputs(entry, spec, state["end"], outs, loop_local)
            return
        raise CompileError("the state carried by this loop does not settle",
                           hint="give loop variables a fixed type before the loop")

    def _end_atom(self, end: End, s: tuple) -> Atom:
        if s[0] == "ref":
            return end.writes.get(s[1], s[1].raw())
        leaf = tree_flatten(end.vars[s[1]])[0][s[2]]
        return _atom_of(end, leaf)

    def _loop_fixes(self, names, entry, spec, end: End, identity, promoted, strong,
                    placeholders, loop_local, fresh, min_trips) -> bool:
        if end.bottom:
            raise Bottom
        retry = False
        for r in end.writes:
            if r not in identity:
                identity.append(r)
                retry = True
        for pid, s in fresh.items():
            leaf0 = entry[s[1]][0][s[2]]
            if pid in end.fresh_writes and isinstance(leaf0, Ref) and leaf0.kind == "array" \
                    and leaf0 not in identity and self.is_shared(leaf0, s[1]):
                identity.append(leaf0)
                retry = True
        for name in sorted(names):
            if name not in entry and isinstance(end.vars.get(name), Undefined):
                loop_local.add(name)  # set on some paths only: stays undefined after
                continue
            if name in entry or name not in end.vars:
                continue
            if not (name in PLACEHOLDER_OK or name in FLAGS or (min_trips or 0) >= 1) \
                    and not name.startswith("."):
                self.frame.vars[defined_flag(name)] = False  # unset if the loop never runs
            leaves, td = tree_flatten(end.vars[name])
            placeholders[name] = (td, [("type", end.atom(x).type, x.kind)
                                       if isinstance(x, Ref) else ("static", x)
                                       for x in leaves])
            retry = True
        if retry:
            return True
        var_slots = {(s[1], s[2]) for s in spec if s[0] == "var"}
        param_of = {(s[1], s[2]): pid for pid, s in fresh.items()}
        seen: dict[int, tuple[str, bool]] = {}
        for name, (leaves0, td0) in entry.items():
            v = end.vars.get(name, _MISSING)
            if v is _MISSING or isinstance(v, Undefined):
                raise CompileError(f"'{name}' is deleted inside a loop on run-time values")
            leaves1, td1 = tree_flatten(v)
            where = [self.frame.where.get(name), end.where.get(name)]
            if td1 != td0:
                raise mismatch(name, [tree_unflatten(td0, leaves0), v], where,
                               "of the loop (before and after an iteration)")
            for k, (a, b) in enumerate(zip(leaves0, leaves1, strict=True)):
                if isinstance(a, Ref) and a in identity:
                    if b is not a:
                        raise MergeError(
                            f"'{name}' shares its array with another name when the loop "
                            "starts but is rebound inside it", where[1],
                            hint=f"copy it before the loop: {name} = {name}.copy()")
                    continue
                if (name, k) not in var_slots:
                    if not merge_leaf([a, b])[0]:
                        if isinstance(b, Choice):
                            raise MergeError(
                                f"'{name}' is a function chosen by a run-time condition in "
                                "a loop on run-time values, and later iterations see it",
                                where[1], hint="call it in the iteration that chooses it, "
                                "or choose by a compile-time condition")
                        if not (_is_number(a) and (isinstance(b, Ref) or _is_number(b))):
                            raise mismatch(name, [a, b], where, "of the loop")
                        promoted.add((name, k))
                        retry = True
                    continue
                ta = _leaf_type(a)
                if (name, k) in strong:
                    ta = TensorType(ta.shape, ta.dtype)
                tb = end.atom(b).type if isinstance(b, Ref) else type_of_value(b)
                if ta != tb and joinable(ta, tb):
                    if ta.weak:
                        strong.add((name, k))
                        retry = True
                    continue
                if ta != tb:
                    shown = Ref(end.atom(b)) if isinstance(b, Ref) else as_dynamic(b)
                    raise mismatch(name, [as_dynamic(a), shown], where,
                                   "of the loop (before and after an iteration)")
                if isinstance(b, Ref) and b.kind == "array":
                    # two names left holding one array: the next iteration starts them as
                    # two arrays, which is exact only if it rebinds them before writing
                    written = param_of.get((name, k)) in end.fresh_writes
                    if id(b) in seen and (written or seen[id(b)][1]):
                        raise MergeError(
                            f"'{name}' and '{seen[id(b)][0]}' are the same array after an "
                            "iteration but not before it, and the loop writes to it",
                            where[1], hint="make a copy with .copy()")
                    seen.setdefault(id(b), (name, written))
        return retry

    def _bind_loop_outputs(self, entry, spec, end: End, outs, loop_local) -> None:
        made: dict = {}  # names holding one cell after the body share it after the loop
        by_var = {}
        for s, out in zip(spec, outs, strict=True):
            if s[0] == "ref":
                s[1].set(out)
            else:
                by_var[(s[1], s[2])] = out
        for name, (leaves0, td0) in entry.items():
            leaves1, _ = tree_flatten(end.vars[name])
            new = []
            for k, (a, b) in enumerate(zip(leaves0, leaves1, strict=True)):
                if (name, k) in by_var:
                    kind = b.kind if isinstance(b, Ref) else (
                        a.kind if isinstance(a, Ref) else "scalar")
                    key = id(b) if isinstance(b, Ref) else (name, k)
                    if key not in made:
                        made[key] = Ref(by_var[(name, k)], kind)
                        made[key].entangle(end.outer_arrays([b]))
                    new.append(made[key])
                else:
                    new.append(a)
            self.frame.vars[name] = tree_unflatten(td0, new)
            if name in end.where:
                self.frame.where[name] = end.where[name]
        for name in loop_local:
            v = end.vars.get(name)
            self.frame.vars[name] = v if isinstance(v, Undefined) else Undefined(
                name, "is first assigned inside a loop that may run zero times at run time",
                end.where.get(name))

    def is_shared(self, ref: Ref, name: str) -> bool:
        """Whether a cell can be seen through anything but the variable ``name``."""
        root = ref.root()
        for frame in self.frames:
            for n, v in frame.vars.items():
                for r in tree_leaves_refs(v):
                    if r.root() is root and not (frame is self.frame and n == name
                                                 and r is ref):
                        return True
        return any(a.root() is root for a in self.arguments)


class _Retry(Exception):
    """The loop's carried state changed during an attempt: stage it again."""


class ForForm:
    """``for_loop(lo, hi, step)`` binding each index (or element) to the target."""

    def __init__(self, stager: Staging, counted: Counted, bind: Callable[[Any], None],
                 run_body: Callable[[], None]):
        self.stager, self.bind, self.run_body = stager, bind, run_body
        if counted.bounds is not None:
            self.lo, self.hi, self.step = (index_atom(v) for v in counted.bounds)
            self.element = None
        else:
            self.lo, self.hi, self.step = index_atom(0), index_atom(counted.length), \
                index_atom(1)
            self.element = counted.at
        self.index: Atom | None = None

    def iteration(self) -> None:
        idx = Ref(self.index)
        self.bind(idx if self.element is None else self.element(idx))
        self.stager.frame.vars[CONTINUED] = False
        self.run_body()
        self.stager.frame.vars[CONTINUED] = False

    def emit(self, init: list[Atom], types: list, body: Callable, spec: list) -> list:
        def build(i, *params):
            self.index = i
            return body(list(params))

        blk = current().block([self.lo.type, *types], build)
        return C.for_loop(self.lo, self.hi, self.step, *init, body=blk, **C.loop_options())


class WhileForm:
    """``while_loop`` on the carried flag ``.go``; the body recomputes it after the
    iteration, from the flags and the loop's test."""

    def __init__(self, stager: Staging, run_body: Callable[[], None], test: Callable[[], Any],
                 go: str):
        self.stager, self.run_body, self.test, self.go = stager, run_body, test, go

    def iteration(self) -> None:
        st = self.stager
        for flag in (RETURNED, BROKE, CONTINUED):  # the loop goes on only while all are clear
            st.frame.vars[flag] = False
        self.run_body()
        st.frame.vars[CONTINUED] = False
        flow, _ = st.flow((RETURNED, BROKE, DEAD))
        if flow is True:
            go: Any = False
        elif flow is False:
            go = st.truth(self.test())
        else:
            go = st.branch_value(flow, lambda: False,
                                 lambda: _bool_cell(st.truth(self.test())))
        st.frame.vars[self.go] = _bool_cell(go.get() if isinstance(go, Ref) else go)

    def emit(self, init: list[Atom], types: list, body: Callable, spec: list) -> list:
        b = current()
        go_at = spec.index(("var", self.go, 0))

        cond = b.block(types, lambda *ps: [ps[go_at]])
        blk = b.block(types, lambda *ps: body(list(ps)))
        return C.while_loop(*init, cond=cond, body=blk, **C.loop_options())


def _placeholder(value: Any) -> Any:
    """A value of ``value``'s structure and types for a path that never observes it."""
    leaves, td = tree_flatten(value)
    return tree_unflatten(td, [Ref(zeros(_leaf_type(x)), x.kind) if isinstance(x, Ref) else x
                               for x in leaves])


def joinable(a: Any, b: Any) -> bool:
    """A Python number and a NumPy value of the same dtype: carried as the NumPy one."""
    return isinstance(a, TensorType) and isinstance(b, TensorType) and a.shape == b.shape \
        and a.dtype == b.dtype


def joined(*types: TensorType) -> TensorType:
    return TensorType(types[0].shape, types[0].dtype, all(t.weak for t in types))


def _coerce(a: Atom, t: TensorType) -> Atom:
    return a if a.type == t else convert(a, t.dtype, t.weak)


def _coerce_in(blk: Any, a: Atom, t: TensorType) -> Atom:
    """``a`` as type ``t``, converted at the end of ``blk`` (which is already built)."""
    if a.type == t or isinstance(a, Lit):
        return _coerce(a, t)
    out = Var(t)
    blk.eqns.append(Eqn(E.convert, [a], [out], {"dtype": t.dtype, "weak": t.weak},
                        current().loc))
    return out


def _bool_cell(t: Any) -> Ref:
    if isinstance(t, Ref):
        return t
    if isinstance(t, bool):
        return Ref(Lit(t, type_of_value(True)))
    return Ref(convert(t, bool_, True))


def index_atom(v: Any) -> Atom:
    if isinstance(v, Ref):
        return convert(v.get(), int64, True)
    return Lit(int(v), type_of_value(0))


def _is_number(x: Any) -> bool:
    return is_static_number(x)
