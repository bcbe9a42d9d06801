"""Save and load pytrees (parameters, optimiser states) as ``.npz`` files.

The arrays go into the archive as they are (dtype, shape and every bit, NaN payloads
included); the containers go beside them as JSON: tuples, lists, dicts (str or int keys, in
insertion order), None, NamedTuples and dataclasses (named by module and qualname and
imported again on load; their ``pb.field(static=True)`` values stored as JSON), and Python
scalar leaves.  Nothing is pickled, so loading a file runs no code from it beyond importing
the classes it names (or none, with ``like=``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import secrets
import struct
from typing import Any

import numpy as np

from ..tree import tree_structure

_FORMAT = "pullback.train.save"
_VERSION = 1
_PYTHON_SCALARS = (bool, int, float, str)
_LEAF = tree_structure(0)
_ABSENT = object()
_SAME_LEAF = {"numpy_scalar": "array"}  # kinds that like= accepts for each other


# --- what each node is ----------------------------------------------------------------


def _kind(obj: Any, path: str) -> str:
    """The node kind of ``obj`` as the file records it; refuses what it cannot record."""
    cls = type(obj)
    if obj is None:
        return "none"
    if cls in (tuple, list, dict):
        return cls.__name__
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return "namedtuple"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return "dataclass"
    if cls is np.ndarray:  # a subclass (a masked array) would come back as its base
        return "array"
    if isinstance(obj, np.generic):
        return "numpy_scalar"
    if cls in _PYTHON_SCALARS:
        return "python"
    what = "leaf" if tree_structure(obj) == _LEAF else "pytree node (register_pytree)"
    raise TypeError(f"pb.train: {path} is a {cls.__module__}.{cls.__qualname__} {what}, "
                    f"which a file cannot describe; leaves must be NumPy arrays or scalars or "
                    f"Python int/float/bool/str, containers tuples, lists, dicts, None, "
                    f"NamedTuples or dataclasses")


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _init_fields(cls: type) -> dict[str, bool]:
    """A dataclass's constructor fields (what pytrees rebuild it from) -> whether static."""
    return {f.name: f.metadata.get("pullback") == "static"
            for f in dataclasses.fields(cls) if f.init}


# --- Python values in JSON (static fields, scalar leaves) ---------------------------------


def _encode(value: Any) -> Any:
    """JSON for a Python scalar or a tuple of them (floats by their bits: NaN payloads and
    the sign of zero survive); ``_ABSENT`` when ``value`` has no JSON form."""
    cls = type(value)
    if value is None or cls in (bool, int, str):
        return value
    if cls is float:
        return {"float": struct.pack("<d", value).hex()}
    if cls is tuple:
        items = [_encode(v) for v in value]
        return _ABSENT if any(i is _ABSENT for i in items) else {"tuple": items}
    if callable(value) and _resolve(name := _function_name(value)) is value:
        return {"function": name}  # an activation of a Lambda layer, np.tanh ...
    return _ABSENT


def _function_name(fn: Any) -> str:
    return f"{getattr(fn, '__module__', None)}:{getattr(fn, '__qualname__', None)}"


def _resolve(name: str) -> Any:
    """The object ``module:qualname`` names (None if there is none: a lambda, a function
    defined in another function, a module not importable)."""
    module, _, qualname = name.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        return None
    return obj


def _decode(data: Any) -> Any:
    if isinstance(data, dict):
        if "float" in data:
            return struct.unpack("<d", bytes.fromhex(data["float"]))[0]
        if "function" in data:
            fn = _resolve(data["function"])
            if fn is None:
                raise ValueError(f"pb.train.load: the file names the function "
                                 f"{data['function']}, which cannot be imported here")
            return fn
        return tuple(_decode(v) for v in data["tuple"])
    return data


# --- saving ---------------------------------------------------------------------------


