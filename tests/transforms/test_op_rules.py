"""The derivative rules of every primitive, op by op, driven by the registry.

Each op in ``OPS`` has sample cases below (shapes and params that exercise it, inputs
away from the points where it is not differentiable) or is in ``EXCLUDED`` with the
reason; a new op with neither fails ``test_every_op_has_cases_or_a_reason``.  On each
case: jvp against central differences, vjp by the inner-product identity, and the same
two checks of the derivative functions (second order).  Piecewise-constant ops must
give exact zeros instead.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from pullback.ir.op import OPS
from pullback.ir.types import TensorType, float32, float64, int64
from pullback.transforms.jvp import jvp_func
from pullback.transforms.vjp import vjp_func

from .derivcheck import (
    Same,
    check_jvp,
    check_jvp_of_vjp,
    check_vjp,
    check_vjp_of_jvp,
    check_zero,
    float_mask,
    one_op,
    run,
)

#: Ops without cases here, and why.
EXCLUDED = {
    # Control flow: differentiated by the transforms themselves, through their blocks;
    # tested with whole programs.
    "cond": "control flow",
    "while_loop": "control flow",
    "for_loop": "control flow",
    "call": "control flow",
    # They own blocks that the transforms differentiate (or replace by the user's rules).
    "checkpoint": "owns blocks",
    "custom_jvp": "owns blocks",
    "custom_vjp": "owns blocks",
    # Effects have no results; the residual stacks of reverse mode carry their own rules,
    # tested through loops and recursion.
    "debug_print": "effect, no results",
    "check": "effect, no results",
    "stack_new": "stack op",
    "stack_push": "stack op",
    "stack_pop": "stack op",
    # No float result: comparisons give bools, the rest integers.
    "eq": "bool result",
    "ne": "bool result",
    "lt": "bool result",
    "le": "bool result",
    "gt": "bool result",
    "ge": "bool result",
    "argmax": "integer result",
    "argmin": "integer result",
    "random_bits": "integer result",
    # No operands at all: a float iota is a constant.
    "iota": "no operands",
    "empty": "no operands",
    # Integer and bool operands only.
    "and": "bool/integer only",
    "or": "bool/integer only",
    "xor": "bool/integer only",
    "not": "bool/integer only",
}


@dataclass
class Case:
    """``op(*args, **params)`` returning its results ``keep`` (default: all); the ``lits``
    positions are literals, ``Same`` operands repeat another, Python floats are weak."""

    op: str
    id: str
    args: tuple[Any, ...]
    params: dict[str, Any] = field(default_factory=dict)
    lits: tuple[int, ...] = ()
    keep: tuple[int, ...] | None = None
    zero: bool = False  # piecewise constant: every derivative is exactly zero

    def build(self):
        return one_op(OPS[self.op], self.args, self.params, self.lits, self.keep)

    def rng(self) -> np.random.Generator:
        """Directions of its own, so a case checks the same whatever else runs."""
        return np.random.default_rng(zlib.crc32(self.id.encode()))


CASES: dict[str, list[Case]] = {}


def _label(a) -> str:
    if isinstance(a, Same):
        return f"same{a.index}"
    if type(a) is float:
        return "weak"
    return "x".join(map(str, a.shape)) or "0d"


def case(op: str, *args, lits: tuple[int, ...] = (), keep: tuple[int, ...] | None = None,
         zero: bool = False, **params) -> None:
    """Add a case of ``op``, named by the op, its number and its operands' shapes."""
    cases = CASES.setdefault(op, [])
    args = tuple(a if isinstance(a, Same) or type(a) is float else np.asarray(a) for a in args)
    label = "_".join(_label(a) for a in args)
    cases.append(Case(op, f"{op}-{len(cases)}-{label}", args, params, lits, keep, zero))


# -- samples ----------------------------------------------------------------------------

_RNG = np.random.default_rng(4)


def uniform(lo: float, hi: float):
    return lambda shape: _RNG.uniform(lo, hi, shape)


def signed(lo: float, hi: float):
    """Magnitudes in [lo, hi] with random signs: away from zero."""
    return lambda shape: _RNG.uniform(lo, hi, shape) * _RNG.choice([-1.0, 1.0], shape)


