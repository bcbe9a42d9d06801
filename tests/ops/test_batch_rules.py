"""The batching rules of every primitive (``vmap``), op by op, driven by the registry.

Each op with a ``batch`` rule runs on the sample cases of ``test_op_rules`` (and the
integer, bool and comparison cases below that those leave out) with every non-empty
subset of its parameters batched over three lanes, each at an axis of its own (first,
last, middle, varied from subset to subset).  The rule's IR must verify, and each lane
of its results must be the op's NumPy rule applied to that lane's operands.  Every op's
rule also runs once or twice through the C backend, all of them in one module.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from pullback.backends import interp
from pullback.backends.c import compile_func
from pullback.backends.c.build import compiler
from pullback.ir.builder import Builder
from pullback.ir.core import Lit
from pullback.ir.op import OPS
from pullback.ir.types import float64, int64, type_of_value
from pullback.ir.verify import verify
from tests.transforms.derivcheck import Same
from tests.transforms.test_op_rules import CASES, Case

SIZE = 3

#: Ops the vmap transform batches itself (through their blocks, or not at all).
BY_THE_TRANSFORM = {"cond", "while_loop", "for_loop", "call", "checkpoint", "custom_jvp",
                    "custom_vjp", "check", "debug_print", "stack_new", "stack_push",
                    "stack_pop"}

#: Ops whose operands must keep their structure lane by lane (a positive definite or a
#: well-conditioned triangular matrix): their lanes are only scaled, never shuffled.
STRUCTURED = {"cholesky", "cholesky_adjoint", "triangular_solve"}

_RNG = np.random.default_rng(11)

# -- cases the derivative tests leave out: integer, bool and comparison results ---------

BATCH_CASES: dict[str, list[Case]] = {name: list(cs) for name, cs in CASES.items()}


def case(op: str, *args, lits: tuple[int, ...] = (), **params) -> None:
    cases = BATCH_CASES.setdefault(op, [])
    args = tuple(a if isinstance(a, Same) or type(a) is float else np.asarray(a) for a in args)
    cases.append(Case(op, f"{op}-b{len(cases)}", args, params, lits))


def halves(*shape) -> np.ndarray:
    """Multiples of 0.5: comparisons meet ties."""
    return 0.5 * _RNG.integers(-2, 3, shape)


def ints(*shape, lo: int = -5, hi: int = 6) -> np.ndarray:
    return _RNG.integers(lo, hi, shape)


def bools(*shape) -> np.ndarray:
    return _RNG.random(shape) < 0.5


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    case(_name, halves(2, 3), halves(2, 3))
    case(_name, halves(), halves(3))
    case(_name, ints(4), ints())
for _name in ("and", "or", "xor"):
    case(_name, bools(2, 3), bools(2, 3))
    case(_name, ints(4), ints())
    case(_name, bools(), bools(3))
case("not", bools(2, 3))
case("not", ints(4))
case("not", bools())
for _name in ("argmax", "argmin"):
    case(_name, _RNG.permutation(12).reshape(3, 4) * 0.5, axis=1)
    case(_name, _RNG.permutation(24).reshape(2, 3, 4) * 0.5, axis=0)
    case(_name, ints(5, 3, lo=0, hi=3), axis=0)  # ties: the first one wins
    case(_name, ints(4), axis=0)
case("random_bits", np.int64(42), shape=(2, 3))
case("random_bits", np.int64(-7), shape=())
case("random_bits", np.int64(5), shape=(0, 2))
case("add", ints(2, 3), ints())
case("mul", ints(3), ints(3))
case("floordiv", ints(2, 3), np.int64(3))
case("max", bools(4), bools(4))
case("select", bools(2, 3), ints(2, 3), ints())
case("select", bools(), bools(3), bools(3))
case("convert", ints(2, 3), dtype=float64, weak=False)
case("convert", halves(4), dtype=int64, weak=False)
case("neg", ints(2, 3))
case("broadcast_in_dim", bools(3), shape=(2, 3), dims=(1,))
case("transpose", ints(2, 3, 4), perm=(1, 2, 0))
case("concatenate", bools(2, 3), bools(2, 2), axis=1)
case("pad", ints(3, 2), np.int64(9), lo=(1, -1), hi=(0, 2), interior=(1, 1))
case("reshape", ints(2, 3, 2), shape=(3, 4))
case("reshape", ints(2, 3, 2), shape=(2, 6))
case("reshape", ints(6), shape=(2, 1, 3))
case("reshape", ints(1, 6, 1), shape=(6,))
case("reduce_sum", ints(3, 4), axes=(0,))
case("reduce_max", ints(2, 3, 4), axes=(1, 2))
case("reduce_min", bools(3, 4), axes=(1,))
case("reduce_prod", ints(2, 3, lo=-2, hi=3), axes=(0, 1))
case("cumsum", ints(3, 4), axis=0, reverse=True)
case("cumprod", ints(2, 3, lo=-2, hi=3), axis=1, reverse=False)
case("stop_gradient", _RNG.standard_normal((2, 3)))
case("stop_gradient", np.float64(1.5))

# -- building and checking one batched application -------------------------------------


def lane(c: Case, a: np.ndarray, k: int) -> np.ndarray:
    """Lane ``k`` of a batched operand: another value in every lane, in the op's domain.
    Floats are shuffled and scaled, integers and bools shuffled; a 0-d integer (an index,
    a key) counts down to 0 and a 0-d bool flips."""
    if a.ndim == 0 and a.dtype.kind in "bi":
        return np.asarray(a ^ bool(k % 2) if a.dtype == bool else abs(a - k)).astype(a.dtype)
    shuffled = a if c.op in STRUCTURED else np.roll(a.ravel(), k).reshape(a.shape)
    if a.dtype.kind == "f":
        return (shuffled * (1.0, 1.25, 0.8)[k]).astype(a.dtype)
    return shuffled


def params_of(c: Case) -> list[int]:
    """The positions of the operands that are parameters (the ones that can be batched)."""
    return [i for i, a in enumerate(c.args)
            if i not in c.lits and not isinstance(a, Same) and type(a) is not float]


def subsets(c: Case) -> list[dict[int, int]]:
    """Every non-empty subset of the parameters, each parameter batched at an axis that
    turns from first to last to middle as the subsets go by."""
    ps = params_of(c)
    out = []
    for r in range(1, len(ps) + 1):
        for chosen in itertools.combinations(ps, r):
            n = len(out)
            axes = {}
            for j, i in enumerate(chosen):
                nd = np.ndim(c.args[i])
                axes[i] = (0, nd, nd // 2)[(n + j) % 3]
            out.append(axes)
    return out


def lanes_of(c: Case, batched: dict[int, int], size: int = SIZE) -> list[list[Any]]:
    """Each lane's operands (literal and repeated ones included)."""
    lanes = []
    for k in range(size):
        ops: list[Any] = []
        for i, a in enumerate(c.args):
            if isinstance(a, Same):
                ops.append(ops[a.index])
            else:
                ops.append(lane(c, a, k) if i in batched else a)
        lanes.append(ops)
    return lanes