def _describe(obj: Any, path: str, arrays: list[np.ndarray]) -> dict:
    """The JSON node for ``obj``; its arrays are appended to ``arrays``."""
    kind = _kind(obj, path)
    if kind == "none":
        return {"kind": kind}
    if kind in ("tuple", "list"):
        return {"kind": kind, "items": [_describe(v, f"{path}[{i}]", arrays)
                                        for i, v in enumerate(obj)]}
    if kind == "dict":
        items = []
        for key, value in obj.items():
            if type(key) not in (str, int):
                raise TypeError(f"pb.train.save: {path} has the key {key!r}; dict keys must be "
                                f"str or int")
            items.append([key, _describe(value, f"{path}[{key!r}]", arrays)])
        return {"kind": kind, "items": items}
    if kind == "namedtuple":
        return {"kind": kind, "class": _class_name(type(obj)),
                "fields": {n: _describe(getattr(obj, n), f"{path}.{n}", arrays)
                           for n in obj._fields}}
    if kind == "dataclass":
        fields, static = {}, {}
        for name, is_static in _init_fields(type(obj)).items():
            value = getattr(obj, name)
            if not is_static:
                fields[name] = _describe(value, f"{path}.{name}", arrays)
                continue
            static[name] = _encode(value)
            if static[name] is _ABSENT:
                raise TypeError(f"pb.train.save: the static field {path}.{name} holds "
                                f"{value!r}; a file stores static fields as int, float, str, "
                                f"bool, None, functions importable by name (not lambdas or "
                                f"local functions) or tuples of those")
        return {"kind": kind, "class": _class_name(type(obj)), "fields": fields,
                "static": static}
    if kind == "python":
        return {"kind": kind, "value": _encode(obj)}
    if obj.dtype.hasobject:
        raise TypeError(f"pb.train.save: {path} is an array of Python objects, which a file "
                        f"stores only by pickling")
    arrays.append(np.asarray(obj))
    return {"kind": kind, "leaf": len(arrays) - 1}


def save(path: str | os.PathLike, tree: Any) -> None:
    """Write ``tree`` to ``path`` (exactly that name) as an ``.npz`` archive.

    The file appears whole or not at all: it is written under a temporary name beside
    ``path`` and renamed over it, so an interrupted save leaves the previous file intact.
    """
    arrays: list[np.ndarray] = []
    root = _describe(tree, "tree", arrays)
    header = json.dumps({"format": _FORMAT, "version": _VERSION, "tree": root})
    path = os.fspath(path)
    temporary = f"{path}.{secrets.token_hex(6)}.tmp"
    try:
        with open(temporary, "xb") as file:
            np.savez(file, tree=np.array(header),
                     **{f"leaf{i}": a for i, a in enumerate(arrays)})
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


# --- loading --------------------------------------------------------------------------


def _import(name: str, path: str) -> type:
    module, _, qualname = name.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"pb.train.load: {path} is a {qualname} from module {module}, which "
                         f"cannot be imported ({error}); pass like= a tree of the same "
                         f"structure to rebuild it with that tree's classes") from error
    return found


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _differs(path: str, what: str) -> ValueError:
    return ValueError(f"pb.train.load: the file differs from like= at {path}: {what}")


