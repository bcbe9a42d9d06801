"""Globals and closure cells are read when the compiled function is called, as Python
reads them (issue 19 item 2): arrays and floats among them are run-time values, anything
else a compile-time value the specialisation is checked against on every call."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb

BACKENDS = ["interp", "c"]

WEIGHTS = np.array([1.0, 2.0, 3.0])
SCALE = 2.0
POWER = 2
TABLE = np.array([0, 2, 1])


class Config:
    def __init__(self):
        self.w = np.array([1.0, -1.0])
        self.layers = {"b": np.array([0.5, 0.5])}


CONFIG = Config()


def weighted(x):
    return np.sum(WEIGHTS * x) * SCALE


def powered(x):
    return x ** POWER


def shaped(x):
    return x[: int(TABLE[1])] * len(range(int(TABLE[1])))


def scaled_in_place(x):
    WEIGHTS[0] = x
    return WEIGHTS * 1.0


@pytest.fixture(autouse=True)
def _restore():
    global WEIGHTS, SCALE, POWER, TABLE, CONFIG
    saved = (WEIGHTS.copy(), SCALE, POWER, TABLE.copy())
    CONFIG = Config()
    yield
    WEIGHTS, SCALE, POWER, TABLE = saved


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_array_written_in_place_is_seen(backend):
    f, x = pb.jit(weighted, backend=backend), np.ones(3)
    assert f(x) == weighted(x) == 12.0
    WEIGHTS[:] = 5.0
    for _ in range(2):  # the first call sets the fast entry up, the second takes it
        assert f(x) == weighted(x) == 30.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_rebinding_globals_is_seen_without_compiling_again_for_the_same_shape(backend):
    global WEIGHTS, SCALE
    f, x = pb.jit(weighted, backend=backend), np.ones(3)
    f(x)
    f(x)
    WEIGHTS = np.array([7.0, 7.0, 7.0])
    SCALE = 3.0
    assert f(x) == weighted(x) == 63.0
    assert f(x) == 63.0
    assert len(f._spec.cache) == 1 and len(next(iter(f._spec.cache.values()))) == 1
    WEIGHTS = np.ones(4)  # another shape: staged again
    assert f(np.ones(4)) == weighted(np.ones(4)) == 12.0
    SCALE = 1  # an int now: Python's int arithmetic, staged again
    assert f(np.ones(4)) == weighted(np.ones(4)) == 4.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rebound_compile_time_global_stages_again(backend):
    global POWER
    f, x = pb.jit(powered, backend=backend), np.array([2.0, 3.0])
    np.testing.assert_array_equal(f(x), [4.0, 9.0])
    f(x)
    POWER = 3
    np.testing.assert_array_equal(f(x), [8.0, 27.0])
    np.testing.assert_array_equal(f(x), powered(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_needed_at_compile_time_is_checked_by_content(backend):
    f, x = pb.jit(shaped, backend=backend), np.arange(4.0)
    np.testing.assert_array_equal(f(x), shaped(x))
    TABLE[1] = 3
    np.testing.assert_array_equal(f(x), shaped(x))
    assert f(x).shape == (3,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_function_writes_to_a_global_array(backend):
    f = pb.jit(scaled_in_place, backend=backend)
    np.testing.assert_array_equal(f(9.0), [9.0, 2.0, 3.0])
    assert WEIGHTS[0] == 9.0
    WEIGHTS[1] = -1.0
    np.testing.assert_array_equal(f(4.0), [4.0, -1.0, 3.0])


def make_model(w, b):
    def model(x):
        return np.tanh(x @ w + b)
    return model


@pytest.mark.parametrize("backend", BACKENDS)
def test_closures_over_different_arrays_share_code_and_each_reads_its_own(backend):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3))
    models = [make_model(rng.normal(size=(3, 4)), rng.normal(size=4)) for _ in range(3)]
    jitted = [pb.jit(m, backend=backend) for m in models]
    for _ in range(2):
        for m, j in zip(models, jitted, strict=True):
            np.testing.assert_allclose(j(x), m(x), rtol=1e-12)
    assert jitted[0]._spec is jitted[2]._spec  # one computation, one specialisation
    assert len(next(iter(jitted[0]._spec.cache.values()))) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_built_in_a_loop_over_batches_sees_each_batch(backend):
    rng = np.random.default_rng(1)
    w = rng.normal(size=3)

    def loss_of(batch):
        return lambda w: np.sum((batch @ w) ** 2)

    for _ in range(3):
        batch = rng.normal(size=(5, 3))
        g = pb.jit(pb.grad(loss_of(batch)), backend=backend)(w)
        np.testing.assert_allclose(g, 2 * batch.T @ (batch @ w), rtol=1e-12)
        np.testing.assert_allclose(pb.grad(loss_of(batch))(w), g, rtol=1e-12)


def count_down(x, n):
    if n <= 0:
        return x
    return count_down(x + np.sum(WEIGHTS), n - 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_recursive_function_reads_a_global_array(backend):
    f = pb.jit(count_down, backend=backend)
    n = np.int64(4)
    assert f(0.0, n) == count_down(0.0, n) == 24.0
    WEIGHTS[:] = 1.0
    assert f(0.0, n) == count_down(0.0, n) == 12.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_array_also_passed_as_an_argument_is_one_array(backend):
    def bump(a):
        a[0] += 10.0
        return WEIGHTS.sum()

    f = pb.jit(bump, backend=backend)
    assert f(WEIGHTS) == 16.0 and WEIGHTS[0] == 11.0
    assert f(WEIGHTS) == 26.0 and WEIGHTS[0] == 21.0
    other = np.zeros(3)  # another array: the global is not written
    assert f(other) == 26.0 and other[0] == 10.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_through_a_global_array(backend):
    f = pb.jit(pb.grad(weighted), backend=backend)
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(f(x), WEIGHTS * SCALE)
    WEIGHTS[:] = [3.0, 0.0, -2.0]
    np.testing.assert_allclose(f(x), WEIGHTS * SCALE)
    np.testing.assert_allclose(pb.grad(weighted)(x), WEIGHTS * SCALE)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jitted_helper_reading_a_global_called_from_staged_code(backend):
    helper = pb.jit(weighted, backend=backend)

    def outer(x):
        return helper(x) + helper(2 * x)

    f = pb.jit(outer, backend=backend)
    x = np.ones(3)
    assert f(x) == outer(x)
    WEIGHTS[:] = -1.0
    assert f(x) == outer(x) == -18.0


def test_a_deleted_global_raises_what_python_raises():
    global SCALE
    f, x = pb.jit(weighted), np.ones(3)
    f(x)
    del SCALE  # (the fixture puts it back)
    with pytest.raises(NameError, match="SCALE"):
        f(x)


def test_a_returned_global_array_is_the_global_itself():
    def give(x):
        return WEIGHTS, x * 2

    w, _ = pb.jit(give)(np.ones(2))
    assert w is WEIGHTS


def configured(x):
    return x * CONFIG.w + CONFIG.layers["b"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_held_by_a_global_object_are_read_when_called(backend):
    f, x = pb.jit(configured, backend=backend), np.ones(2)
    np.testing.assert_array_equal(f(x), configured(x))
    CONFIG.w[:] = 3.0  # in place
    np.testing.assert_array_equal(f(x), [3.5, 3.5])
    CONFIG.layers["b"] = np.zeros(2)  # rebound attribute / item
    CONFIG.w = np.array([2.0, 4.0])
    np.testing.assert_array_equal(f(x), configured(x))
    np.testing.assert_array_equal(f(x), [2.0, 4.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_array_under_two_names_then_two_arrays(backend):
    global ALIAS
    ALIAS = WEIGHTS

    def two_names(x):
        WEIGHTS[0] = x
        return np.sum(ALIAS)

    f = pb.jit(two_names, backend=backend)
    for _ in range(2):
        assert f(10.0) == 15.0
    ALIAS = np.zeros(3)  # now another array: the write to WEIGHTS does not reach it
    assert f(20.0) == two_names(20.0) == 0.0
    assert WEIGHTS[0] == 20.0


class Layer:
    def __init__(self, n):
        self.w = np.arange(n, dtype=float)

    def apply(self, x):
        return np.tanh(x * self.w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jitted_bound_method_reads_its_objects_arrays_when_called(backend):
    layer, x = Layer(3), np.ones(3)
    f = pb.jit(layer.apply, backend=backend)
    np.testing.assert_array_equal(f(x), layer.apply(x))
    layer.w[:] = -1.0
    np.testing.assert_array_equal(f(x), layer.apply(x))
    layer.w = np.full(3, 0.5)
    np.testing.assert_array_equal(f(x), layer.apply(x))
    other = Layer(3)  # another object: its own arrays
    np.testing.assert_array_equal(pb.jit(other.apply, backend=backend)(x), other.apply(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_a_jitted_function_reading_a_global(backend):
    g, x = pb.grad(pb.jit(weighted, backend=backend)), np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(g(x), WEIGHTS * SCALE)
    WEIGHTS[:] = [1.0, -4.0, 0.25]
    np.testing.assert_allclose(g(x), WEIGHTS * SCALE)