def off_integers(shape):
    """At least 0.1 away from integers and halves (the jumps of floor ... round)."""
    return _RNG.integers(-3, 4, shape) + _RNG.uniform(0.1, 0.4, shape)


def halves(offset: float):
    """Multiples of 0.5 plus ``offset``: two samples with offsets 0 and 0.25 never tie."""
    return lambda shape: 0.5 * _RNG.integers(-4, 5, shape) + offset


def divisors(shape):
    """Powers of two, so that ``x / y`` of ``off_integers(x) / 2`` stays off integers."""
    return _RNG.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], shape)


def distinct(*shape):
    """Values at least 0.3 apart (no ties for sorts and extremes)."""
    n = int(np.prod(shape, dtype=np.int64))
    return ((_RNG.permutation(n) - n / 2) * 0.3 + _RNG.uniform(0, 0.1)).reshape(shape)


def normal(*shape, dtype=np.float64):
    """Standard normal samples."""
    return np.asarray(_RNG.standard_normal(shape)).astype(dtype)


def ints(values, dtype=np.int64):
    """Indices, integer keys."""
    return np.asarray(values, dtype)


# -- elementwise ------------------------------------------------------------------------

UNARY = {
    "neg": uniform(-2, 2), "abs": signed(0.5, 2), "exp": uniform(-2, 2),
    "expm1": uniform(-2, 2), "log": uniform(0.5, 3), "log1p": uniform(-0.5, 2),
    "log2": uniform(0.5, 3), "log10": uniform(0.5, 3), "sqrt": uniform(0.5, 3),
    "cbrt": signed(0.5, 2), "sin": uniform(-3, 3), "cos": uniform(-3, 3),
    "tan": uniform(-1.2, 1.2), "asin": uniform(-0.8, 0.8), "acos": uniform(-0.8, 0.8),
    "atan": uniform(-3, 3), "sinh": uniform(-2, 2), "cosh": uniform(-2, 2),
    "tanh": uniform(-2, 2), "asinh": uniform(-2, 2), "acosh": uniform(1.5, 3),
    "atanh": uniform(-0.8, 0.8), "erf": uniform(-2, 2), "erfc": uniform(-2, 2),
}
#: The ops of scipy.special's functions, whose interpreter rule is SciPy's function.
SCIPY_UNARY = {"lgamma": uniform(0.5, 3), "erfinv": uniform(-0.8, 0.8),
               "ndtri": uniform(0.1, 0.9), "i0e": signed(0.5, 2), "i1e": signed(0.5, 2)}
try:
    import scipy.special  # noqa: F401
except ImportError:
    EXCLUDED.update(dict.fromkeys([*SCIPY_UNARY, "polygamma"], "needs SciPy"))
else:
    UNARY.update(SCIPY_UNARY)
    for _order in (0.0, 1.0, 3.0):  # the order is a constant (an integer)
        for _shape in [(2, 3), ()]:
            case("polygamma", np.float64(_order), uniform(0.5, 3)(_shape), lits=(0,))
ZERO_UNARY = {"floor": off_integers, "ceil": off_integers, "round": off_integers,
              "trunc": off_integers, "sign": signed(0.5, 2), "stop_gradient": uniform(-2, 2)}
BINARY = {
    "add": (uniform(-2, 2), uniform(-2, 2)), "sub": (uniform(-2, 2), uniform(-2, 2)),
    "mul": (uniform(-2, 2), uniform(-2, 2)), "div": (uniform(-2, 2), signed(0.5, 2)),
    "pow": (uniform(0.5, 2), uniform(-2, 2)), "max": (halves(0), halves(0.25)),
    "min": (halves(0), halves(0.25)), "atan2": (signed(0.5, 2), signed(0.5, 2)),
    "mod": (lambda s: off_integers(s) / 2, divisors),
}
ZERO_BINARY = {"floordiv": (lambda s: off_integers(s) / 2, divisors)}
#: Same shapes, and a 0-d operand broadcast on either side.
BINARY_SHAPES = [((2, 3), (2, 3)), ((), (2, 3)), ((2, 3), ()), ((), ())]

for _name, _sample in [*UNARY.items(), *ZERO_UNARY.items()]:
    for _shape in [(2, 3), ()]:
        case(_name, _sample(_shape), zero=_name in ZERO_UNARY)
