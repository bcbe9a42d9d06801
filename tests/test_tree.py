import collections
import copy
import dataclasses
import operator
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pullback as pb
from pullback.tree import (
    register_pytree,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)


class Point(NamedTuple):
    x: object
    y: object


Pair = collections.namedtuple("Pair", "first second")


@dataclasses.dataclass
class Layer:
    w: object
    b: object = None


@dataclasses.dataclass(frozen=True)
class Model:
    layers: object
    meta: object


@dataclasses.dataclass
class Derived:
    """Fields with init=False are recomputed by the constructor, not stored as children."""

    a: object
    total: int = dataclasses.field(init=False)

    def __post_init__(self):
        self.total = len(tree_leaves(self.a))


class Box:
    """A registered container with static aux data."""

    def __init__(self, tag, items):
        self.tag = tag
        self.items = items

    def __eq__(self, other):
        return type(other) is Box and self.tag == other.tag and self.items == other.items


register_pytree(Box, lambda b: (b.items, b.tag), lambda tag, items: Box(tag, list(items)))


class Opaque:
    pass


class TupleSub(tuple):
    pass


def same(a, b, leaf_eq=operator.is_):
    """Structural equality that also checks container classes and dict key order.

    Leaves are compared by identity by default: flatten/unflatten never copy them.
    """

    def rec(a, b):
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            return list(a) == list(b) and all(rec(a[k], b[k]) for k in a)
        if type(a) in (list, tuple) or isinstance(a, (Point, Pair)):
            return len(a) == len(b) and all(map(rec, a, b))
        if dataclasses.is_dataclass(type(a)):
            fields = dataclasses.fields(a)
            return all(rec(getattr(a, f.name), getattr(b, f.name)) for f in fields)
        if isinstance(a, Box):
            return a.tag == b.tag and rec(a.items, b.items)
        return leaf_eq(a, b)

    return rec(a, b)


ARR = np.arange(3.0)
SCALAR = np.float32(2)
OPAQUE = Opaque()

# (tree, its leaves in flattening order)
CASES = [
    (1, [1]),
    (ARR, [ARR]),
    ("text", ["text"]),
    (None, []),
    ((), []),
    ([], []),
    ({}, []),
    ((1,), [1]),
    ([1, [2, (3,)]], [1, 2, 3]),
    ({"b": 1, "a": 2}, [2, 1]),
    ({"a": None, "b": [None, 1]}, [1]),
    ([(), [], {}, None, ((),)], []),
    ({1: "x", "a": "y"}, ["x", "y"]),
    ({2: "x", 1: "y"}, ["y", "x"]),
    (Point(1, {"k": [2, None]}), [1, 2]),
    (Pair(ARR, SCALAR), [ARR, SCALAR]),
    (Layer(ARR), [ARR]),
    (Model([Layer(1, 2), Layer(3)], Point({"z": 4, "a": 5}, None)), [1, 2, 3, 5, 4]),
    (Derived([1, (2, 3)]), [1, 2, 3]),
    (Box("t", [1, {"a": 2}]), [1, 2]),
    ([Box("t", []), Box("u", [None])], []),
    (collections.OrderedDict(a=1), [collections.OrderedDict(a=1)]),
    ({1, 2}, [{1, 2}]),
    (TupleSub((1, 2)), [TupleSub((1, 2))]),
    (OPAQUE, [OPAQUE]),
    (Layer, [Layer]),
]


@pytest.mark.parametrize("tree,expected", CASES,
                         ids=[f"{k}-{type(c[0]).__name__}" for k, c in enumerate(CASES)])
def test_round_trip(tree, expected):
    leaves, treedef = tree_flatten(tree)
    assert len(leaves) == len(expected) == treedef.num_leaves
    assert all(a is b or a == b for a, b in zip(leaves, expected, strict=True))
    assert same(tree_unflatten(treedef, leaves), tree)
    assert same(treedef.unflatten(iter(leaves)), tree)
    assert tree_leaves(tree) == leaves
    assert tree_structure(tree) == treedef


def test_unflatten_puts_new_leaves_in_place():
    tree = {"b": [1, None], "a": (2, Point(3, 4))}
    treedef = tree_structure(tree)
    out = treedef.unflatten(["A", "B", "C", "D"])
    assert same(out, {"b": ["D", None], "a": ("A", Point("B", "C"))}, operator.eq)
    assert list(out) == ["b", "a"]


def test_unflatten_rebuilds_dataclasses_through_the_constructor():
    out = tree_structure(Derived([1, 2])).unflatten([5, 6])
    assert out == Derived([5, 6]) and out.total == 2
    frozen = tree_structure(Model(1, 2)).unflatten([3, 4])
    assert frozen == Model(3, 4)


