"""Integer and boolean programs: bit logic, modular arithmetic, Python and NumPy division
semantics, counting, selection, sorting and integer loops with data-dependent trip counts."""

from __future__ import annotations

import numpy as np

from programs.registry import program


@program(lambda rng: (rng.integers(-1000, 1000, 8), rng.integers(-1000, 1000, 8)),
         lambda rng: (rng.integers(0, 1024, (2, 3), dtype=np.int32),
                      rng.integers(-5, 5, (2, 3), dtype=np.int32)))
def bit_tricks(a, b):
    """Mixed bit identities, the lowest set bit and a popcount over ten bit planes."""
    mixed = (a & b) | (a ^ ~b)
    identity = np.bitwise_xor(a, b) == np.bitwise_or(a, b) - np.bitwise_and(a, b)
    popcount = np.zeros_like(a)
    for k in range(10):
        popcount += (np.abs(a) & 2**k) != 0
    return mixed, identity, a & -a, popcount


@program(lambda rng: (rng.integers(0, 10**6, 5), np.int64(rng.integers(0, 100)), 1_000_003),
         lambda rng: (rng.integers(0, 997, 4, dtype=np.int32), np.int32(45), 997),
         lambda rng: (np.arange(4), np.int64(0), 7))
def modular_power(base, exponent, modulus):
    """base**exponent mod modulus by square-and-multiply; the loop runs log2(exponent) times."""
    result = np.ones_like(base)
    b = base % modulus
    e = exponent
    while e > 0:
        if e % 2 == 1:
            result = result * b % modulus
        b = b * b % modulus
        e //= 2
    return result


@program(lambda rng: (rng.integers(-20, 20, 6), rng.choice([-7, -3, -2, 2, 3, 5], 6)),
         lambda rng: (rng.integers(-50, 50, (2, 3), dtype=np.int32),
                      rng.choice([-4, 3, 9], (2, 3)).astype(np.int32)))