for _name, (_sx, _sy) in [*BINARY.items(), *ZERO_BINARY.items()]:
    for _shx, _shy in BINARY_SHAPES:
        case(_name, _sx(_shx), _sy(_shy), zero=_name in ZERO_BINARY)

case("select", normal(2, 3) > 0, normal(2, 3), normal(2, 3))
case("select", np.True_, normal(2, 3), normal(2, 3))
case("select", normal(2, 3) > 0, normal(), normal(2, 3))
case("select", normal(2, 3) > 0, normal(2, 3), normal())
case("select", np.False_, normal(), normal(2, 3))
case("convert", normal(2, 3), dtype=float64, weak=False)
case("convert", normal(), dtype=float64, weak=True)
case("convert", normal(3), dtype=float32, weak=False)
case("exp", normal(0, 3))
case("mul", normal(2, 3), np.float64(1.5), lits=(1,))
# weak (Python float) operands
case("sin", 0.7)
case("mul", normal(2, 3), 1.5)
case("add", 1.5, -0.5)
case("pow", 1.3, normal(3))
case("select", np.True_, 1.5, 2.5)
# one value used as two operands
case("mul", normal(2, 3), Same(0))
case("div", normal(2, 3), Same(0))
case("pow", uniform(0.5, 2)((2, 3)), Same(0))
case("atan2", signed(0.5, 2)((3,)), Same(0))
case("max", normal(3), Same(0))  # a tie everywhere, but max(x, x) = x is smooth
case("select", normal(2, 3) > 0, normal(2, 3), Same(1))
# float32 smoke cases (looser tolerances)
case("exp", normal(2, 3, dtype=np.float32))
case("mul", normal(2, 3, dtype=np.float32), normal(dtype=np.float32))
case("div", normal(3, dtype=np.float32), np.float32(1.5) + normal(3, dtype=np.float32) ** 2)
case("convert", normal(3, dtype=np.float32), dtype=float64, weak=False)

# -- shape ops --------------------------------------------------------------------------

case("broadcast_in_dim", normal(3), shape=(2, 3), dims=(1,))
case("broadcast_in_dim", normal(3, 1), shape=(3, 4), dims=(0, 1))
case("broadcast_in_dim", normal(), shape=(2, 2), dims=())
case("broadcast_in_dim", normal(2, 1), shape=(4, 2, 5), dims=(1, 2))
case("broadcast_in_dim", normal(1), shape=(1,), dims=(0,))
case("broadcast_in_dim", normal(0, 1), shape=(0, 3), dims=(0, 1))
case("reshape", normal(2, 3, 4), shape=(6, 4))
case("reshape", normal(), shape=(1, 1))
case("reshape", normal(0, 3), shape=(3, 0))
case("transpose", normal(2, 3, 4), perm=(2, 0, 1))
case("transpose", normal(3, 4), perm=(1, 0))
case("slice", normal(5, 6), start=(1, 0), limit=(5, 6), stride=(2, 3))
case("slice", normal(7), start=(2,), limit=(6,), stride=(1,))
case("slice", normal(4, 3), start=(1, 1), limit=(1, 3), stride=(1, 1))
case("slice", normal(7), start=(0,), limit=(7,), stride=(3,))
case("slice", normal(8, 3), start=(1, 2), limit=(6, 3), stride=(2, 5))
case("rev", normal(3, 4), dims=(0, 1))
case("rev", normal(5), dims=(0,))
case("rev", normal(3, 4), dims=())
case("concatenate", normal(2, 3), normal(2, 1), normal(2, 2), axis=1)
case("concatenate", normal(0, 3), normal(2, 3), axis=0)
case("concatenate", normal(3), axis=0)
case("concatenate", normal(2), Same(0), normal(1), axis=0)
case("pad", normal(3, 4), normal(), lo=(1, 0), hi=(2, 1), interior=(1, 0))
case("pad", normal(3, 4), normal(), lo=(-1, 2), hi=(0, -2), interior=(0, 2))
case("pad", normal(4), normal(), lo=(-2,), hi=(-1,), interior=(1,))
case("pad", normal(3), normal(), lo=(-1,), hi=(-2,), interior=(2,))  # crops into the interior
case("pad", normal(0, 2), normal(), lo=(1, 0), hi=(1, 1), interior=(0, 1))
case("pad", normal(2, 2), np.float64(0), lo=(1, 1), hi=(0, 1), interior=(0, 0), lits=(1,))

