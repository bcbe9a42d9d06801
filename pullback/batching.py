"""``vmap``: a function mapped over an axis of its arguments, as one batched program.

The function is staged once, on what one lane sees (each mapped argument without its
mapped axis), and its IR is batched (``transforms/vmap.py``): the result is what a
Python loop over the lanes would return, stacked along ``out_axes``, computed by one
program in which each op works on every lane at once.  Like the derivative transforms,
it compiles itself when called from plain Python and is staged in place inside staged
code, so it composes with ``jit``, ``grad`` and itself in any order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .derivatives.transform import Transform
from .errors import CompileError
from .frontend.stager import Stager
from .frontend.values import Ref
from .ir.core import Var
from .keys import value_key
from .ops.batching import at, batched_type, lane_type
from .ops.derivs import zeros
from .passes.manager import optimize
from .transforms.vmap import vmap_emit
from .tree import tree_flatten, tree_leaves, tree_structure, tree_unflatten

Axes = Any  # an int, None, or a pytree of them that is a prefix of the values it maps


class VMap(Transform):
    """``fn`` mapped over the ``in_axes`` of its arguments, results stacked along
    ``out_axes``."""

    def __init__(self, fn: Callable, in_axes: Axes = 0, out_axes: Axes = 0,
                 axis_size: int | None = None):
        super().__init__(fn)
        self.in_axes, self.out_axes, self.axis_size = in_axes, out_axes, axis_size
        self.__name__ = f"vmap_{getattr(fn, '__name__', 'f')}"
        # the arguments as the caller gives them: a default of ``fn`` is not mapped
        self.__signature__ = _AS_GIVEN

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("vmap", key_of(self.fn), value_key(self.in_axes), value_key(self.out_axes),
                self.axis_size)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        specs = self._arg_specs(len(args))
        where: dict[int, tuple[Any, int]] = {}  # placeholder var -> (batched atom, axis)
        sizes: list[tuple[str, int]] = []

        def lane(x: Any, axis: Any, what: str) -> Any:
            if axis is None:
                return x
            if not isinstance(x, Ref):
                raise CompileError(
                    f"pb.vmap: {what} is {type(x).__name__} {x!r}, which has no axis {axis} "
                    "to map over",
                    hint="pass an array, or give it in_axes=None to use it in every lane")
            t = x.type
            a = axis + t.ndim if axis < 0 else axis
            if not 0 <= a < t.ndim:
                raise CompileError(f"pb.vmap: in_axes={axis} for {what}, of type {t}, which "
                                   f"has {t.ndim} axes")
            sizes.append((f"{what} ({t}, axis {a})", t.shape[a]))
            placeholder = Var(lane_type(t, a))
            where[id(placeholder)] = (x.get(), a)
            return Ref(placeholder)

        new_args = [_mapped(arg, spec, lambda x, ax, k=k: lane(x, ax, f"argument {k}"))
                    for k, (arg, spec) in enumerate(zip(args, specs, strict=True))]
        new_kwargs = {name: _mapped(v, 0, lambda x, ax, n=name: lane(x, ax, f"argument {n}"))
                      for name, v in kwargs.items()}
        size = self._size(sizes)
        sub = st.stage_subfunction(self.fn, new_args, new_kwargs)
        func = optimize(sub.func)
        ins, dims = [], []
        for v in sub.operands:
            atom, d = where.get(id(v), (v, None))
            ins.append(atom)
            dims.append(d)
        if size == 0:  # a loop over no lanes runs nothing: empty results
            outs = [zeros(batched_type(t, 0)) for t in func.out_types]
            odims: list = [0] * len(outs)
        else:
            outs, odims = vmap_emit(func, ins, dims, size)
        return self._results(sub.out_spec, outs, odims, size)

    def _arg_specs(self, n: int) -> list:
        if self.in_axes is None or _is_axis(self.in_axes):
            return [self.in_axes] * n
        if not isinstance(self.in_axes, (tuple, list)) or len(self.in_axes) != n:
            raise CompileError(
                f"pb.vmap: in_axes={self.in_axes!r} must be an int, None, or a tuple with one "
                f"entry per positional argument ({n} given)")
        return list(self.in_axes)

    def _size(self, sizes: list[tuple[str, int]]) -> int:
        found = {n for _, n in sizes}
        if self.axis_size is not None:
            found.add(self.axis_size)
        if len(found) > 1:
            shown = "; ".join(f"{what} has size {n}" for what, n in sizes)
            given = f"; axis_size={self.axis_size}" if self.axis_size is not None else ""
            raise CompileError(f"pb.vmap: the mapped axes differ in size: {shown}{given}",
                               hint="map axes of one length, or give in_axes=None to "
                               "arguments every lane shares")
        if not found:
            raise CompileError("pb.vmap: no argument is mapped (in_axes is None for all of "
                               "them), so the number of lanes is unknown",
                               hint="give axis_size=")
        return found.pop()

    def _results(self, spec: tuple, outs: list, dims: list, size: int) -> Any:
        tree, leaves, _ = spec
        shape_of = tree_unflatten(tree, list(range(len(leaves))))
        axes = _leaf_axes(self.out_axes, shape_of, "out_axes", "the result")
        it = iter(zip(outs, dims, strict=True))
        results = []
        for (kind, *rest), axis in zip(leaves, axes, strict=True):
            if kind != "dyn":
                results.append(_static_result(rest[0], axis, size))
                continue
            atom, d = next(it)
            if axis is None:
                if d is not None:
                    raise CompileError("pb.vmap: out_axes=None for a result that differs "
                                       "from lane to lane", hint="give it an axis")
                results.append(Ref(atom, rest[1]))
                continue
            ndim = atom.type.ndim + (d is None)
            a = axis + ndim if axis < 0 else axis
            if not 0 <= a < ndim:
                raise CompileError(f"pb.vmap: out_axes={axis} for a result with {ndim} axes")
            results.append(Ref(at(atom, d, size, a), "array"))
        return tree_unflatten(tree, results)


_AS_GIVEN = inspect.Signature([
    inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
    inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


def _is_axis(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _leaf_axes(spec: Axes, tree: Any, name: str, what: str) -> list:
    """The axis of each leaf of ``tree``, from ``spec``, a prefix of its structure."""
    if spec is None or _is_axis(spec):
        return [None if spec is None else int(spec)] * len(tree_leaves(tree))
    top = tree_structure(spec, is_leaf=lambda x: x is not spec)
    if top != tree_structure(tree, is_leaf=lambda x: x is not tree):
        raise CompileError(f"pb.vmap: {name} {spec!r} does not match the structure of "
                           f"{what} ({tree_structure(tree)})")
    children = tree_flatten(spec, is_leaf=lambda x: x is not spec)[0]
    subtrees = tree_flatten(tree, is_leaf=lambda x: x is not tree)[0]
    return [a for s, t in zip(children, subtrees, strict=True)
            for a in _leaf_axes(s, t, name, what)]


def _mapped(arg: Any, spec: Axes, lane: Callable[[Any, Any], Any]) -> Any:
    """``arg`` as one lane sees it: ``lane(leaf, axis)`` at each leaf."""
    leaves, tree = tree_flatten(arg)
    axes = _leaf_axes(spec, arg, "in_axes", "its argument")
    return tree_unflatten(tree, [lane(x, a) for x, a in zip(leaves, axes, strict=True)])


def _static_result(value: Any, axis: Any, size: int) -> Any:
    """A compile-time result, the same in every lane, stacked as the loop would."""
    if axis is None or not isinstance(value, (bool, int, float, complex, np.generic,
                                              np.ndarray)):
        return value
    return np.stack([np.asarray(value)] * size, axis=axis)


def vmap(fn: Callable, in_axes: Axes = 0, out_axes: Axes = 0,
         axis_size: int | None = None) -> VMap:
    """``fn`` mapped over axis ``in_axes`` of its arguments (None: shared by every
    lane; a tuple: one entry per positional argument, each a prefix of its structure;
    keyword arguments are mapped over axis 0), its results stacked along ``out_axes``.
    ``axis_size`` gives the number of lanes when no argument is mapped."""
    return VMap(fn, in_axes, out_axes, axis_size)
