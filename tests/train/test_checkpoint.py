"""pb.train.save / load: exact round-trips of model and optimiser pytrees, the checks of
``like=``, what a file cannot hold, and atomic writes."""

from __future__ import annotations

import dataclasses
import os
import struct
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import pullback as pb
from pullback.train import checkpoint


@dataclasses.dataclass
class Dense:
    weight: np.ndarray
    bias: np.ndarray | None
    scale: np.ndarray = pb.field(frozen=True, default=None)
    features: tuple = pb.field(static=True, default=(2, 3))
    name: str = pb.field(static=True, default="dense")
    eps: float = pb.field(static=True, default=1e-5)


@dataclasses.dataclass
class Stack:
    layers: list
    activation: Any = pb.field(static=True, default=None)


class AdamState(NamedTuple):
    count: np.ndarray
    mu: Any
    nu: Any


class Opaque:
    """A container registered with pb.register_pytree, which a file cannot describe."""

    def __init__(self, x: Any):
        self.x = x


pb.register_pytree(Opaque, lambda o: ((o.x,), None), lambda _, ch: Opaque(*ch))

NAN_PAYLOAD32 = np.array([0x7FC0_1234, 0xFFA0_0001], np.uint32).view(np.float32)
NAN_PAYLOAD64 = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_DEAD_BEEF))[0]


def model() -> Stack:
    first = Dense(np.arange(6, dtype=np.float32).reshape(2, 3), np.full(3, -0.0, np.float32),
                  scale=np.float32(2.5))
    second = Dense(NAN_PAYLOAD32.reshape(2, 1), None, scale=np.array(1.0),
                   features=(2, (1, True)), name="out", eps=-0.0)
    return Stack([first, second])


def state(params: Any) -> AdamState:
    zeros = pb.tree_map(np.zeros_like, params)
    return AdamState(np.int32(7), zeros, pb.tree_map(lambda z: z + 1, zeros))


def checkpoint_tree() -> dict:
    params = model()
    return {"step": 12, "params": params, "opt": state(params),
            3: [None, 0.1, NAN_PAYLOAD64, True, "ok", np.array(5, np.int64),
                np.arange(4, dtype=np.int16), np.array([1.5], dtype=">f4"), np.uint8(3)],
            "epoch_losses": (np.float64(0.25), np.empty((0, 2), np.float64))}


