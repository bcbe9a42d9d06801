"""pb.train.batches: every example once per epoch, the order a key fixes, drop_last, and a
compiled step fed from it."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb


def epoch(n: int, batch_size: int, **options) -> list[tuple[np.ndarray, np.ndarray]]:
    x = np.arange(n)
    y = np.stack([x * 2.0, -x], axis=1)
    return list(pb.train.batches((x, y), batch_size, **options))


@pytest.mark.parametrize("n, batch_size", [(10, 3), (12, 4), (2, 5)])
def test_each_example_once_per_epoch(n, batch_size):
    key = pb.random.key(3)
    got = epoch(n, batch_size, key=key)
    sizes = [len(x) for x, _ in got]
    assert sizes == [batch_size] * (n // batch_size) + ([n % batch_size] if n % batch_size
                                                         else [])
    order = np.concatenate([x for x, _ in got])
    np.testing.assert_array_equal(order, pb.random.permutation(key, n))
    np.testing.assert_array_equal(np.sort(order), np.arange(n))
    for x, y in got:  # rows of x and y stay together
        np.testing.assert_array_equal(y, np.stack([x * 2.0, -x], axis=1))


def test_the_key_fixes_the_order():
    first = np.concatenate([x for x, _ in epoch(50, 8, key=pb.random.key(1))])
    again = np.concatenate([x for x, _ in epoch(50, 8, key=pb.random.key(1))])
    other = np.concatenate([x for x, _ in epoch(50, 8, key=pb.random.key(2))])
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert not np.array_equal(first, np.arange(50))


def test_drop_last_and_no_shuffle():
    got = epoch(10, 3, key=pb.random.key(0), drop_last=True)
    assert [len(x) for x, _ in got] == [3, 3, 3]
    assert len(np.unique(np.concatenate([x for x, _ in got]))) == 9
    ordered = epoch(10, 4, shuffle=False)
    assert [x.tolist() for x, _ in ordered] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert epoch(2, 3, shuffle=False, drop_last=True) == []


def test_batches_keep_the_datas_structure():
    x = np.arange(6.0).reshape(3, 2)
    assert [b.tolist() for b in pb.train.batches(x, 2, shuffle=False)] == [
        [[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0]]]
    (batch,) = pb.train.batches({"x": x, "n": np.arange(3)}, 3, shuffle=False)
    assert list(batch) == ["x", "n"]
    np.testing.assert_array_equal(batch["n"], np.arange(3))


@pytest.mark.parametrize("call, message", [
    (lambda: pb.train.batches(np.ones(3), 2), "shuffle=True needs key="),
    (lambda: pb.train.batches((np.ones(3), np.ones(4)), 2, shuffle=False),
     r"same first axis.*\(3,\), \(4,\)"),
    (lambda: pb.train.batches(np.ones(3), 0, shuffle=False), "positive int, got 0"),
    (lambda: pb.train.batches((), 1, shuffle=False), "no arrays"),
])
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        next(iter(call()))


def test_a_compiled_step_consumes_batches():
    """Linear least squares by minibatch SGD: the pb.jit step agrees with the eager one."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    y = x @ np.array([1.0, -2.0, 0.5])

    def step(w, xb, yb):
        loss, grad = pb.value_and_grad(lambda w: np.mean((xb @ w - yb) ** 2))(w)
        return w - 0.1 * grad, loss

    compiled = pb.jit(step)
    w_eager = w_jit = np.zeros(3)
    for xb, yb in pb.train.batches((x, y), 8, key=pb.random.key(0), drop_last=True):
        w_jit, loss_jit = compiled(w_jit, xb, yb)
        w_eager = w_eager - 0.1 * 2 * xb.T @ (xb @ w_eager - yb) / len(xb)
    np.testing.assert_allclose(w_jit, w_eager, rtol=1e-12)
    assert loss_jit < np.mean(y ** 2)
