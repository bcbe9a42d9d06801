"""The building blocks one at a time: clipping, masked weight decay, leaves without
gradient, dtypes, ``apply_updates`` and ``chain``; each against NumPy written here."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback import optim

GRADS = {"w": np.array([[3.0, -1.0], [0.5, 2.0]]), "b": np.array([-2.0, 1.0, 0.25]),
         "s": np.array(4.0)}
PARAMS = {"w": np.array([[1.0, 2.0], [-1.0, 0.5]]), "b": np.array([0.5, -0.5, 2.0]),
          "s": np.array(-1.5)}
NORM = np.sqrt(sum(np.sum(g * g) for g in GRADS.values()))  # 6.0945...


def run(transform, updates, params, compiled):
    def apply(updates, state, params):
        return transform.update(updates, state, params)

    f = pb.jit(apply, backend="interp") if compiled else apply
    return f(updates, transform.init(params), params)[0]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_clip_by_global_norm(compiled):
    assert float(optim.global_norm(GRADS)) == pytest.approx(NORM, rel=1e-15)
    clipped = run(optim.clip_by_global_norm(2.0), GRADS, PARAMS, compiled)
    for k in GRADS:
        np.testing.assert_allclose(clipped[k], GRADS[k] * 2.0 / NORM, rtol=1e-15)
    assert float(optim.global_norm(clipped)) == pytest.approx(2.0, rel=1e-15)
    kept = run(optim.clip_by_global_norm(NORM * 1.01), GRADS, PARAMS, compiled)
    assert all(np.array_equal(kept[k], GRADS[k]) for k in GRADS)


def test_global_norm_and_clipping_skip_none_leaves():
    grads = {**GRADS, "n": None}
    assert float(optim.global_norm(grads)) == pytest.approx(NORM, rel=1e-15)
    clipped = run(optim.clip_by_global_norm(1.0), grads, {**PARAMS, "n": np.arange(2)}, False)
    assert clipped["n"] is None
    np.testing.assert_allclose(clipped["w"], GRADS["w"] / NORM, rtol=1e-15)


@pytest.mark.parametrize("mask", ["tree", "callable"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_add_decayed_weights_with_a_mask(mask, compiled):
    tree = {"w": True, "b": False, "s": True}
    which = tree if mask == "tree" else (lambda p: {k: np.ndim(v) != 1 for k, v in p.items()})
    got = run(optim.add_decayed_weights(0.3, which), GRADS, PARAMS, compiled)
    for k in GRADS:
        want = GRADS[k] + 0.3 * PARAMS[k] if tree[k] else GRADS[k]
        np.testing.assert_allclose(got[k], want, rtol=1e-15)
    unmasked = run(optim.add_decayed_weights(0.3), GRADS, PARAMS, compiled)
    np.testing.assert_allclose(unmasked["b"], GRADS["b"] + 0.3 * PARAMS["b"], rtol=1e-15)


def test_add_decayed_weights_needs_the_parameters():
    t = optim.add_decayed_weights(0.1)
    with pytest.raises(ValueError, match="needs the parameters"):
        t.update(GRADS, t.init(PARAMS))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_leaves_without_gradient_get_no_state_and_no_update(compiled):
    params = {**PARAMS, "n": np.arange(3), "flag": np.array(True), "bias": None}
    grads = {**GRADS, "n": None, "flag": None, "bias": None}
    opt = optim.adamw(0.1, weight_decay=0.1)
    state = opt.init(params)
    assert state[0].mu["n"] is None and state[0].nu["flag"] is None
    assert state[0].mu["bias"] is None and state[0].count.dtype == np.int32

    def step(params, grads, state):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), updates, state

    f = pb.jit(step, backend="interp") if compiled else step
    new, updates, state = f(params, grads, state)
    assert updates["n"] is None and updates["flag"] is None and updates["bias"] is None
    assert new["bias"] is None and new["flag"] == np.array(True)
    np.testing.assert_array_equal(new["n"], np.arange(3))
    assert int(state[0].count) == 1
    np.testing.assert_allclose(new["w"], PARAMS["w"] - 0.1 * (np.sign(GRADS["w"])
                                                              + 0.1 * PARAMS["w"]), rtol=1e-8)


def test_float32_parameters_stay_float32():
    """Scheduled rates and bias corrections are float64 scalars; they must not promote
    float32 parameters, updates or moments (NumPy 2 would, for 0-d float64 arrays)."""
    params = {k: v.astype(np.float32) for k, v in PARAMS.items()}
    grads = {k: v.astype(np.float32) for k, v in GRADS.items()}
    opt = optim.chain(optim.clip_by_global_norm(1.0),
                      optim.lamb(optim.cosine_decay(0.1, 10), weight_decay=0.1))

    def step(params, grads, state):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), updates, state

    for f in (step, pb.jit(step, backend="interp")):
        p, state = params, opt.init(params)
        for _ in range(3):
            p, updates, state = f(p, grads, state)
        assert all(leaf.dtype == np.float32 for leaf in pb.tree_leaves((p, updates)))
        assert all(leaf.dtype == np.float32 for leaf in pb.tree_leaves(state)
                   if leaf.dtype != np.int32)


def test_apply_updates_keeps_dtype_and_none():
    params = {"w": np.ones(2, np.float32), "n": np.arange(2), "none": None}
    new = optim.apply_updates(params, {"w": np.array([0.5, 1e-9]), "n": None, "none": None})
    assert new["w"].dtype == np.float32 and new["n"] is params["n"] and new["none"] is None
    np.testing.assert_array_equal(new["w"], np.array([1.5, 1.0], np.float32))


def test_chain_threads_states_in_order():
    opt = optim.chain(optim.scale(2.0), optim.trace(0.5), optim.scale_by_learning_rate(
        0.1, flip_sign=False))
    state = opt.init(PARAMS)
    assert isinstance(state, tuple) and len(state) == 3
    for k in range(1, 3):
        updates, state = opt.update(GRADS, state)
        momentum = sum(0.5**j for j in range(k))  # the trace after k equal gradients
        np.testing.assert_allclose(updates["w"], 0.1 * 2.0 * momentum * GRADS["w"], rtol=1e-15)
    np.testing.assert_allclose(state[1].trace["b"], 2.0 * 1.5 * GRADS["b"], rtol=1e-15)


def test_trust_ratio_is_one_where_a_norm_is_zero():
    params = {"w": np.zeros((2, 2)), "b": np.array([3.0, 4.0, 0.0]), "s": np.array(1.0)}
    updates = {"w": np.ones((2, 2)), "b": np.array([0.0, 0.5, 0.0]), "s": np.array(0.0)}
    got = run(optim.scale_by_trust_ratio(), updates, params, False)
    np.testing.assert_array_equal(got["w"], updates["w"])  # |p| = 0
    np.testing.assert_array_equal(got["s"], updates["s"])  # |u| = 0
    np.testing.assert_allclose(got["b"], updates["b"] * 5.0 / 0.5, rtol=1e-15)


def test_adagrad_with_zero_accumulator_and_gradient_gives_zero():
    t = optim.scale_by_rss(initial_accumulator_value=0.0, eps=0.0)
    grads = {"w": np.array([0.0, 2.0])}
    out, state = t.update(grads, t.init(grads))
    np.testing.assert_array_equal(out["w"], [0.0, 1.0])
    np.testing.assert_array_equal(state.sum_of_squares["w"], [0.0, 4.0])


def test_step_count_saturates_instead_of_wrapping():
    t = optim.scale_by_schedule(lambda count: 1.0)
    top = np.asarray(np.iinfo(np.int32).max, np.int32)
    _, state = t.update(GRADS, optim.ScaleByScheduleState(top))
    assert state.count == top and state.count.dtype == np.int32


def test_nesterov_needs_momentum():
    with pytest.raises(ValueError, match="Nesterov"):
        optim.sgd(0.1, nesterov=True)


@pytest.mark.parametrize("name", optim.__all__)
def test_every_public_name_is_documented(name):
    doc = getattr(optim, name).__doc__
    assert doc and doc.strip() and not doc.startswith(f"{name}("), name


def test_init_compiled_equals_init_eager():
    params = {"w": np.ones((2, 2), np.float32), "n": np.arange(3), "bias": None}
    opt = optim.chain(optim.adagrad(0.1), optim.rmsprop(optim.cosine_decay(0.1, 5),
                                                        centered=True, momentum=0.9))
    eager, compiled = opt.init(params), pb.jit(opt.init, backend="interp")(params)
    (want, want_tree), (got, got_tree) = pb.tree_flatten(eager), pb.tree_flatten(compiled)
    assert got_tree == want_tree and len(want) == 5  # 3 accumulators, the count, a trace
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.array_equal(g, w)