def emit_batched(b: Builder, c: Case, batched: dict[int, int], lanes: list[list[Any]]):
    """Emit the rule on the case's operands, those in ``batched`` stacked over the lanes
    (none, even) at their axes; returns the results, their batch dims and the function's
    arguments."""
    ins: list[Any] = []
    dims: list[int | None] = []
    arrays = []
    for i, a in enumerate(c.args):
        if isinstance(a, Same):
            ins.append(ins[a.index])
            dims.append(dims[a.index])
        elif i in c.lits or type(a) is float:
            ins.append(Lit(a))
            dims.append(None)
        else:
            d = batched.get(i)
            x = a if d is None else stack([ln[i] for ln in lanes], a, d)
            arrays.append(x)
            ins.append(b.param(type_of_value(x)))
            dims.append(d)
    outs, out_dims = OPS[c.op].batch(ins, dims, len(lanes), **c.params)
    return outs, out_dims, arrays


def stack(xs: list[np.ndarray], like: np.ndarray, d: int) -> np.ndarray:
    """Lanes ``xs`` (each like ``like``) stacked at axis ``d``."""
    if not xs:
        return np.moveaxis(np.zeros((0, *np.shape(like)), np.asarray(like).dtype), 0, d)
    return np.stack(xs, axis=d)


def expected(c: Case, lanes: list[list[Any]]) -> list[list[np.ndarray]]:
    """Each lane's results by the op's NumPy rule."""
    op = OPS[c.op]
    with np.errstate(all="ignore"):
        res = [op.impl(*ln, **c.params) for ln in lanes]
    return [list(r) if op.multiple_results else [r] for r in res]