@pytest.mark.parametrize(
    "tree,text",
    [
        ({"a": 1, "b": (2, None)}, "PyTreeDef({'a': *, 'b': (*, None)})"),
        ({"b": 1, "a": 2}, "PyTreeDef({'b': *, 'a': *})"),
        (1, "PyTreeDef(*)"),
        (None, "PyTreeDef(None)"),
        ((1,), "PyTreeDef((*,))"),
        ((), "PyTreeDef(())"),
        ([1, [], {}], "PyTreeDef([*, [], {}])"),
        (Point(1, [2]), "PyTreeDef(Point(x=*, y=[*]))"),
        (Layer(1), "PyTreeDef(Layer(w=*, b=None))"),
        (Box("t", [1]), "PyTreeDef(Box['t'](*))"),
    ],
)
def test_repr(tree, text):
    assert repr(tree_structure(tree)) == text


def test_treedef_equality_and_hash():
    a = tree_structure({"a": [1, (2, None)], "b": Point(3, 4)})
    b = tree_structure({"a": ["x", ("y", None)], "b": Point(ARR, "w")})
    assert a == b and hash(a) == hash(b)
    cache = {a: "compiled"}
    assert cache[b] == "compiled"
    assert a != "not a treedef"


@pytest.mark.parametrize(
    "left,right",
    [
        ({"a": 1}, {"b": 1}),
        ({"a": 1}, {"a": 1, "b": 2}),
        ((1, 2), [1, 2]),
        ((1, 2), Point(1, 2)),
        (Point(1, 2), Pair(1, 2)),
        (Layer(1, 2), Model(1, 2)),
        (None, 1),
        ((None,), ((),)),
        ((1, 2), (1, (2,))),
        ([1, 2], [1, 2, 3]),
        (Box("t", [1]), Box("u", [1])),
        (Box("t", [1]), [1]),
        ({1: "x", "a": "y"}, {"a": "y", 1: "x"}),  # unsortable keys: leaves line up differently
    ],
)
def test_different_structures_are_unequal(left, right):
    a, b = tree_structure(left), tree_structure(right)
    assert a != b and not a == b


def test_dicts_built_in_another_order_have_equal_structure():
    a = tree_structure({"a": 1, "b": 2})
    b = tree_structure({"b": 1, "a": 2})
    assert a == b and hash(a) == hash(b)
    assert repr(a) != repr(b)


def test_treedef_is_immutable():
    treedef = tree_structure([1, 2])
    with pytest.raises(AttributeError):
        treedef.num_leaves = 5
    with pytest.raises(AttributeError):
        treedef.extra = 1
    assert copy.copy(treedef) is treedef and copy.deepcopy(treedef) is treedef


@pytest.mark.parametrize("count", [0, 1, 3])
def test_unflatten_wrong_leaf_count(count):
    treedef = tree_structure([1, (2,)])
    with pytest.raises(ValueError, match=f"has 2 leaves but {count} were given"):
        treedef.unflatten(range(count))


def test_unflatten_leaf_and_none():
    assert tree_structure(5).unflatten(["x"]) == "x"
    assert tree_structure(None).unflatten([]) is None
    with pytest.raises(ValueError):
        tree_structure(None).unflatten([1])


def test_tree_map_single_and_multiple_trees():
    tree = {"a": [1, 2], "b": (3, None)}
    assert same(tree_map(lambda x: x * 10, tree), {"a": [10, 20], "b": (30, None)}, operator.eq)
    other = {"b": (300, None), "a": [100, 200]}
    third = {"a": [1000, 2000], "b": (3000, None)}
    out = tree_map(lambda x, y, z: x + y + z, tree, other, third)
    assert same(out, {"a": [1101, 2202], "b": (3303, None)}, operator.eq)
    assert list(out) == ["a", "b"]


def test_tree_map_arrays():
    xs = [np.ones(2, np.float32), {"k": np.arange(3)}]
    out = tree_map(lambda x, y: x + y, xs, xs)
    np.testing.assert_array_equal(out[0], np.full(2, 2, np.float32))
    np.testing.assert_array_equal(out[1]["k"], np.arange(3) * 2)


@pytest.mark.parametrize(
    "other",
    [[1, 2, 3], (1, 2), [1, (2,)], [1, None], {"a": 1, "b": 2}, 7],
)
def test_tree_map_structure_mismatch(other):
    tree = [1, 2]
    with pytest.raises(ValueError) as info:
        tree_map(lambda x, y: x, tree, other)
    message = str(info.value)
    assert repr(tree_structure(tree)) in message
    assert repr(tree_structure(other)) in message


def test_tree_map_names_the_offending_tree():
    with pytest.raises(ValueError, match="tree 2 has structure PyTreeDef\\(\\(\\*,\\)\\)"):
        tree_map(lambda *xs: 0, [1], [2], (3,))


