"""The fast path of ``pb.jit`` calls: a call like the last one goes straight to the
module's ``call(args, form)``, its arguments and results in the form the entry was told
(``convention``); ``Jitted.__call__`` runs it inline and falls back to the general
path where the entry answers NotImplemented."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ....frontend.outside import Capture, current_inputs
from ....frontend.specialise import Signature, Staged, leaf_kind
from ....tree import TreeDef, tree_flatten, tree_unflatten
from .convention import ARRAY, FLOAT, LIST, NUMPY, ONE, PYTHON, SCALAR, TUPLE, form

#: How each kind of run-time argument (``leaf_kind``) and of value read from outside
#: (``Capture.kind``) comes to the entry.
_PASSED = {"array": ARRAY, "scalar": SCALAR, "python": FLOAT}
_FED = {"array": ARRAY, "scalar": SCALAR, "float": FLOAT}


class FastEntry(NamedTuple):
    """A call straight to native code (see ``fast_entry``)."""

    call: Callable
    form: bytes
    tree: TreeDef | None  # the positional arguments' structure, unless all are leaves
    pick: Callable[[Sequence], tuple | None] | None  # the leaves passed on, or None where
    # a fixed Python scalar differs (see ``guard``); None: all leaves, as they come
    guard: tuple  # (leaf count, (place, type, value) of the Python scalars fixed)
    nest: Callable[[tuple], Any] | None  # nests the flat results (None: as they come)
    pinned: tuple[tuple[dict, str, Any], ...]  # globals it reads: the same objects still?
    captures: tuple[Capture, ...]  # the rest it reads from outside (see through)
    feeds: tuple[dict, Callable[[dict], Any], bool] | None  # the rest, when all are
    # globals of one module fed as run-time values: (the module's globals, their getter,
    # whether there is one), read inline

    def through(self, args: tuple, cells: Sequence[Any]) -> Any:
        """A call of pytree arguments, of fixed Python scalars among them, or reading
        values from outside (``cells``: the called function's)."""
        leaves = args
        if self.tree is not None:
            flat, tree = tree_flatten(args)
            if tree != self.tree:
                return NotImplemented
            leaves = tuple(flat)
        passed = leaves
        if self.pick is not None:
            passed = self.pick(leaves)
            if passed is None:
                return NotImplemented
        if self.feeds is not None:
            env, get, one = self.feeds
            try:
                now = get(env)
            except KeyError:  # a global deleted: the general path says so
                return NotImplemented
            passed = (*passed, now) if one else (*passed, *now)
        elif self.captures:
            values = current_inputs(self.captures, cells, leaves, native=True)
            if values is None:
                return NotImplemented
            if values:
                passed = (*passed, *values)
        return self.call(passed, self.form)


def _taker(places: Sequence[int]) -> Callable[[Sequence], tuple]:
    """The leaves at ``places``, as a tuple (``operator.itemgetter`` of one place gives
    the leaf itself)."""
    if len(places) == 1:
        (k,) = places
        return lambda leaves: (leaves[k],)
    return operator.itemgetter(*places) if places else lambda leaves: ()


def _picker(size: int, fixed: tuple, taken: Sequence[int]) -> Callable[[Sequence],
                                                                       tuple | None]:
    """What checks the Python scalars a specialisation is fixed on (``fixed``: (place,
    type, value) each, among ``size`` leaves) and takes the run-time leaves at
    ``taken``; one fixed scalar, the common case (a step count), is checked inline."""
    take = _taker(taken)
    if len(fixed) == 1:
        ((j, t, v),) = fixed

        def pick_one(leaves: Sequence) -> tuple | None:
            if len(leaves) == size and type(leaves[j]) is t and leaves[j] == v:
                return take(leaves)
            return None
        return pick_one

    at = operator.itemgetter(*(j for j, _, _ in fixed))
    types = tuple(t for _, t, _ in fixed)
    values = tuple(v for _, _, v in fixed)

    def pick(leaves: Sequence) -> tuple | None:
        if len(leaves) == size:
            now = at(leaves)
            if tuple(map(type, now)) == types and now == values:  # types first: an
                # array where an int was would compare elementwise
                return take(leaves)
        return None
    return pick


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


def fast_entry(staged: Staged, sig: Signature, args: tuple) -> FastEntry | None:
    """The compiled entry when a call like this one can go straight to native code:
    positional arguments only (arrays and scalars, or pytrees of them, each array a
    parameter of its own), besides Python scalars the specialisation is for (checked on
    each call), nothing static by name, nothing written back, results made by the
    function (alone, or in any pytree: the C entry returns them as a tuple, nested in
    Python).  The entry answers NotImplemented to any other call.  (Parameters follow
    the flattened arguments' order, which the form maps to places.)"""
    call = getattr(staged.runner, "call", None)
    *leaves, static = sig.leaves
    flat, tree = tree_flatten(args)
    kinds = [leaf_kind(a) for a in flat]
    if call is None or static or staged.writeback or staged.outside_writeback or \
            len(leaves) != len(flat) or \
            len(sig.dynamic) != sum(k is not None for k in kinds) or \
            any(s[0] != "dyn" for s in staged.outputs) or \
            any(k is None and type(a) not in (int, bool, str, type(None))
                for a, k in zip(flat, kinds, strict=True)):
        return None
    passed = [a for a, k in zip(flat, kinds, strict=True) if k is not None]
    positions: list[int] = []  # each parameter's place among the arguments passed
    for x in (x for x in leaves if leaf_kind(x) is not None):
        j = next((j for j, a in enumerate(passed) if a is x and j not in positions), None)
        if j is None:
            return None
        positions.append(j)
    n_out = len(staged.outputs)
    order = list(range(n_out))
    shape = tree_unflatten(staged.out_tree, order)
    nest = None
    if type(shape) is int and n_out == 1:
        shape_form = ONE
    elif type(shape) in (tuple, list) and list(shape) == order:
        shape_form = TUPLE if type(shape) is tuple else LIST
    else:
        shape_form, nest = TUPLE, _rebuild(staged.out_tree, shape)
    ins = [(_PASSED[leaf_kind(passed[j])], j) for j in positions]
    fed = [c for c in staged.captures if c.kind is not None and not c.frozen and c.same is None]
    ins += [(_FED[x.kind], len(passed) + k) for k, x in enumerate(fed)]
    outs = [PYTHON if weak else NUMPY if kind == "scalar" else ARRAY
            for _, kind, weak in staged.outputs]
    guard = tuple((j, type(a), a) for j, (a, k) in enumerate(zip(flat, kinds, strict=True))
                  if k is None)
    taken = [j for j, k in enumerate(kinds) if k is not None]
    pick = _picker(len(flat), guard, taken) if guard else None
    all_leaves = len(flat) == len(args) and all(a is x for a, x in zip(args, flat, strict=True))
    nested = None if all_leaves else tree
    pinned = tuple((x.env, x.name, x.seen) for x in staged.captures if x.pinned)
    rest = tuple(x for x in staged.captures if not x.pinned)
    feeds = _feeds(staged)
    bind = getattr(staged.runner, "bind", None)
    if nested is None and (pinned or guard or rest) and (feeds is not None or not rest) \
            and bind is not None:
        # the module checks the globals and the Python scalars and reads the globals
        # itself: a call is one call of native code from Jitted.__call__
        env, names = (feeds[0], tuple(x.name for x in rest)) if rest else (None, None)
        call = bind(len(flat), pinned, guard, tuple(taken), env, names)
        pinned, pick, rest, feeds = (), None, (), None
    return FastEntry(call, form(shape_form, ins, outs), nested, pick,
                     (len(flat), guard) if guard else (), nest, pinned, rest, feeds)


def _feeds(staged: Staged) -> tuple[dict, Callable[[dict], Any], bool] | None:
    """How the run-time captures are read when each is a global of one module (the
    common case, read inline on the fast path; the native entry checks their types)."""
    rest = [x for x in staged.captures if not x.pinned]
    env = rest[0].env if rest else None
    if env is not None and all(x.env is env and x.kind is not None and not x.frozen and
                               x.same is None for x in rest):
        return env, operator.itemgetter(*(x.name for x in rest)), len(rest) == 1
    return None