# -- reductions -------------------------------------------------------------------------


def with_zeros(x: np.ndarray, *where) -> np.ndarray:
    """``x`` with zeros at ``where`` (products must not divide by them)."""
    x = x.copy()
    for w in where:
        x[w] = 0.0
    return x


case("reduce_sum", normal(2, 3, 4), axes=(0, 2))
case("reduce_sum", normal(3, 4), axes=())
case("reduce_sum", normal(3, 4), axes=(0, 1))
case("reduce_sum", normal(), axes=())
case("reduce_sum", normal(2, 0), axes=(1,))
case("reduce_sum", normal(3, 4, dtype=np.float32), axes=(1,))
case("reduce_prod", signed(0.5, 1.5)((2, 3, 4)), axes=(1,))
case("reduce_prod", signed(0.5, 1.5)((2, 3, 4)), axes=(0, 2))
case("reduce_prod", with_zeros(normal(3, 4), (1, 2)), axes=(0, 1))
case("reduce_prod", with_zeros(normal(3, 4), (0, 1), (0, 3), (2, 0)), axes=(1,))
case("reduce_prod", normal(), axes=())
case("reduce_prod", normal(2, 0), axes=(1,))
case("reduce_prod", normal(3, 1), axes=(1,))
for _name in ("reduce_max", "reduce_min"):
    case(_name, distinct(3, 4), axes=(1,))
    case(_name, distinct(2, 3, 4), axes=(0, 2))
    case(_name, distinct(5), axes=(0,))
    case(_name, normal(), axes=())
for _reverse in (False, True):
    case("cumsum", normal(3, 4), axis=1, reverse=_reverse)
    case("cumsum", normal(2, 3, 4), axis=0, reverse=_reverse)
    case("cumprod", signed(0.5, 1.5)((3, 4)), axis=1, reverse=_reverse)
    case("cumprod", with_zeros(normal(5), 2), axis=0, reverse=_reverse)
    case("cumprod", signed(0.5, 1.5)((2, 3, 4)), axis=0, reverse=_reverse)
    case("cumprod", with_zeros(normal(2, 6), (0, 1), (0, 4), (1, 5)), axis=1, reverse=_reverse)
case("cumsum", normal(0), axis=0, reverse=False)
case("cumprod", normal(3, 1), axis=1, reverse=True)
case("cumprod", normal(3, 0), axis=1, reverse=False)

# -- sort -------------------------------------------------------------------------------

for _desc in (False, True):
    case("sort", distinct(3, 5), axis=1, num_keys=1, descending=_desc)
    case("sort", distinct(4, 3), normal(4, 3), axis=0, num_keys=1, descending=_desc)
    # integer first key with ties, broken by a float second key; a float payload
    case("sort", ints([2, 0, 1, 0, 2, 1]), distinct(6), normal(6), axis=0, num_keys=2,
         descending=_desc)
case("sort", distinct(5), ints(range(5)), axis=0, num_keys=1, descending=False)
case("sort", ints([[3, 1, 2, 0]]), normal(1, 4), axis=1, num_keys=1, descending=False)
case("sort", distinct(4), normal(4), normal(4), axis=0, num_keys=2, descending=True)
case("sort", distinct(4, 3), normal(4, 3), axis=0, num_keys=1, descending=False, keep=(1,))
case("sort", distinct(5), normal(5), Same(0), axis=0, num_keys=1, descending=False, keep=(2,))
case("sort", distinct(1, 3), axis=0, num_keys=1, descending=False)
case("sort", normal(2, 0), normal(2, 0), axis=1, num_keys=1, descending=False)

# -- indexing ---------------------------------------------------------------------------

