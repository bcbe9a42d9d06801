"""pb.random: key-based random numbers that are the same eager and compiled, look random,
differentiate by reparameterisation; and np.random / Python's random refused in compiled
code, never frozen into a constant."""

import math
import random as pyrandom

import numpy as np
import pytest

import pullback as pb

pr = pb.random
N = 100_000
BACKENDS = ["interp", "c"]


def _ks(sample: np.ndarray, cdf) -> float:
    """Kolmogorov-Smirnov distance between ``sample`` and a continuous ``cdf``."""
    x = np.sort(sample)
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


#: KS distance exceeded with probability about 1e-6 for a sample of N from the cdf.
KS_LIMIT = 2.7 / math.sqrt(N)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


# -- eager: keys ----------------------------------------------------------------------


def test_key_is_a_0d_int64_array():
    k = pr.key(42)
    assert isinstance(k, np.ndarray) and k.shape == () and k.dtype == np.int64
    assert pr.key(np.int32(42)) == k
    for bad in (1.5, np.zeros(2, np.int64), True):
        with pytest.raises(TypeError, match="integer"):
            pr.key(bad)
    with pytest.raises(TypeError, match="0-d int64"):
        pr.bits(np.int32(1), 3)


def test_same_key_same_numbers_other_key_other_numbers():
    a, b = pr.key(1), pr.key(2)
    assert np.array_equal(pr.normal(a, 50), pr.normal(pr.key(1), 50))
    assert not np.any(pr.bits(a, 50) == pr.bits(b, 50))


def test_split_and_fold_in_give_distinct_keys_unlike_the_parents_bits():
    k = pr.key(0)
    children = pr.split(k, 1000)
    assert children.shape == (1000,) and children.dtype == np.int64
    assert len(set(children.tolist())) == 1000
    assert not set(children.tolist()) & set(pr.bits(k, 1000).tolist())
    folded = [int(pr.fold_in(k, d)) for d in range(1000)]
    assert len(set(folded)) == 1000
    first, second = pr.split(k)
    assert first.shape == () and np.array_equal(pr.split(k)[1], second)


def test_streams_of_related_keys_are_uncorrelated():
    k = pr.key(0)
    streams = [pr.uniform(s, N) for s in (k, pr.key(1), *pr.split(k, 3), pr.fold_in(k, 1))]
    r = np.corrcoef(streams)
    off = r[~np.eye(len(streams), dtype=bool)]
    assert np.max(np.abs(off)) < 5 / math.sqrt(N)
    # consecutive draws of one stream too
    u = streams[0]
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 5 / math.sqrt(N)


# -- eager: distributions ---------------------------------------------------------------


def test_uniform_statistics():
    u = pr.uniform(pr.key(3), N)
    assert u.dtype == np.float64 and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 0.002
    assert _ks(u, lambda x: x) < KS_LIMIT
    # the 53 bits used: values are multiples of 2**-53, not of a coarser step
    assert np.all(u * 2.0**53 == np.floor(u * 2.0**53))
    assert np.any((u * 2.0**52) % 1 != 0)


def test_uniform_bounds_and_float32():
    v = pr.uniform(pr.key(4), (300, 3), minval=-2.0, maxval=5.0)
    assert v.shape == (300, 3) and v.min() >= -2 and v.max() < 5
    f = pr.uniform(pr.key(4), N, dtype=np.float32)
    assert f.dtype == np.float32 and f.min() >= 0 and f.max() < 1
    assert _ks(f.astype(np.float64), lambda x: x) < KS_LIMIT
    with pytest.raises(ValueError, match="float32 or float64"):
        pr.uniform(pr.key(4), 3, dtype=np.int64)