class _Reader:
    """Rebuilds a tree from its JSON nodes and the archive's arrays, checking it against a
    template tree along the way when there is one."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays

    def build(self, node: dict, like: Any, path: str) -> Any:
        kind = node["kind"]
        if like is not _ABSENT:
            # a NumPy scalar and a 0-d array are the same leaf to compiled code (which
            # returns the former for the latter): their dtypes and shapes are compared
            ours, theirs = (_SAME_LEAF.get(k, k) for k in (kind, _kind(like, path)))
            if ours != theirs:
                raise _differs(path, f"the file has {_a(ours)}, like= {_a(theirs)}")
        return getattr(self, f"_{kind}")(node, like, path)

    def _children(self, nodes: list, likes: list | None, path: str, names: list) -> list:
        likes = likes if likes is not None else [_ABSENT] * len(nodes)
        return [self.build(n, lk, f"{path}{name}")
                for n, lk, name in zip(nodes, likes, names, strict=True)]

    def _none(self, node: dict, like: Any, path: str) -> None:
        return None

    def _sequence(self, node: dict, like: Any, path: str) -> list:
        items = node["items"]
        if like is not _ABSENT and len(like) != len(items):
            raise _differs(path, f"the file has {len(items)} items, like= {len(like)}")
        return self._children(items, None if like is _ABSENT else list(like), path,
                              [f"[{i}]" for i in range(len(items))])

    def _tuple(self, node: dict, like: Any, path: str) -> tuple:
        return tuple(self._sequence(node, like, path))

    def _list(self, node: dict, like: Any, path: str) -> list:
        return self._sequence(node, like, path)

    def _dict(self, node: dict, like: Any, path: str) -> dict:
        stored = dict(node["items"])
        if like is _ABSENT:
            keys = list(stored)
        else:
            keys = list(like)
            missing = [k for k in keys if k not in stored] + [k for k in stored if k not in like]
            if missing:
                side = "like=" if missing[0] in like else "the file"
                raise _differs(path, f"only {side} has the key {missing[0]!r}")
        likes = None if like is _ABSENT else [like[k] for k in keys]
        values = self._children([stored[k] for k in keys], likes, path,
                                [f"[{k!r}]" for k in keys])
        return dict(zip(keys, values, strict=True))

    def _class(self, node: dict, like: Any, path: str) -> type:
        if like is _ABSENT:
            return _import(node["class"], path)
        if _class_name(type(like)) != node["class"]:
            raise _differs(path, f"the file has a {node['class']}, like= a "
                                 f"{_class_name(type(like))}")
        return type(like)

    def _fields(self, node: dict, like: Any, path: str, names: list[str]) -> dict:
        fields = node["fields"]
        if list(fields) != names:
            raise ValueError(f"pb.train.load: {path} was saved with the fields {list(fields)} "
                             f"of {node['class']}, which now has {names}")
        likes = None if like is _ABSENT else [getattr(like, n) for n in names]
        values = self._children(list(fields.values()), likes, path, [f".{n}" for n in names])
        return dict(zip(names, values, strict=True))

    def _namedtuple(self, node: dict, like: Any, path: str) -> tuple:
        cls = self._class(node, like, path)
        return cls(**self._fields(node, like, path, list(cls._fields)))

    def _dataclass(self, node: dict, like: Any, path: str) -> Any:
        cls = self._class(node, like, path)
        marks = _init_fields(cls)
        static = {name: _decode(value) for name, value in node["static"].items()}
        if sorted(static) != sorted(n for n, s in marks.items() if s):
            raise ValueError(f"pb.train.load: {path} was saved with the static fields "
                             f"{sorted(static)} of {node['class']}, which now has "
                             f"{sorted(n for n, s in marks.items() if s)}")
        for name, value in static.items():  # compared by their encodings: bit for bit
            if like is not _ABSENT and _encode(getattr(like, name)) != node["static"][name]:
                raise _differs(f"{path}.{name}", f"the file has the static value {value!r}, "
                                                 f"like= {getattr(like, name)!r}")
        children = self._fields(node, like, path, [n for n, s in marks.items() if not s])
        return cls(**children, **static)

    def _python(self, node: dict, like: Any, path: str) -> Any:
        value = _decode(node["value"])
        if like is not _ABSENT and type(like) is not type(value):
            raise _differs(path, f"the file has a Python {type(value).__name__}, like= a "
                                 f"{type(like).__name__}")
        return value

    def _leaf(self, node: dict, like: Any, path: str) -> np.ndarray:
        array = self.arrays[f"leaf{node['leaf']}"]
        if like is not _ABSENT and (like.dtype, like.shape) != (array.dtype, array.shape):
            raise _differs(path, f"the file has a {array.dtype} array of shape {array.shape}, "
                                 f"like= a {like.dtype} array of shape {like.shape}")
        return array

    def _array(self, node: dict, like: Any, path: str) -> np.ndarray:
        return self._leaf(node, like, path)

    def _numpy_scalar(self, node: dict, like: Any, path: str) -> np.generic:
        return self._leaf(node, like, path)[()]


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Read a tree that ``save`` wrote.

    With ``like=`` a tree of the expected structure (say a freshly initialised model), the
    file must match it — the same containers, classes, dict keys, static values, leaf kinds,
    dtypes and shapes — or a ValueError names the first place where they differ; the
    result is then built with ``like``'s classes, so no class is imported.
    """
    with np.load(os.fspath(path), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    return _Reader(arrays).build(_header(arrays, os.fspath(path)),
                                 _ABSENT if like is None else like, "tree")


def _header(arrays: dict[str, np.ndarray], path: str) -> dict:
    """The JSON description of the tree (taken out of ``arrays``), once it is known to be
    one that this version of ``save`` wrote."""
    text = arrays.pop("tree", None)
    try:
        header = json.loads(str(text[()])) if text is not None and text.dtype.kind == "U" \
            else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise ValueError(f"pb.train.load: {path} was not written by pb.train.save")
    if header.get("version") != _VERSION:
        raise ValueError(f"pb.train.load: {path} has format version {header.get('version')}; "
                         f"this pullback reads version {_VERSION}")
    return header["tree"]