case("dynamic_slice", normal(5, 6), np.int64(1), np.int64(2), sizes=(3, 2))
case("dynamic_slice", normal(5, 6), np.int32(4), np.int32(-1), sizes=(3, 4))  # clamped
case("dynamic_slice", normal(4), np.int64(1), sizes=(0,))
case("dynamic_update_slice", normal(5, 6), normal(2, 3), np.int64(1), np.int64(2))
case("dynamic_update_slice", normal(5, 6), normal(3, 3), np.int64(5), np.int64(-2))
case("dynamic_update_slice", normal(4), normal(4), np.int64(0))
case("dynamic_update_slice", normal(3, 4), normal(3, 0), np.int32(1), np.int32(7))
case("gather", normal(4, 3), ints([[0, 3], [3, 1]]), axis=0)
case("gather", normal(3, 5), ints([4, 0, 4, 2, 1], np.int32), axis=1)
case("gather", normal(4), np.int64(2), axis=0)
case("gather", normal(2, 3, 4), ints([3, 0]), axis=2)
case("gather", normal(4, 3), ints([1, 1, 2]), axis=0, lits=(1,))
case("gather", normal(4, 3), ints([], np.int64), axis=0)
case("scatter", normal(5, 3), ints([4, 0, 2]), normal(3, 3), axis=0)
case("scatter", normal(5, 3), ints([1, 3, 1]), normal(3, 3), axis=0)  # last write wins
case("scatter", normal(3, 5), ints([[0, 4], [4, 4]]), normal(3, 2, 2), axis=1)
case("scatter", normal(5, 3), ints([4, 0, 2]), normal(3, 3), axis=0, lits=(1,))
case("scatter", normal(5, 3), ints([2, 2]), normal(2, 3), axis=0, lits=(1,))
case("scatter", normal(4, 3), np.int64(2), normal(3), axis=0)
case("scatter", normal(4), ints([3, 0, 3, 1]), Same(0), axis=0)
case("scatter_add", normal(5, 3), ints([1, 3, 1, 1]), normal(4, 3), axis=0)
case("scatter_add", normal(3, 4), ints([0, 0, 3], np.int32), normal(3, 3), axis=1)
case("scatter_add", normal(4), ints([2, 0]), normal(2), axis=0, lits=(1,))
case("scatter_add", normal(4), ints([1, 1, 0, 3]), Same(0), axis=0)

# -- linear algebra ---------------------------------------------------------------------


def dot(a, b, contract, batch=((), ())):
    """A ``dot_general`` case."""
    case("dot_general", a, b, contract=contract, batch=batch)


dot(normal(3, 4), normal(4, 5), ((1,), (0,)))
dot(normal(2, 3, 4), normal(2, 4, 5), ((2,), (1,)), ((0,), (0,)))
dot(normal(3, 2, 4), normal(4, 5, 2), ((2,), (0,)), ((1,), (2,)))
dot(normal(2, 3, 4), normal(4, 3, 5), ((1, 2), (1, 0)))
dot(normal(2, 3, 4), normal(3, 2), ((1,), (0,)), ((0,), (1,)))
dot(normal(3), normal(4), ((), ()))
dot(normal(4), normal(4), ((0,), (0,)))
dot(normal(3, 0), normal(0, 4), ((1,), (0,)))
dot(normal(3, 4), Same(0), ((1,), (1,)))
dot(normal(2, 3, 2), normal(3, 2, 2), ((1, 0), (0, 2)), ((2,), (1,)))
dot(normal(3, 4, dtype=np.float32), normal(4, 2, dtype=np.float32), ((1,), (0,)))


def spd(*shape, dtype=np.float64):
    """A symmetric positive definite lower triangle, with junk above it (never read)."""
    n = shape[-1]
    a = normal(*shape)
    full = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    return (np.tril(full) + np.triu(normal(*shape), 1)).astype(dtype)


def triangular(*shape):
    """Well conditioned on either triangle, with or without its diagonal."""
    n = shape[-1]
    return 0.3 * normal(*shape) + np.eye(n) * _RNG.uniform(2, 3, shape[:-1])[..., None]


case("cholesky", spd(3, 3))
case("cholesky", spd(2, 3, 3))
case("cholesky", spd(1, 1))
case("cholesky", spd(3, 3, dtype=np.float32))
case("cholesky_adjoint", triangular(3, 3), normal(3, 3))
case("cholesky_adjoint", triangular(2, 3, 3), normal(2, 3, 3))
for _left, _lower, _trans, _unit in itertools.product((True, False), repeat=4):
    _batch = (2,) if _lower == _trans else ()
    _b = normal(*_batch, 3, 2) if _left else normal(*_batch, 2, 3)
    case("triangular_solve", triangular(*_batch, 3, 3), _b, left_side=_left, lower=_lower,
         transpose_a=_trans, unit_diagonal=_unit)