def test_unit_floats_stay_inside_the_interval_at_the_extreme_bits():
    from pullback.random import _unit

    raw = np.array([0, -1, np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    for dt in (np.float64, np.float32):
        u = _unit(raw, np.dtype(dt))
        assert u[0] == 0 and np.all(u < 1) and u[1] == np.nextafter(dt(1), dt(0))


def test_normal_statistics():
    z = pr.normal(pr.key(5), N)
    assert z.dtype == np.float64 and np.all(np.isfinite(z))
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    assert _ks(z, _normal_cdf) < KS_LIMIT
    assert np.max(np.abs(z)) < 8.6
    z32 = pr.normal(pr.key(5), (10, 10), dtype=np.float32)
    assert z32.dtype == np.float32 and z32.shape == (10, 10)


def test_randint_statistics_and_errors():
    r = pr.randint(pr.key(6), N, -3, 7)
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 6
    counts = np.bincount(r + 3, minlength=10)
    chi2 = np.sum((counts - N / 10) ** 2 / (N / 10))
    assert chi2 < 40  # 9 degrees of freedom: P(chi2 > 40) < 1e-5
    per_column = pr.randint(pr.key(6), (1000, 2), np.array([0, 10]), np.array([2, 20]))
    assert set(per_column[:, 0].tolist()) == {0, 1}
    assert per_column[:, 1].min() >= 10 and per_column[:, 1].max() < 20
    assert pr.randint(pr.key(6), 3, 0, 5, dtype=np.int32).dtype == np.int32
    with pytest.raises(ValueError, match="greater than minval"):
        pr.randint(pr.key(6), 3, 5, 5)


def test_bernoulli_permutation_choice():
    b = pr.bernoulli(pr.key(7), 0.3, N)
    assert b.dtype == bool and abs(b.mean() - 0.3) < 5 * math.sqrt(0.21 / N)
    assert pr.bernoulli(pr.key(7), np.array([0.0, 1.0])).tolist() == [False, True]
    perm = pr.permutation(pr.key(7), 50)
    assert sorted(perm.tolist()) == list(range(50)) and perm.tolist() != list(range(50))
    rows = np.arange(12.0).reshape(6, 2)
    assert sorted(pr.permutation(pr.key(7), rows).tolist()) == rows.tolist()
    picks = pr.choice(pr.key(7), 4, N, p=[0.1, 0.2, 0.3, 0.4])
    assert np.allclose(np.bincount(picks) / N, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    drawn = pr.choice(pr.key(7), np.arange(10) * 2, (2, 3), replace=False)
    assert drawn.shape == (2, 3) and len(set(drawn.ravel().tolist())) == 6
    with pytest.raises(ValueError, match="sum to 1"):
        pr.choice(pr.key(7), 3, p=[0.5, 0.6, 0.1])
    with pytest.raises(ValueError, match="larger sample"):
        pr.choice(pr.key(7), 3, 4, replace=False)


def test_choice_without_replacement_by_weight_is_successive_sampling():
    p = np.array([0.1, 0.0, 0.4, 0.3, 0.2])
    seen = np.zeros(5)
    for k in pr.split(pr.key(8), 20_000):
        seen[pr.choice(k, 5, 2, replace=False, p=p)] += 1
    # P(i among two draws without replacement) = p_i + sum_j p_j p_i / (1 - p_j)
    expected = [p[i] + sum(p[j] * p[i] / (1 - p[j]) for j in range(5) if j != i)
                for i in range(5)]
    assert seen[1] == 0
    assert np.allclose(seen / 20_000, expected, atol=0.015)
    with pytest.raises(ValueError, match="non-zero"):
        pr.choice(pr.key(8), 5, 5, replace=False, p=p)


# -- compiled: the same numbers -----------------------------------------------------------


def _draws(key, x, lo, hi):
    key, sub = pr.split(key)
    k2 = pr.fold_in(sub, 3)
    return (key, pr.bits(sub, 4), x + pr.uniform(sub, (3,), minval=lo, maxval=hi),
            pr.uniform(k2, 5, dtype=np.float32), pr.normal(sub, (2, 3)),
            pr.randint(k2, 6, lo, hi), pr.bernoulli(sub, 0.4, 5), pr.permutation(k2, 7),
            pr.permutation(sub, x), pr.choice(k2, 5, 3, replace=False),
            pr.choice(sub, x, 4, p=np.array([0.5, 0.25, 0.25])), pr.bernoulli(k2, x / 4.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_draws_equal_eager_draws(backend):
    f = pb.jit(_draws, backend=backend)
    x = np.array([1.0, 2.0, 3.0])
    for seed, lo, hi in ((0, np.int64(-2), np.int64(9)), (1, np.int64(0), np.int64(1))):
        got, want = f(pr.key(seed), x, lo, hi), _draws(pr.key(seed), x, lo, hi)
        for g, w in zip(got, want, strict=True):
            assert type(g) is type(w) and g.dtype == w.dtype
            # bits, uniforms and all that derives from them: bit for bit; normals go
            # through log and cos, which the C library may round differently from NumPy
            if g is got[4]:
                np.testing.assert_array_max_ulp(g, w, maxulp=4)
            else:
                np.testing.assert_array_equal(g, w)
    assert not np.array_equal(f(pr.key(0), x, lo, hi)[4], f(pr.key(1), x, lo, hi)[4])
    with pytest.raises(ValueError, match="greater than minval"):
        f(pr.key(0), x, np.int64(2), np.int64(2))  # a run-time check in compiled code


def _walk(key, n):
    """A random walk whose key is split in a loop of run-time length."""
    total = 0.0
    i = 0
    while i < n:
        key, sub = pr.split(key)
        total = total + pr.normal(sub)
        i += 1
    return total, key


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_split_in_a_run_time_loop(backend):
    f = pb.jit(_walk, backend=backend)
    for n in (0, 1, 17):
        got, want = f(pr.key(9), np.int64(n)), _walk(pr.key(9), np.int64(n))
        assert got[1] == want[1]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    assert f(pr.key(9), np.int64(17))[0] != f(pr.key(10), np.int64(17))[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_key_made_inside_compiled_code(backend):
    def f(x, seed):
        return x + pr.normal(pr.fold_in(pr.key(7), seed), 3)

    jf = pb.jit(f, backend=backend)
    x = np.zeros(3)
    for seed in (np.int64(0), np.int64(1)):
        np.testing.assert_array_max_ulp(jf(x, seed), f(x, seed), maxulp=4)


# -- derivatives: samples reparameterised ---------------------------------------------------


def _elbo(mu, log_sigma, key):
    z = mu + np.exp(log_sigma) * pr.normal(key, (64,))
    u = pr.uniform(pr.fold_in(key, 1), 64, minval=mu, maxval=mu + 2.0)
    return np.mean(np.sin(z) * z) + np.mean(u ** 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_through_samples_matches_central_differences(backend):
    key = pr.key(12)
    g = pb.jit(pb.grad(_elbo, argnums=(0, 1)), backend=backend)(0.3, -0.2, key)
    h = 1e-6
    fd = ((_elbo(0.3 + h, -0.2, key) - _elbo(0.3 - h, -0.2, key)) / (2 * h),
          (_elbo(0.3, -0.2 + h, key) - _elbo(0.3, -0.2 - h, key)) / (2 * h))
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    assert abs(g[1]) > 0.01


def test_forward_mode_through_samples():
    key = pr.key(13)
    d = pb.jacfwd(_elbo)(0.3, -0.2, key)
    assert d == pytest.approx(pb.grad(_elbo)(0.3, -0.2, key), rel=1e-12)


# -- np.random and Python's random: refused, never frozen ---------------------------------

_CAPTURED = np.random.default_rng(0)


def _module_function(x):
    return x + np.random.normal(size=3)


def _captured_generator(x):
    return x + _CAPTURED.normal(size=3)


def _passed_generator(x, rng):
    return x + rng.standard_normal(3)


def _new_generator(x):
    return x + np.random.default_rng(1).random(3)


def _seeded(x):
    np.random.seed(0)  # refused: the caller's global state stays as it was
    return x + np.random.rand(3)


def _run_time_argument(x):
    return np.random.normal(x)


def _python_random(x):
    return x + pyrandom.gauss(0.0, 1.0)


def _random_state(x):
    return x * np.random.RandomState(0).uniform(size=3)


@pytest.mark.parametrize("fn", [_module_function, _captured_generator, _new_generator,
                                _seeded, _run_time_argument, _python_random, _random_state])
@pytest.mark.parametrize("transform", [pb.jit, pb.grad])
def test_hidden_state_random_is_refused(fn, transform):
    f = transform(lambda x: np.sum(fn(x)) if transform is pb.grad else fn(x))
    state = np.random.get_state()[1].copy()
    with pytest.raises(pb.UnsupportedError, match="hidden state") as info:
        f(np.zeros(3))
    assert "pb.random" in info.value.hint and info.value.loc is not None
    assert np.array_equal(np.random.get_state()[1], state)


def test_generator_passed_as_argument_is_refused_at_its_call():
    state = _CAPTURED.bit_generator.state
    with pytest.raises(pb.UnsupportedError, match="Generator.standard_normal") as info:
        pb.jit(_passed_generator)(np.zeros(3), _CAPTURED)
    assert info.value.loc.line == _passed_generator.__code__.co_firstlineno + 1
    assert _CAPTURED.bit_generator.state == state  # nothing was drawn


def test_random_outside_compiled_code_is_untouched():
    rng = np.random.default_rng(3)
    noise = rng.normal(size=3)
    f = pb.jit(lambda x, e: x + e)
    assert np.array_equal(f(np.zeros(3), noise), noise)