def test_is_leaf():
    tree = [(1, 2), {"a": (3,)}, None]
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    leaves, treedef = tree_flatten(tree, is_leaf=is_tuple)
    assert leaves == [(1, 2), (3,)]
    assert repr(treedef) == "PyTreeDef([*, {'a': *}, None])"
    assert tree_leaves(tree, is_leaf=is_tuple) == leaves
    assert tree_structure(tree, is_leaf=is_tuple) == treedef
    assert treedef.unflatten(leaves) == tree
    assert tree_leaves((1, 2), is_leaf=is_tuple) == [(1, 2)]
    assert tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


def test_tree_map_is_leaf():
    tree = {"p": Point(1, 2), "q": [Point(3, 4)]}
    out = tree_map(lambda p: p.x + p.y, tree, is_leaf=lambda x: isinstance(x, Point))
    assert out == {"p": 3, "q": [7]}
    summed = tree_map(
        lambda p, s: p.x * s, tree, {"p": 10, "q": [100]}, is_leaf=lambda x: isinstance(x, Point)
    )
    assert summed == {"p": 10, "q": [300]}


def test_register_twice_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_pytree(Box, lambda b: ((), None), lambda aux, ch: None)


@pytest.mark.parametrize("cls", [tuple, list, dict, type(None)])
def test_register_builtin_raises(cls):
    with pytest.raises(ValueError, match="already registered"):
        register_pytree(cls, lambda b: ((), None), lambda aux, ch: None)


def test_register_requires_a_class():
    with pytest.raises(TypeError):
        register_pytree(Box("t", []), lambda b: ((), None), lambda aux, ch: None)


def test_registered_aux_must_be_hashable():
    class Bad:
        pass

    register_pytree(Bad, lambda b: ([], ["unhashable"]), lambda aux, ch: Bad())
    with pytest.raises(TypeError, match="unhashable aux_data"):
        tree_flatten(Bad())


def test_register_after_use_and_subclasses():
    class Late:
        def __init__(self, a, b):
            self.a, self.b = a, b

    class Sub(Late):
        pass

    late = Late(1, 2)
    assert tree_leaves(late) == [late]
    register_pytree(Late, lambda v: ((v.a, v.b), None), lambda aux, ch: Late(*ch))
    assert tree_leaves(late) == [1, 2]
    rebuilt = tree_structure(late).unflatten([3, 4])
    assert type(rebuilt) is Late and (rebuilt.a, rebuilt.b) == (3, 4)
    sub = Sub(1, 2)
    assert tree_leaves(sub) == [sub]


def test_register_overrides_dataclass():
    @dataclasses.dataclass
    class Static:
        value: object
        name: str

    assert tree_leaves(Static(1, "n")) == [1, "n"]
    register_pytree(Static, lambda s: ((s.value,), s.name), lambda name, ch: Static(ch[0], name))
    leaves, treedef = tree_flatten(Static(1, "n"))
    assert leaves == [1]
    assert treedef.unflatten([2]) == Static(2, "n")
    assert treedef != tree_structure(Static(1, "m"))


# --- property tests -----------------------------------------------------------------

LEAVES = st.one_of(
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.booleans(),
    st.builds(np.zeros, st.integers(0, 3)),
    st.just(None),
)
KEYS = st.one_of(st.text(max_size=3), st.integers(-3, 3))


def _containers(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.dictionaries(KEYS, children, max_size=4),
        st.builds(Point, children, children),
        st.builds(Pair, children, children),
        st.builds(Layer, children, children),
        st.builds(Model, children, children),
        st.builds(Box, st.sampled_from(["t", "u"]), st.lists(children, max_size=3)),
    )


TREES = st.recursive(LEAVES, _containers, max_leaves=30)


def _reference_leaves(tree):
    """An independent statement of the flattening order."""
    if tree is None:
        return []
    if type(tree) in (list, tuple) or isinstance(tree, (Point, Pair)):
        return [leaf for child in tree for leaf in _reference_leaves(child)]
    if type(tree) is dict:
        try:
            keys = sorted(tree)
        except TypeError:
            keys = list(tree)
        return [leaf for k in keys for leaf in _reference_leaves(tree[k])]
    if isinstance(tree, (Layer, Model)):
        return _reference_leaves([getattr(tree, f.name) for f in dataclasses.fields(tree)])
    if isinstance(tree, Box):
        return _reference_leaves(tree.items)
    return [tree]


@settings(max_examples=300, deadline=None)
@given(TREES)
def test_property_round_trip(tree):
    leaves, treedef = tree_flatten(tree)
    expected = _reference_leaves(tree)
    assert len(leaves) == len(expected) == treedef.num_leaves
    assert all(a is b for a, b in zip(leaves, expected, strict=True))
    assert same(treedef.unflatten(leaves), tree)