def check_lanes(got: list[np.ndarray], out_dims, want: list[list[np.ndarray]], where: str):
    assert len(got) == len(out_dims) == len(want[0]), where
    for j, (g, d) in enumerate(zip(got, out_dims, strict=True)):
        assert d is None or 0 <= d < g.ndim and g.shape[d] == len(want), f"{where}: dim {d}"
        for k in range(len(want)):
            w = np.asarray(want[k][j])
            gk = g if d is None else np.take(g, k, axis=d)
            at = f"{where}: result {j} (batch dim {d}), lane {k}"
            assert gk.dtype == w.dtype and gk.shape == w.shape, (
                f"{at}: {gk.dtype}{gk.shape} != {w.dtype}{w.shape}")
            if w.dtype.kind == "f":
                tol = 1e-5 if w.dtype == np.float32 else 1e-10
                np.testing.assert_allclose(gk, w, rtol=tol, atol=tol, err_msg=at)
            else:
                np.testing.assert_array_equal(gk, w, err_msg=at)


def run_rule(c: Case, batched: dict[int, int], lanes: list[list[Any]]):
    """The rule's results on the interpreter (its IR verified first), and their batch dims."""
    with Builder() as b:
        outs, out_dims, arrays = emit_batched(b, c, batched, lanes)
        func = b.finish(f"{c.op}_batched", outs)
    verify(func)
    return interp.run(func, *arrays), out_dims


def run_batched(c: Case, batched: dict[int, int], size: int = SIZE) -> None:
    lanes = lanes_of(c, batched, size)
    check_lanes(*run_rule(c, batched, lanes), expected(c, lanes), f"{c.id} batched {batched}")


# -- the tests --------------------------------------------------------------------------

RULED = sorted(name for name, op in OPS.items() if op.batch is not None)
#: The cases with a parameter to batch (not only literals).
ALL = [c for name in RULED for c in BATCH_CASES.get(name, ()) if params_of(c)]


def needs_rule(name: str) -> bool:
    return name not in BY_THE_TRANSFORM and OPS[name].arity != 0


@pytest.mark.parametrize("name", [n for n in sorted(OPS) if needs_rule(n)])
def test_every_op_has_a_batch_rule(name: str):
    assert OPS[name].batch is not None, f"{name} has no batching rule"
    assert BATCH_CASES.get(name), f"{name} has no cases to batch"


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in ALL])
def test_batch_rule(c: Case):
    for batched in subsets(c):
        run_batched(c, batched)


def one_per_op() -> list[tuple[Case, dict[int, int]]]:
    """Each op's first case, with its parameters batched as its last subset (all of them)
    and, where it has several, its first (one of them)."""
    picks = []
    for c in {c.op: c for c in reversed(ALL)}.values():
        subs = subsets(c)
        picks += [(c, subs[-1])] + ([(c, subs[0])] if len(subs) > 1 else [])
    return picks


@pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")
def test_c_backend_runs_the_rules():
    """Every op's rule, once or twice, in one module compiled by the C backend."""
    picks = one_per_op()
    with Builder() as b:
        results, checks, arrays = [], [], []
        for c, batched in picks:
            lanes = lanes_of(c, batched)
            res, dims, args = emit_batched(b, c, batched, lanes)
            results += res
            arrays += args
            checks.append((len(res), dims, expected(c, lanes), f"{c.id} batched {batched}"))
        func = b.finish("batched", results)
    got = iter(compile_func(func)(*arrays))
    for n, dims, want, where in checks:
        check_lanes([next(got) for _ in range(n)], dims, want, where)


#: Ops whose rule emits the op alone when its operands of full rank are all batched at
#: one axis: batch axes move lazily, and these never need to.
IN_PLACE = sorted({n for n, op in OPS.items() if op.fusion in ("elementwise", "reduction")
                   and op.arity != 0} - {"random_bits"}
                  | {"transpose", "slice", "rev", "broadcast_in_dim", "cumsum", "cumprod",
                     "concatenate", "pad"})


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in ALL if c.op in IN_PLACE])
def test_batch_axis_stays_put(c: Case):
    ps = params_of(c)
    rank = max(np.ndim(c.args[i]) for i in ps)
    for axis in sorted({0, rank // 2, rank}):
        batched = {i: axis for i in ps if np.ndim(c.args[i]) == rank}
        with Builder() as b:
            outs, _, _ = emit_batched(b, c, batched, lanes_of(c, batched))
            func = b.finish("f", outs)
        assert [e.op.name for e in func.block.eqns] == [c.op], batched


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in ALL])
def test_one_lane(c: Case):
    """Parameters batched over one lane (no lanes at all never reach a rule: ``vmap``
    of an empty batch runs nothing)."""
    for batched in subsets(c):
        run_batched(c, batched, 1)