def division_semantics(a, b):
    """Floor division and remainders follow the divisor's sign; fmod follows the dividend's."""
    quotient, remainder = np.divmod(a, b)
    return {
        "floordiv": a // b,
        "mod": a % b,
        "fmod": np.fmod(a, b),
        "divmod_agrees": np.all((quotient == a // b) & (remainder == a % b)),
        "reconstructed": quotient * b + remainder,
        "negated_mod": -a % 3,
        "true_div": a / b,
    }


@program(lambda rng: (17, -5),
         lambda rng: (np.int64(rng.integers(-100, 100)), np.int64(-7)),
         lambda rng: (np.int32(-23), np.int32(4)))
def scalar_division(n, d):
    """The same source on Python ints (static) and on NumPy ints (dynamic)."""
    return n // d, n % d, divmod(-n, d), -(n // d), pow(n, 3), abs(-n) % abs(d)


@program(lambda rng: (rng.uniform(-20, 20, 9),),
         lambda rng: (rng.uniform(-10, 10, (2, 4)).astype(np.float32),))
def wrap_angles(theta):
    """Float floor division and modulo (Python semantics) against fmod (C semantics)."""
    turns = (theta + np.pi) // (2 * np.pi)
    wrapped = (theta + np.pi) % (2 * np.pi) - np.pi
    return turns, wrapped, np.fmod(theta, 2 * np.pi), np.remainder(theta, -1.5)


@program(lambda rng: (rng.standard_normal((5, 4)), -0.5, 0.5),
         lambda rng: (rng.standard_normal(20, dtype=np.float32), -1.0, 2.0))
def count_in_band(x, lo, hi):
    assert lo < hi, "empty band"
    inside = (x > lo) & (x < hi)
    return (np.count_nonzero(inside), (x >= hi).sum(), np.mean(x <= lo),
            np.sum(inside, axis=0), lo < x.mean() < hi)


@program(lambda rng: (rng.random((3, 4)) < 0.5, rng.random((3, 4)) < 0.3),
         lambda rng: (rng.random(7) < 0.8, rng.random(7) < 0.8))
def boolean_logic(p, q):
    majority = (p.astype(np.int64) + q + np.logical_xor(p, q)) >= 2
    return {
        "and": np.logical_and(p, q) == (p & q),
        "or": np.logical_or(p, q),
        "xor": p ^ q,
        "not": np.logical_not(p) == ~p,
        "implies": ~p | q,
        "majority": majority,
        "any_last": np.any(p, axis=-1),
        "all": bool(np.all(p | ~p)) and not np.all(p & ~p),
        "bool_add": p + q,
        "bool_sum": p.sum() + q.sum(),
    }


@program(lambda rng: (rng.standard_normal((4, 5)),),
         lambda rng: (rng.integers(-3, 3, (3, 6), dtype=np.int32),),
         lambda rng: (rng.integers(0, 2, (2, 2)).astype(bool),))
def argmax_argmin(x):
    """Flat and per-axis argmax/argmin; ties (in the int inputs) go to the first index."""
    return x.argmax(), np.argmin(x, axis=0), np.argmax(x, axis=1), np.argmin(x[::-1], axis=-1)


@program(lambda rng: (rng.integers(1, 50, 8, dtype=np.int32), rng.integers(-50, 50, 8)),
         lambda rng: (rng.integers(1, 50, (2, 2)), rng.integers(-5, 5, (2, 2))))
def integer_select(x, y):
    """where, clip, sign and abs on ints, with int32/int64 promotion."""
    step = np.where(x % 2 == 0, x // 2, 3 * x + 1)
    larger = np.where(x > y, x, y)
    return step, larger, np.clip(y, -3, 3), np.sign(y) * np.abs(y) == y, np.maximum(x, 7)


@program(lambda rng: (rng.permutation(12) - 6, np.array([-3, 0, 2, 5])),
         lambda rng: (rng.standard_normal(9), np.linspace(-1, 1, 5)),
         lambda rng: (rng.standard_normal(6, dtype=np.float32), np.array([0.0])))
def rank_and_bin(x, edges):
    """Ranks by a double argsort, and bins by searchsorted on both sides."""
    ranks = np.argsort(np.argsort(x))
    ordered = np.sort(x)
    return (ranks, ordered, np.searchsorted(edges, x, side="right"),
            np.searchsorted(edges, x), ordered.searchsorted(edges[0]))


@program(lambda rng: (np.int64(rng.integers(2, 100)),),
         lambda rng: (np.int64(27),),
         lambda rng: (np.int32(1),))
def collatz_steps(n):
    """Steps of the 3n+1 map down to 1, and the peak reached on the way."""
    steps = 0
    peak = n
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        peak = max(peak, n)
        steps += 1
    return steps, peak


@program(lambda rng: (rng.integers(-500, 500, 7), rng.integers(-500, 500, 7)),
         lambda rng: (np.array([12, 0, 35, 17], dtype=np.int32),
                      np.array([18, 9, 0, 5], dtype=np.int32)))
def vectorised_gcd(a, b):
    """Euclid on whole arrays: lanes that have finished keep their value."""
    a, b = np.abs(a), np.abs(b)
    while np.any(b != 0):
        nonzero = b != 0
        a, b = np.where(nonzero, b, a), np.where(nonzero, a % np.where(nonzero, b, 1), 0)
    return a


@program(lambda rng: (np.int64(rng.integers(2, 200)),),
         lambda rng: (np.int64(91),),
         lambda rng: (np.int32(97),),
         lambda rng: (np.int64(1),))
def is_prime(n):
    """Trial division with early returns from inside a data-dependent while loop."""
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


@program(lambda rng: (50,),
         lambda rng: (2,))
def sieve_of_eratosthenes(n):
    """Static bounds, dynamic test: strike multiples of each prime with a strided slice."""
    is_p = np.ones(n, dtype=bool)
    is_p[:2] = False
    for i in range(2, n):
        if i * i >= n:
            break
        if is_p[i]:
            is_p[i * i:: i] = False
    return is_p, np.count_nonzero(is_p)


@program(lambda rng: (rng.integers(0, 5, 30), 5),
         lambda rng: (rng.integers(0, 3, (4, 3), dtype=np.int32), 3))
def label_histogram(labels, k):
    """Counts by x[i] += 1 in a loop, checked against a vectorised count."""
    counts = np.zeros(k, dtype=np.int64)
    for v in labels.ravel():
        counts[v] += 1
    direct = np.array([np.sum(labels == c) for c in range(k)])
    return counts, np.all(counts == direct)


@program(lambda rng: (rng.standard_normal(40), -2.0, 0.5, 8),
         lambda rng: (rng.uniform(0, 1, 25).astype(np.float32), 0.0, 0.25, 4))
def binned_histogram(x, lo, width, nbins):
    """Bin by floor division, clamping outliers into the end bins."""
    counts = np.zeros(nbins, dtype=np.int64)
    for v in x:
        idx = np.clip((v - lo) // width, 0, nbins - 1).astype(np.int64)
        counts[idx] += 1
    return counts, np.cumsum(counts)


@program(lambda rng: (rng.integers(-10**6, 10**6, 6),),
         lambda rng: (np.array([0, 9, 10, 12345], dtype=np.int32),))
def digit_sums(x):
    """Decimal digit sums and digit counts of |x|, looping until every lane is exhausted."""
    n = np.abs(x)
    total = np.zeros_like(n)
    ndigits = np.zeros_like(n)
    while np.any(n > 0):
        total += n % 10
        ndigits += n > 0
        n //= 10
    return total, ndigits


@program(lambda rng: (rng.integers(-100, 100, 5, dtype=np.int32),
                      rng.integers(-100, 100, 5)),
         lambda rng: (np.array([3, -7], dtype=np.int32), np.array([2, 2])))
def integer_dtype_rules(a, b):
    """Which dtype each mixed int32/int64/Python-int/bool expression lands in."""
    return {
        "weak_int": a + 1,
        "mixed": a + b,
        "same": a * np.int32(3),
        "true_div": a / np.int32(4),
        "square": a**2,
        "neg_floordiv": -a // 4,
        "bool_plus_int": (a > 0) + (b > 0).astype(np.int32),
        "cumsum_bool": np.cumsum(a > b),
        "diff": np.diff(b),
        "abs_sign": np.abs(a) * np.sign(a) - a,
    }


@program(lambda rng: (rng.standard_normal(5) * 2, rng.standard_normal(4), False),
         lambda rng: (np.array([0.2, 0.5]), np.array([-2.0, 3.0]), True),
         lambda rng: (np.array([0.3, 0.1]), np.array([0.5, 0.9], dtype=np.float32), True))
def boolean_scalars(x, y, strict):
    """and/or/not on NumPy bools from data mixed with a static Python bool."""
    big = x.max() > 1.0
    small = y.min() < -1.0
    if (big and not small) or (strict and big):
        label = 1
    elif small or not strict:
        label = 2
    else:
        label = 3
    return label, big or small, not (big and small)


@program(lambda rng: (rng.random(25) < 0.6,),
         lambda rng: (np.array([True, True, False, True, True, True, False]),))
def longest_true_run(p):
    best = cur = 0
    for v in p:
        cur = cur + 1 if v else 0
        best = max(best, cur)
    starts = np.count_nonzero(np.diff(p.astype(np.int64)) == 1) + p[0]
    return best, starts


@program(lambda rng: (np.arange(16),),
         lambda rng: (rng.integers(0, 5000, 6, dtype=np.int32),))
def gray_code(x):
    """Gray code n ^ (n >> 1) with // 2 as the shift, inverted by a prefix-xor loop."""
    gray = x ^ (x // 2)
    back = gray.copy()
    shift = gray // 2
    while np.any(shift > 0):
        back ^= shift
        shift //= 2
    return gray, back, np.all(back == x)


@program(lambda rng: (np.arange(1, 31),),
         lambda rng: (rng.integers(-40, 40, (3, 3), dtype=np.int32),))
def fizzbuzz_classes(x):
    labels = np.where(x % 15 == 0, 3, np.where(x % 5 == 0, 2, np.where(x % 3 == 0, 1, 0)))
    return labels, [(labels == k).sum() for k in range(4)]


def _adjacency(rng, n, dtype):
    a = np.triu(rng.random((n, n)) < 0.4, 1)
    return (a | a.T).astype(dtype)


@program(lambda rng: (_adjacency(rng, 6, np.int64),),
         lambda rng: (_adjacency(rng, 4, np.int32),))
def graph_walk_counts(adj):
    """Walk counts from integer matrix powers, triangles and reachability."""
    n = adj.shape[0]
    walks3 = np.linalg.matrix_power(adj, 3)
    reach = np.linalg.matrix_power(adj + np.identity(n, dtype=adj.dtype), n - 1) > 0
    return walks3, np.trace(walks3) // 6, reach, reach.all(axis=1)