case("lu", normal(3, 3))
case("lu", normal(2, 3, 3))
case("lu", normal(4, 4))
case("lu", normal(1, 1))
case("lu", normal(3, 3), keep=(0,))
case("triangular_solve", triangular(3, 3), Same(0), left_side=True, lower=False,
     transpose_a=True, unit_diagonal=False)
# empty matrices and batches
case("cholesky", np.zeros((0, 0)))
case("cholesky", np.zeros((0, 2, 2)))
case("triangular_solve", np.zeros((0, 0)), normal(0, 2), left_side=True, lower=True,
     transpose_a=False, unit_diagonal=False)
case("lu", np.zeros((0, 0)))
case("lu", np.zeros((0, 2, 2)))
dot(normal(0, 2, 3), normal(0, 3, 4), ((2,), (1,)), ((0,), (0,)))
# spectral factorizations: distinct eigenvalues and singular values, full rank
for _lower, _vectors in itertools.product((True, False), repeat=2):
    case("eigh", normal(3, 3), lower=_lower, vectors=_vectors)
case("eigh", normal(2, 3, 3), lower=True, vectors=True)
# float32: eigenvalues kept well apart (a random draw can be close to degenerate there,
# where float32 central differences of the vectors are noise)
case("eigh", np.array([[2.0, 0.5, 0.1], [0.5, 3.5, 0.3], [0.1, 0.3, 5.0]], np.float32),
     lower=True, vectors=True)
for _shape in ((3, 3), (4, 3), (3, 4), (2, 4, 3)):
    case("svd", normal(*_shape), full_matrices=False, compute_uv=True)
    case("svd", normal(*_shape), full_matrices=False, compute_uv=False)
    case("qr", normal(*_shape), complete=False)
case("svd", normal(3, 3), full_matrices=True, compute_uv=True)
case("qr", normal(3, 3), complete=True)
case("qr", normal(3, 4), complete=True)

# -- convolution ------------------------------------------------------------------------

CONVS = [  # lhs, rhs, strides, padding, lhs_dilation, rhs_dilation
    ((1, 1, 5), (1, 1, 3), (1,), ((0, 0),), (1,), (1,)),
    ((2, 3, 7), (4, 3, 2), (2,), ((1, 2),), (1,), (1,)),
    ((1, 2, 9), (3, 2, 2), (1,), ((-1, -2),), (1,), (2,)),
    ((1, 2, 8), (3, 2, 2), (3,), ((2, -1),), (2,), (3,)),
    ((2, 2, 4, 5), (3, 2, 2, 3), (1, 2), ((0, 1), (1, 1)), (1, 1), (1, 1)),
    ((1, 1, 4, 4), (2, 1, 3, 3), (2, 1), ((1, 1), (2, 0)), (2, 1), (1, 2)),
    ((3, 4), (5, 4), (), (), (), ()),
    ((1, 1, 2), (1, 1, 5), (1,), ((0, 0),), (1,), (1,)),  # an empty result
    ((2, 2, 6), (3, 2, 2), (3,), ((0, 0),), (1,), (1,)),  # stride > window: gaps
    ((1, 1, 8), (1, 1, 3), (2,), ((0, 0),), (1,), (1,)),  # the last element unread
    ((1, 1, 3), (1, 1, 2), (1,), ((3, 3),), (1,), (1,)),  # windows inside the padding
    ((1, 2, 5, 4), (2, 2, 2, 2), (2, 2), ((-1, 1), (2, -1)), (2, 1), (2, 2)),
    ((1, 1, 3, 2, 3), (2, 1, 2, 1, 2), (1, 1, 2), ((1, 0), (0, 0), (0, 1)), (1, 2, 1),
     (1, 1, 2)),
    ((0, 2, 5), (3, 2, 2), (1,), ((0, 0),), (1,), (1,)),  # no batch
    ((2, 0, 5), (3, 0, 2), (1,), ((0, 0),), (1,), (1,)),  # no channels
]
for _sl, _sr, _strides, _padding, _ld, _rd in CONVS:
    case("conv", normal(*_sl), normal(*_sr), strides=_strides, padding=_padding,
         lhs_dilation=_ld, rhs_dilation=_rd)

# -- the tests --------------------------------------------------------------------------

ALL = [c for name in sorted(OPS) for c in CASES.get(name, ())]