def assert_identical(got: Any, want: Any, path: str = "tree") -> None:
    """Same classes, dict orders, dtypes, shapes and bits, all the way down."""
    assert type(got) is type(want), path
    if isinstance(want, (np.ndarray, np.generic)):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), path
        assert got.tobytes() == want.tobytes(), path
    elif isinstance(want, dict):
        assert list(got) == list(want), path
        for k in want:
            assert_identical(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_identical(g, w, f"{path}[{i}]")
    elif dataclasses.is_dataclass(want):
        for f in dataclasses.fields(want):
            assert_identical(getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}")
    elif isinstance(want, float):
        assert struct.pack("<d", got) == struct.pack("<d", want), path
    else:
        assert got == want, path


def test_round_trip_is_exact(tmp_path):
    tree = checkpoint_tree()
    path = tmp_path / "ckpt.npz"
    pb.train.save(path, tree)
    loaded = pb.train.load(path)
    assert_identical(loaded, tree)
    # the static values and frozen marks are those of the original's structure
    assert pb.tree_structure(loaded) == pb.tree_structure(tree)
    assert pb.tree_structure(loaded).frozen() == pb.tree_structure(tree).frozen()
    assert_identical(pb.train.load(str(path), like=tree), tree)
    # a 0-d array matches a NumPy scalar of its dtype (compiled code returns those)
    scalars = _replace(tree, _set_layer("scale", np.array(0.0, np.float32)))
    scalars[3][5] = np.int64(0)
    assert_identical(pb.train.load(path, like=scalars), tree)
    assert os.listdir(tmp_path) == ["ckpt.npz"]


def test_dict_keys_keep_insertion_order_and_types(tmp_path):
    tree = {"b": 1, 2: np.ones(1), "a": {10: None, 1: [np.zeros(2)]}}
    pb.train.save(tmp_path / "d.npz", tree)
    loaded = pb.train.load(tmp_path / "d.npz")
    assert_identical(loaded, tree)
    assert list(loaded["a"]) == [10, 1]


def test_like_rebuilds_with_the_templates_classes(tmp_path):
    @dataclasses.dataclass
    class Local:  # not importable by qualname: only like= can rebuild it
        w: np.ndarray
        k: int = pb.field(static=True, default=1)

    tree = Local(np.arange(3.0), 4)
    pb.train.save(tmp_path / "l.npz", tree)
    with pytest.raises(ValueError, match=r"Local.*cannot be imported.*like="):
        pb.train.load(tmp_path / "l.npz")
    loaded = pb.train.load(tmp_path / "l.npz", like=Local(np.zeros(3), 4))
    assert_identical(loaded, tree)


def _replace(tree: dict, change: Callable[[dict], None]) -> dict:
    """A copy of ``tree`` with ``change`` applied to it (containers copied, leaves shared)."""
    copy = pb.tree_map(lambda leaf: leaf, tree)
    change(copy)
    return copy


def _set_layer(field: str, value: Any) -> Callable[[dict], None]:
    def change(tree: dict) -> None:
        layers = tree["params"].layers
        layers[0] = dataclasses.replace(layers[0], **{field: value})
    return change


MISMATCHES = [
    (_set_layer("features", (2, 4)), r"tree\['params'\]\.layers\[0\]\.features.*\(2, 3\).*"
                                     r"\(2, 4\)"),
    (_set_layer("weight", np.zeros((3, 2), np.float32)), r"layers\[0\]\.weight.*shape \(2, 3\)"
                                                         r".*shape \(3, 2\)"),
    (_set_layer("weight", np.zeros((2, 3), np.float64)), r"layers\[0\]\.weight.*float32.*"
                                                         r"float64"),
    (_set_layer("bias", None), r"layers\[0\]\.bias: the file has an array, like= a none"),
    (_set_layer("scale", np.array([2.5], np.float32)), r"layers\[0\]\.scale: the file has a "
                                                       r"float32 array of shape \(\), like= a "
                                                       r"float32 array of shape \(1,\)"),
    (lambda t: t.pop("step"), r"at tree: only the file has the key 'step'"),
    (lambda t: t.update(extra=np.ones(1)), r"at tree: only like= has the key 'extra'"),
    (lambda t: t[3].append(None), r"tree\[3\]: the file has 9 items, like= 10"),
    (lambda t: t.update(step=12.0), r"tree\['step'\]: the file has a Python int, like= a "
                                    r"float"),
    (lambda t: t.update(opt=tuple(t["opt"])), r"tree\['opt'\]: the file has a namedtuple, "
                                              r"like= a tuple"),
    (lambda t: t.update(params=Stack(t["params"].layers[:1] + [
        AdamState(None, None, None)])), r"layers\[1\]: the file has a dataclass, like= a "
                                        r"namedtuple"),
]


@pytest.mark.parametrize("change, message", MISMATCHES)
def test_like_names_the_first_difference(tmp_path, change, message):
    tree = checkpoint_tree()
    pb.train.save(tmp_path / "c.npz", tree)
    with pytest.raises(ValueError, match=message):
        pb.train.load(tmp_path / "c.npz", like=_replace(tree, change))


def test_like_checks_the_class(tmp_path):
    @dataclasses.dataclass
    class Dense:  # same fields, another class
        weight: np.ndarray
        bias: np.ndarray | None

    pb.train.save(tmp_path / "d.npz", Dense(np.ones(2), None))
    with pytest.raises(ValueError, match=r"at tree: the file has a .*<locals>.Dense, like= a "
                                         r"tests.train.test_checkpoint:Dense"):
        pb.train.load(tmp_path / "d.npz", like=globals()["Dense"](np.ones(2), None))


REFUSED = [
    (Stack([model().layers[0]], activation=lambda v: v),
     r"static field tree.activation holds <function .*<lambda>"),
    (Stack([dataclasses.replace(model().layers[0], features=(np.int64(2), 3))]),
     r"static field tree.layers\[0\].features"),
    ({"w": [np.ones(1), Opaque(np.ones(1))]}, r"tree\['w'\]\[1\] is a .*Opaque pytree node "
                                             r"\(register_pytree\)"),
    ((np.ones(1), {1, 2}), r"tree\[1\] is a builtins.set leaf"),
    ([np.ma.masked_array([1.0, 2.0], [True, False])], r"tree\[0\] is a "
                                                      r"numpy.ma.MaskedArray leaf"),
    ({(1, 2): np.ones(1)}, r"tree has the key \(1, 2\); dict keys must be str or int"),
    ([np.array([None, 1])], r"tree\[0\] is an array of Python objects"),
]


@pytest.mark.parametrize("tree, message", REFUSED)
def test_save_refuses_what_a_file_cannot_describe(tmp_path, tree, message):
    path = tmp_path / "r.npz"
    pb.train.save(path, {"before": np.ones(2)})
    with pytest.raises(TypeError, match=message):
        pb.train.save(path, tree)
    assert_identical(pb.train.load(path), {"before": np.ones(2)})  # left as it was
    assert os.listdir(tmp_path) == ["r.npz"]


def test_an_interrupted_save_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "a.npz"
    pb.train.save(path, [np.arange(3)])

    def crash(file: Any, **arrays: Any) -> None:
        file.write(b"PK half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        pb.train.save(path, [np.arange(4)])
    monkeypatch.undo()
    assert_identical(pb.train.load(path), [np.arange(3)])
    assert os.listdir(tmp_path) == ["a.npz"]
    pb.train.save(path, [np.arange(4)])  # and a complete save replaces it
    assert_identical(pb.train.load(path), [np.arange(4)])


@pytest.mark.parametrize("arrays", [{"x": np.ones(2)}, {"tree": np.ones(2)},
                                    {"tree": np.array("{")}, {"tree": np.array("[1]")},
                                    {"tree": np.array('{"format": "other"}')}])
def test_load_refuses_other_archives(tmp_path, arrays):
    np.savez(tmp_path / "other.npz", **arrays)
    with pytest.raises(ValueError, match="other.npz was not written by pb.train.save"):
        pb.train.load(tmp_path / "other.npz")


def test_load_refuses_other_versions(tmp_path):
    np.savez(tmp_path / "v.npz", tree=np.array('{"format": "pullback.train.save", '
                                               '"version": 2, "tree": {"kind": "none"}}'))
    with pytest.raises(ValueError, match="has format version 2; this pullback reads version 1"):
        pb.train.load(tmp_path / "v.npz")


def test_like_compares_static_values_bit_for_bit(tmp_path):
    pb.train.save(tmp_path / "s.npz", Stack([], activation=None))
    with pytest.raises(ValueError, match=r"tree.activation: the file has the static value None"
                                         r", like= <ufunc 'tanh'>"):
        pb.train.load(tmp_path / "s.npz", like=Stack([], activation=np.tanh))
    pb.train.save(tmp_path / "z.npz", dataclasses.replace(model().layers[0], eps=0.0))
    with pytest.raises(ValueError, match=r"eps: the file has the static value 0.0, like= -0.0"):
        pb.train.load(tmp_path / "z.npz", like=dataclasses.replace(model().layers[0], eps=-0.0))


@pytest.mark.parametrize("fields, message", [
    ({"weight": np.ndarray, "bias": Any, "gain": Any, "features": pb.field(static=True),
      "name": pb.field(static=True), "eps": pb.field(static=True)},
     r"tree\[0\] was saved with the fields \['weight', 'bias', 'scale'\] of "
     r"tests.train.test_checkpoint:Dense, which now has \['weight', 'bias', 'gain'\]"),
    ({"weight": np.ndarray, "bias": Any, "scale": Any, "features": Any, "name": Any,
      "eps": Any},  # the static fields are now leaves
     r"tree\[0\] was saved with the static fields \['eps', 'features', 'name'\] of "
     r"tests.train.test_checkpoint:Dense, which now has \[\]"),
])
def test_load_notices_a_changed_class(tmp_path, monkeypatch, fields, message):
    pb.train.save(tmp_path / "m.npz", [model().layers[0]])
    changed = dataclasses.make_dataclass("Dense", [
        (name, Any, spec) if isinstance(spec, dataclasses.Field) else (name, spec)
        for name, spec in fields.items()])
    changed.__qualname__ = "Dense"
    monkeypatch.setattr(sys.modules[__name__], "Dense", changed)
    with pytest.raises(ValueError, match=message):
        pb.train.load(tmp_path / "m.npz")


def test_static_functions_round_trip_by_name(tmp_path):
    """Activations in static fields (np.tanh, pb.nn.relu, Lambda layers of a Sequential)
    are stored by their importable names and come back as the same objects."""
    net = pb.nn.Sequential((pb.nn.Linear.init(pb.random.key(0), 3, 4), pb.nn.Lambda(pb.nn.relu),
                            pb.nn.Lambda(np.tanh)))
    tree = {"net": net, "stack": Stack([model().layers[0]], activation=np.tanh)}
    pb.train.save(tmp_path / "f.npz", tree)
    back = pb.train.load(tmp_path / "f.npz")
    assert back["net"].layers[1].fn is pb.nn.relu and back["net"].layers[2].fn is np.tanh
    assert back["stack"].activation is np.tanh
    x = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    np.testing.assert_array_equal(back["net"](x), net(x))
