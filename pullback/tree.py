"""Pytrees: nested containers whose leaves are the values a compiled function sees.

``jit``/``grad`` accept and return arbitrary nests of tuples, lists, dicts, ``None``,
dataclasses, NamedTuples and registered classes.  Flattening turns such a nest into a
list of leaves plus a ``TreeDef`` describing the containers; the ``TreeDef`` is
immutable and hashable because it is part of every compile-cache key.

Dicts flatten in sorted key order, so two dicts with the same keys line up leaf by
leaf whatever order they were built in (their ``TreeDef`` s are equal, as the dicts
would be); the original insertion order is kept on the side and restored by
``unflatten``.  Keys that cannot be sorted (say ``1`` and ``'a'``) keep insertion order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

__all__ = [
    "TreeDef",
    "field",
    "frozen_leaves",
    "register_pytree",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]

Flatten = Callable[[Any], tuple[Iterable[Any], Hashable]]
Unflatten = Callable[[Hashable, tuple], Any]
Show = Callable[[Hashable, list[str]], str]
IsLeaf = Callable[[Any], bool] | None


class _Kind:
    """How one container class flattens, rebuilds and prints; compared by identity.
    ``frozen``: per child, whether it is marked ``field(frozen=True)`` (empty: none is)."""

    __slots__ = ("cls", "flatten", "unflatten", "show", "frozen")

    def __init__(self, cls: type, flatten: Flatten, unflatten: Unflatten, show: Show,
                 frozen: tuple[bool, ...] = ()):
        self.cls = cls
        self.flatten = flatten
        self.unflatten = unflatten
        self.show = show
        self.frozen = frozen


class _DictKeys:
    """A dict's keys in flattening order (its structure) plus its insertion order.

    Only the flattening order takes part in equality and hashing: it decides how
    leaves line up, while insertion order only affects how the rebuilt dict iterates.
    """

    __slots__ = ("flat", "order")

    def __init__(self, flat: tuple, order: tuple):
        self.flat = flat
        self.order = order

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DictKeys) and self.flat == other.flat

    def __hash__(self) -> int:
        return hash(self.flat)


class TreeDef:
    """The container structure of a pytree, with a ``*`` where each leaf goes.

    Immutable: its state lives in private slots that nothing reassigns after creation
    (the hash is computed on first use and cached).
    """

    __slots__ = ("_kind", "_aux", "_children", "_num_leaves", "_hash")

    def __init__(
        self, kind: _Kind | None, aux: Hashable, children: tuple[TreeDef, ...], num_leaves: int
    ):
        self._kind = kind
        self._aux = aux
        self._children = children
        self._num_leaves = num_leaves
        self._hash: int | None = None

    @property
    def num_leaves(self) -> int:
        return self._num_leaves

    def __copy__(self) -> TreeDef:
        return self

    def __deepcopy__(self, memo: dict) -> TreeDef:
        return self

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, TreeDef):
            return NotImplemented
        return (
            self._kind is other._kind
            and self._num_leaves == other._num_leaves
            and self._aux == other._aux
            and self._children == other._children
        )

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self._kind, self._aux, self._children))
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({self._show()})"

    def _show(self) -> str:
        if self._kind is None:
            return "*"
        return self._kind.show(self._aux, [c._show() for c in self._children])

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Rebuild the tree, placing ``leaves`` in flattening order."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"{self!r} has {self.num_leaves} leaves but {len(leaves)} were given")
        return leaves[0] if self._kind is None else self._build(iter(leaves))

    def _build(self, leaves: Iterator[Any]) -> Any:
        children = [next(leaves) if c._kind is None else c._build(leaves) for c in self._children]
        return self._kind.unflatten(self._aux, tuple(children))

    def frozen(self) -> tuple[bool, ...]:
        """Per leaf, whether it lies under a dataclass field marked ``field(frozen=True)``."""
        if self._kind is None:
            return (False,)
        marks = self._kind.frozen or (False,) * len(self._children)
        return tuple(flag or m for c, m in zip(self._children, marks, strict=True)
                     for flag in c.frozen())


_LEAF = TreeDef(None, None, (), 1)


# --- built-in kinds -----------------------------------------------------------------


def _flatten_dict(d: dict) -> tuple[list, _DictKeys]:
    order = tuple(d)
    try:
        flat = tuple(sorted(order))
    except TypeError:
        flat = order
    return [d[k] for k in flat], _DictKeys(flat, order)


def _unflatten_dict(keys: _DictKeys, children: tuple) -> dict:
    by_key = dict(zip(keys.flat, children, strict=True))
    return {k: by_key[k] for k in keys.order}


def _show_dict(keys: _DictKeys, children: list[str]) -> str:
    by_key = dict(zip(keys.flat, children, strict=True))
    return "{" + ", ".join(f"{k!r}: {by_key[k]}" for k in keys.order) + "}"


def _own_children(node: Sequence) -> tuple[Sequence, None]:
    """Sequences are their own children and carry no aux data."""
    return node, None


def _show_tuple(aux: None, children: list[str]) -> str:
    if len(children) == 1:
        return f"({children[0]},)"
    return "(" + ", ".join(children) + ")"


_BUILTIN: dict[type, _Kind] = {
    tuple: _Kind(tuple, _own_children, lambda _, ch: ch, _show_tuple),
    list: _Kind(list, _own_children, lambda _, ch: list(ch), lambda _, ch: f"[{', '.join(ch)}]"),
    dict: _Kind(dict, _flatten_dict, _unflatten_dict, _show_dict),
    type(None): _Kind(type(None), lambda _: ((), None), lambda _, ch: None, lambda _, ch: "None"),
}

#: Every class seen so far: its kind, or None for leaf classes.
_KINDS: dict[type, _Kind | None] = dict(_BUILTIN)
_REGISTERED: set[type] = set()


def _show_fields(cls: type, names: Sequence[str]) -> Show:
    """A printer for record-like classes: ``Point(x=*, y=*)``."""

    def show(aux: None, children: list[str]) -> str:
        fields = ", ".join(f"{n}={c}" for n, c in zip(names, children, strict=True))
        return f"{cls.__qualname__}({fields})"

    return show


def _namedtuple_kind(cls: type) -> _Kind:
    return _Kind(cls, _own_children, lambda aux, ch: cls._make(ch), _show_fields(cls, cls._fields))


def field(*, static: bool = False, frozen: bool = False, **kwargs: Any) -> Any:
    """A dataclass field with pullback's marks (``dataclasses.field``'s keywords pass on).

    ``static=True``: the value is configuration (a stride, an activation function, a flag),
    part of the tree's structure rather than a leaf: compiled code specialises on it, and
    gradients, ``tree_map`` and optimisers never see it; it must be hashable.
    ``frozen=True``: the value stays a run-time leaf, but ``grad`` does not differentiate
    with respect to it (its gradient is None, as an integer leaf's is), so optimisers leave
    it as it is.
    """
    if static and frozen:
        raise ValueError("field: a field is either static (structure) or frozen (a leaf "
                         "without gradient), not both")
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["pullback"] = "static" if static else "frozen" if frozen else "leaf"
    return dataclasses.field(metadata=metadata, **kwargs)


def _mark(f: dataclasses.Field) -> str:
    return f.metadata.get("pullback", "leaf")


def _dataclass_kind(cls: type) -> _Kind:
    """Fields passed to ``__init__`` are the children, except those marked static, which
    are the aux data; the constructor rebuilds it."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = tuple(f.name for f in fields if _mark(f) != "static")
    statics = tuple(f.name for f in fields if _mark(f) == "static")
    frozen = tuple(_mark(f) == "frozen" for f in fields if _mark(f) != "static")

    def flatten(obj: Any) -> tuple[list, tuple]:
        aux = tuple(getattr(obj, n) for n in statics)
        try:
            hash(aux)
        except TypeError:
            raise TypeError(f"{cls.__qualname__}: a field marked static must hold a hashable "
                            f"value (static fields are part of compile-cache keys), got "
                            f"{dict(zip(statics, aux, strict=True))!r}") from None
        return [getattr(obj, n) for n in names], aux

    def unflatten(aux: tuple, children: tuple) -> Any:
        return cls(**dict(zip(names, children, strict=True)),
                   **dict(zip(statics, aux, strict=True)))

    def show(aux: tuple, children: list[str]) -> str:
        return _show_fields(cls, names + statics)(aux, [*children, *map(repr, aux)])

    return _Kind(cls, flatten, unflatten, show, frozen if any(frozen) else ())


def frozen_leaves(tree: Any) -> list[bool]:
    """Per leaf of ``tree``, whether it is frozen (see ``field``)."""
    return list(tree_structure(tree).frozen())


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def _classify(cls: type) -> _Kind | None:
    """The kind of a class not seen before (None: its instances are leaves)."""
    kind = None
    if _is_namedtuple(cls):
        kind = _namedtuple_kind(cls)
    elif dataclasses.is_dataclass(cls):
        kind = _dataclass_kind(cls)
    _KINDS[cls] = kind
    return kind


def register_pytree(cls: type, flatten: Flatten, unflatten: Unflatten) -> None:
    """Make instances of exactly ``cls`` (not its subclasses) containers rather than leaves.

    ``flatten(obj) -> (children, aux_data)`` and ``unflatten(aux_data, children) -> obj``.
    ``aux_data`` is the static part of the node: it must be hashable because it is part
    of compile-cache keys.  Registering a dataclass or NamedTuple overrides the default.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree expects a class, got {cls!r}")
    if cls in _BUILTIN or cls in _REGISTERED:
        raise ValueError(f"{cls.__qualname__} is already registered as a pytree node")

    def checked_flatten(obj: Any) -> tuple[Iterable[Any], Hashable]:
        children, aux = flatten(obj)
        try:
            hash(aux)
        except TypeError:
            raise TypeError(
                f"the flatten function registered for {cls.__qualname__} returned "
                f"unhashable aux_data {aux!r}; aux_data is part of cache keys"
            ) from None
        return children, aux

    def show(aux: Hashable, children: list[str]) -> str:
        return f"{cls.__qualname__}[{aux!r}]({', '.join(children)})"

    _REGISTERED.add(cls)
    _KINDS[cls] = _Kind(cls, checked_flatten, unflatten, show)


# --- flattening ---------------------------------------------------------------------

_UNSEEN = object()


def _kind_of(tree: Any, is_leaf: IsLeaf) -> _Kind | None:
    """The container kind of ``tree``, or None when it is a leaf."""
    if is_leaf is not None and is_leaf(tree):
        return None
    kind = _KINDS.get(type(tree), _UNSEEN)
    return _classify(type(tree)) if kind is _UNSEEN else kind


def _flatten(kind: _Kind, tree: Any, leaves: list, is_leaf: IsLeaf) -> TreeDef:
    """Flatten a container; the common case of an already-seen class is looked up inline."""
    start = len(leaves)
    children, aux = kind.flatten(tree)
    subtrees = []
    for child in children:
        child_kind = _KINDS.get(type(child), _UNSEEN) if is_leaf is None else _UNSEEN
        if child_kind is _UNSEEN:
            child_kind = _kind_of(child, is_leaf)
        if child_kind is None:
            leaves.append(child)
            subtrees.append(_LEAF)
        else:
            subtrees.append(_flatten(child_kind, child, leaves, is_leaf))
    return TreeDef(kind, aux, tuple(subtrees), len(leaves) - start)


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, TreeDef]:
    """The leaves of ``tree`` in order, and its structure.

    ``is_leaf(subtree)`` returning True stops the descent there (the subtree is a leaf).
    """
    kind = _kind_of(tree, is_leaf)
    if kind is None:
        return [tree], _LEAF
    leaves: list = []
    return leaves, _flatten(kind, tree, leaves, is_leaf)


def tree_unflatten(treedef: TreeDef, leaves: Iterable[Any]) -> Any:
    """The inverse of ``tree_flatten``."""
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list:
    """The leaves of ``tree`` in order (``tree_flatten``'s first half)."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> TreeDef:
    """The structure of ``tree`` without its leaves (``tree_flatten``'s second half): two
    trees with equal structures differ only in their leaves."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """Apply ``f`` leafwise across trees of one structure: ``f(leaf, *rest_leaves)``."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    columns = [leaves]
    for i, other in enumerate(rest, 1):
        other_leaves, other_def = tree_flatten(other, is_leaf)
        if other_def != treedef:
            raise ValueError(
                f"tree_map: tree {i} has structure {other_def!r} "
                f"but tree 0 has structure {treedef!r}"
            )
        columns.append(other_leaves)
    return treedef.unflatten(map(f, *columns))