def cases(keep) -> list:
    """The cases that ``keep`` accepts, as pytest params named by their ids."""
    return [pytest.param(c, id=c.id) for c in ALL if keep(c)]


SMOOTH = cases(lambda c: not c.zero)


def test_every_op_has_cases_or_a_reason():
    missing = sorted(set(OPS) - set(CASES) - set(EXCLUDED))
    assert not missing, f"ops with no derivative cases (add some, or exclude them): {missing}"
    assert not set(CASES) & set(EXCLUDED)
    assert set(CASES) | set(EXCLUDED) <= set(OPS), "cases or exclusions of unknown ops"


@pytest.mark.parametrize("c", SMOOTH)
def test_jvp(c: Case):
    check_jvp(*c.build(), c.rng())


@pytest.mark.parametrize("c", SMOOTH)
def test_vjp(c: Case):
    check_vjp(*c.build(), c.rng())


@pytest.mark.parametrize("c", SMOOTH)
def test_jvp_of_vjp(c: Case):
    check_jvp_of_vjp(*c.build(), c.rng())


@pytest.mark.parametrize("c", SMOOTH)
def test_vjp_of_jvp(c: Case):
    check_vjp_of_jvp(*c.build(), c.rng())


def float_params(c: Case) -> int:
    """How many float parameters the case's function takes."""
    return sum(1 for i, a in enumerate(c.args) if i not in c.lits and not isinstance(a, Same)
               and np.asarray(a).dtype.kind == "f")


@pytest.mark.parametrize("c", cases(lambda c: not c.zero and float_params(c) > 1))
def test_one_operand_active(c: Case):
    """The others held fixed: rules get symbolic zero tangents, transforms drop cotangents."""
    func, args = c.build()
    rng = c.rng()
    mask = float_mask(func)
    for k in (k for k, m in enumerate(mask) if m):
        only = [i == k for i in range(len(mask))]
        check_jvp(func, args, rng, only, directions=1)
        check_vjp(func, args, rng, only)


@pytest.mark.parametrize("c", cases(lambda c: c.zero))
def test_zero_derivative(c: Case):
    check_zero(*c.build(), c.rng())


def test_integer_inputs_get_no_tangent():
    x = np.arange(3, dtype=np.int64)
    func, args = one_op(OPS["convert"], [x], {"dtype": float64, "weak": False})
    for active in (None, [False]):
        jf = jvp_func(func, active)
        assert jf.in_types == [TensorType((3,), int64)]
        y, ty = run(jf, args)
        np.testing.assert_array_equal(y, x.astype(np.float64))
        assert ty.dtype == np.float64 and not np.any(ty)
    vf = vjp_func(func)
    assert len(vf.out_types) == 1  # the result, and no cotangent for the integer input


def test_integer_operands_get_no_tangent_or_cotangent():
    func, _ = one_op(OPS["gather"], [np.ones((4, 3)), ints([1, 3])], {"axis": 0})
    x, idx = func.in_types
    assert jvp_func(func).in_types == [x, idx, x]
    assert vjp_func(func).out_types == [*func.out_types, x]


@pytest.mark.parametrize("op,args,params,want", [
    ("reduce_max", [[1.0, 3.0, 3.0, 2.0]], {"axes": (0,)}, [[0, 0.5, 0.5, 0]]),
    ("reduce_min", [[[1.0, 1.0, 2.0], [2.0, 0.5, 0.5]]], {"axes": (1,)},
     [[[0.5, 0.5, 0], [0, 0.5, 0.5]]]),
    ("max", [[1.0, 2.0], [1.0, 3.0]], {}, [[0.5, 0], [0.5, 1]]),
    ("min", [[1.0, 2.0], [1.0, 3.0]], {}, [[0.5, 1], [0.5, 0]]),
])
def test_ties_split_the_derivative(op, args, params, want):
    """Where extremes tie (not differentiable) each tied operand gets an even share, and
    forward and reverse mode agree."""
    func, xs = one_op(OPS[op], [np.asarray(a) for a in args], params)
    cts = [np.ones(t.shape) for t in func.out_types]
    for got, w in zip(run(vjp_func(func), [*xs, *cts])[1:], want, strict=True):
        np.testing.assert_array_equal(got, w)
    check_vjp(func, xs, np.random.default_rng(0))