@settings(max_examples=200, deadline=None)
@given(TREES)
def test_property_structure_is_a_stable_key(tree):
    treedef = tree_structure(tree)
    twin = tree_structure(copy.deepcopy(tree))
    assert twin == treedef and hash(twin) == hash(treedef)
    numbered = treedef.unflatten(range(treedef.num_leaves))
    leaves, again = tree_flatten(numbered)
    assert leaves == list(range(treedef.num_leaves))
    assert again == treedef


@settings(max_examples=200, deadline=None)
@given(TREES)
def test_property_tree_map_identity(tree):
    assert same(tree_map(lambda x: x, tree), tree)
    assert same(tree_map(lambda x, y: x, tree, copy.deepcopy(tree)), tree)


# --- marked dataclass fields: static configuration and frozen leaves ------------------


@dataclasses.dataclass
class _Layer:
    w: np.ndarray
    table: np.ndarray = pb.field(frozen=True)
    stride: int = pb.field(static=True, default=2)
    act: object = pb.field(static=True, default=np.tanh)


def _layer(stride=2):
    return _Layer(np.arange(6.0).reshape(2, 3) / 10, np.array([0.5, -0.25, 1.0]), stride)


def test_static_fields_are_structure_and_frozen_fields_are_leaves():
    layer = _layer()
    leaves, tree = tree_flatten(layer)
    assert len(leaves) == 2 and leaves[0] is layer.w and leaves[1] is layer.table
    assert repr(tree) == "PyTreeDef(_Layer(w=*, table=*, stride=2, act=<ufunc 'tanh'>))"
    assert tree != tree_structure(_layer(stride=3))  # a different specialisation
    again = tree_unflatten(tree, leaves)
    assert again.stride == 2 and again.act is np.tanh
    assert pb.frozen_leaves(layer) == [False, True]
    assert pb.frozen_leaves({"a": layer, "b": [1.0]}) == [False, True, False]


def test_static_field_must_be_hashable_and_not_frozen():
    with pytest.raises(TypeError, match="static must hold a hashable"):
        tree_flatten(_Layer(np.ones(2), np.ones(2), act=[1]))
    with pytest.raises(ValueError, match="not both"):
        pb.field(static=True, frozen=True)


def _apply(layer, x):
    return np.sum(layer.act(x @ layer.w + layer.table) ** layer.stride)


@pytest.mark.parametrize("how", ["grad", "jit(grad)", "grad(jit)"])
def test_grad_leaves_frozen_fields_alone(how):
    x = np.linspace(-1, 1, 8).reshape(4, 2)
    f = {"grad": pb.grad(_apply), "jit(grad)": pb.jit(pb.grad(_apply)),
         "grad(jit)": pb.grad(pb.jit(_apply))}[how]
    g = f(_layer(), x)
    assert g.table is None and g.stride == 2 and g.act is np.tanh
    eps, layer = 1e-6, _layer()
    for i, j in [(0, 0), (1, 2)]:
        up, down = _layer(), _layer()
        up.w[i, j] += eps
        down.w[i, j] -= eps
        fd = (_apply(up, x) - _apply(down, x)) / (2 * eps)
        np.testing.assert_allclose(g.w[i, j], fd, rtol=1e-6)
    assert np.array_equal(layer.table, _layer().table)


def test_grad_of_only_frozen_values_is_refused():
    @dataclasses.dataclass
    class Frozen:
        t: np.ndarray = pb.field(frozen=True)

    with pytest.raises(pb.CompileError, match="frozen"):
        pb.grad(lambda m: np.sum(m.t))(Frozen(np.ones(3)))


def test_tree_functions_inside_compiled_code():
    def scaled(layer, s):
        doubled = pb.tree_map(lambda a, b: a * s + b, layer, layer)
        return doubled, pb.tree_leaves(layer)[0].sum(), pb.frozen_leaves(layer)

    out, total, frozen = pb.jit(scaled)(_layer(), 3.0)
    np.testing.assert_array_equal(out.w, _layer().w * 4)
    assert out.stride == 2 and total == pytest.approx(_layer().w.sum()) and frozen == [False, True]


_CONSTANT = {"w": np.array([1.0, 2.0])}


def test_tree_map_of_compile_time_values_stages_the_function():
    """Nothing run-time among the trees: the function (written in compiled code) is still
    staged, not called natively; so are pb.optim's helpers that map over trees."""
    from pullback.optim.base import map_updates

    def f(x):
        return pb.tree_map(lambda a: a * x, _CONSTANT), map_updates(lambda g: 2 * g, _CONSTANT)

    scaled, doubled = pb.jit(f)(np.float64(3.0))
    np.testing.assert_array_equal(scaled["w"], [3.0, 6.0])
    np.testing.assert_array_equal(doubled["w"], [2.0, 4.0])
