"""What a compiled call does to the caller's arrays, as plain Python does it (issue 19
items 4, 7, 8): views come back as views of the caller's array, mutations made before a
fault stay made, and arguments that overlap in memory see each other's writes."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb

BACKENDS = ["interp", "c"]


def overwrite_then_view(x):
    x[0] = 100.0
    return x[::2]


VIEWS = {
    "slice": lambda x: x[1:],
    "reshape": lambda x: x.reshape(2, 3),
    "transpose of 1-d": lambda x: x.T,
    "transpose of a reshape": lambda x: x.reshape(2, 3).T,
    "the argument": lambda x: x,
    "a row of np.reshape": lambda x: np.reshape(x, (3, 2))[1],
    "a view after a write": overwrite_then_view,
    "a view in a tuple": lambda x: (x[:2], x.sum()),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", VIEWS)
def test_a_view_of_an_argument_is_a_view_of_the_callers_array(name, backend):
    f = VIEWS[name]
    mine, theirs = np.arange(6.0), np.arange(6.0)
    got, want = pb.jit(f, backend=backend)(mine), f(theirs)
    got_leaves, want_leaves = pb.tree_leaves(got), pb.tree_leaves(want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_array_equal(g, w)
        assert isinstance(g, np.ndarray) == isinstance(w, np.ndarray)
        if isinstance(w, np.ndarray):
            assert np.shares_memory(g, mine) == np.shares_memory(w, theirs)
    np.testing.assert_array_equal(mine, theirs)
    first = got_leaves[0]
    first[...] = -1.0  # writing through the view reaches the caller's array
    want_leaves[0][...] = -1.0
    np.testing.assert_array_equal(mine, theirs)


def write_then_fault(x, i):
    x[0] = 5.0
    x[1] += 1.0
    return x[i]


def fill_until_fault(x, n):
    for k in range(n):
        x[k] = k * 2.0
    return x


def bump_then_check(counts, d):
    counts[0] += 1
    assert d > 0, "d must be positive"
    return counts // d


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program, args", [
    (write_then_fault, lambda: (np.zeros(3), 7)),
    (write_then_fault, lambda: (np.zeros(3), np.int64(-9))),
    (fill_until_fault, lambda: (np.zeros(4), np.int64(6))),
    (bump_then_check, lambda: (np.array([1, 2]), np.int64(0))),
])
def test_mutations_made_before_a_fault_stay_made(program, args, backend):
    mine, theirs = args(), args()
    with pytest.raises(Exception) as plain:
        program(*theirs)
    with pytest.raises(type(plain.value)):
        pb.jit(program, backend=backend)(*mine)
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(m, t)


def shift_right(a, b):
    for i in range(a.shape[0]):
        a[i] = b[i] + 1.0
    return a


def scale_into(out, x):
    out[:] = x * 2.0
    return out.sum() + x.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program, views", [
    (shift_right, lambda base: (base[1:], base[:-1])),
    (shift_right, lambda base: (base[:-1], base[1:])),
    (scale_into, lambda base: (base[:3], base[2:5])),
    (scale_into, lambda base: (base[::2], base[1::2])),  # interleaved: no shared element
])
def test_overlapping_arguments_see_each_others_writes(program, views, backend):
    mine, theirs = np.arange(6.0) ** 2, np.arange(6.0) ** 2
    got, want = pb.jit(program, backend=backend)(*views(mine)), program(*views(theirs))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mine, theirs)
