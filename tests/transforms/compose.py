"""Machinery of the composition matrix (``test_composition.py``): transforms as maps
between functions of one argument, chains of them, their numerical references, and a
run of many chains in one compiled function.

Each transform maps a function ``g(x) -> pytree`` to another function of ``x`` (the
other arguments of a corpus program are closed over as constants):

==================  ==========================================================
``jit``             ``pb.jit(g, backend=...)``
``checkpoint``      ``pb.checkpoint(g)``
``grad``            ``pb.grad(s . g)``; ``s(y) = sum(w * leaf)`` over y's leaves
``value_and_grad``  ``pb.value_and_grad(s . g)``
``vjp``             ``x -> (out, vjp_fn(ct)[0])`` where ``out, vjp_fn = pb.vjp(g, x)``
``jvp``             ``x -> pb.jvp(g, (x,), (v,))``
``jacfwd``          ``pb.jacfwd(g)``
``jacrev``          ``pb.jacrev(g)``
``hessian``         ``pb.hessian(s . g)``
``vmap``            ``x -> pb.vmap(g)(X)``; ``X``: lanes ``x + d_k`` stacked, ``d_0 = 0``
==================  ==========================================================

A *chain* is a tuple of transform names, outermost first: ``("grad", "jit")`` is
``grad(jit(f))``.  The weights ``w``, the cotangent ``ct`` and the direction ``v`` are
fixed random constants in the structure of ``g``'s result (``structure``: worked out
from the program's plain-Python result and the transforms, never from pullback).

References are built level by level.  ``jit`` and ``checkpoint`` change no value, so a
chain's reference is that of the chain without them (its *canonical* form).  The
reference of the empty chain is the program run by plain Python; that of ``T . c`` is
the numerical version of ``T`` (float64 five-point central differences) applied to
``c`` as pullback computes it, called from plain Python on the interpreter — and that
function's own value at ``x0`` is checked against the reference of ``c``, one level
down.  The Hessian's reference is the numerical Jacobian of ``grad . c`` called so
(itself checked against the numerical gradient of ``c``): second differences of a
scalar would lose half the digits.
"""

from __future__ import annotations

import copy
import itertools
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import pullback as pb
from programs.ad_check import TOLERANCE, assert_close, is_float, make_case, weighted_sum
from programs.registry import Program

TRANSFORMS = ("jit", "checkpoint", "grad", "value_and_grad", "vjp", "jvp", "jacfwd",
              "jacrev", "hessian", "vmap")
#: The transforms every ordered pair of which the matrix runs; ``vmap`` pairs with
#: each of them in the chains ``test_composition.VMAP`` names.
PAIRED = TRANSFORMS[:-1]
#: Transforms that change no value.
IDENTITIES = ("jit", "checkpoint")
#: Transforms that reduce their function's result to a scalar with ``s`` first.
SCALAR = ("grad", "value_and_grad", "hessian")

Chain = tuple[str, ...]

#: ``vmap``'s lanes: ``x`` shifted by these multiples of a fixed random direction (the
#: first lane is ``x`` itself; the others may take other branches).
LANES = (0.0, 0.05, -0.1)


def chain_name(chain: Chain) -> str:
    return "\u2218".join(chain) if chain else "f"


def canonical(chain: Chain) -> Chain:
    """``chain`` without the transforms that change no value."""
    return tuple(t for t in chain if t not in IDENTITIES)


def products(depth: int) -> list[Chain]:
    """Every chain of ``depth`` transforms of ``PAIRED``."""
    return [tuple(c) for c in itertools.product(PAIRED, repeat=depth)]


def _seed(*parts: Any) -> int:
    return zlib.crc32(repr(parts).encode())


def _is_none(x: Any) -> bool:
    return x is None


def flat(tree: Any) -> tuple[list, Any]:
    return pb.tree_flatten(tree, is_leaf=_is_none)


def _like(x: Any, values: np.ndarray) -> Any:
    """``values`` as a leaf of ``x``'s kind: array, NumPy scalar or Python float."""
    if isinstance(x, np.ndarray):
        return np.asarray(values, dtype=x.dtype).reshape(x.shape)
    if isinstance(x, np.generic):
        return x.dtype.type(values)
    return float(values)


def random_tree(tree: Any, rng: np.random.Generator) -> Any:
    """Standard normal values in ``tree``'s structure, shapes and leaf kinds."""
    leaves, td = flat(tree)
    return pb.tree_unflatten(td, [_like(x, rng.standard_normal(np.shape(x))) for x in leaves])


def _scalar(tree: Any, weights: Any) -> float:
    """``s``: ``sum(w * leaf)`` in float64."""
    return float(sum(np.sum(np.asarray(x, np.float64) * np.asarray(w, np.float64))
                     for x, w in zip(flat(tree)[0], flat(weights)[0], strict=True)))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


class Unavailable(Exception):
    """A reference that cannot be computed: a function it differentiates raised."""


# -- the program as a function of one argument ------------------------------------------


@dataclass(frozen=True)
class Pick:
    """A corpus program as a function of ``x``: the arguments at positions ``at`` of its
    input case ``case`` (a tuple of them when several), the first ``take`` rows of an
    array argument when given; the other arguments are constants."""

    program: str
    case: int = 0
    at: tuple[int, ...] = (0,)
    take: int | None = None
    #: central-difference step, times max(1, |x|)
    step: float = 1e-6

    @property
    def id(self) -> str:
        return self.program


class Subject:
    """A picked program, its references, and its chains built as pullback functions."""

    def __init__(self, pick: Pick, programs: dict[str, Program]):
        self.pick = pick
        self.prog = programs[pick.program]
        case = make_case(self.prog, pick.case)
        args = list(case.args)
        if pick.take is not None:
            (k,) = pick.at
            args[k] = copy.deepcopy(args[k][:pick.take])
        self.fn = case.fn
        self.args = tuple(args)
        self.pristine = copy.deepcopy(self.args)
        self.at = pick.at
        for x in flat(self.x0)[0]:
            assert is_float(x) and np.asarray(x).dtype == np.float64, \
                f"{pick.program}: x has the leaf {x!r}; the matrix differentiates float64"
        y = self.python(self.x0)
        for leaf in flat(y)[0]:
            assert is_float(leaf) and np.asarray(leaf).dtype == np.float64, \
                f"{pick.program}: its result has the leaf {leaf!r}; the matrix needs float64"
        self.refs: dict[Chain, Any] = {(): y}
        self.unavailable: dict[Chain, str] = {}
        self.inner: dict[Chain, Callable] = {}  # the functions the references call
        self.broken: dict[Chain, str] = {}  # those of them that raised
        #: why each chain found so far cannot be staged (staging depends on no backend)
        self.unstageable: dict[Chain, str | None] = {}
        #: (chain, what went wrong) of the functions the references call
        self.reference_failures: list[tuple[Chain, str]] = []

    @property
    def name(self) -> str:
        return self.prog.name

    @property
    def x0(self) -> Any:
        if len(self.at) == 1:
            return self.args[self.at[0]]
        return tuple(self.args[k] for k in self.at)

    def fresh(self) -> Any:
        return copy.deepcopy(self.x0)

    def base(self) -> Callable:
        """``f(x)``: the program with ``x`` at its positions, as pullback stages it."""
        fn, consts, at = self.fn, self.args, self.at
        single = len(at) == 1
        order = [(True, at.index(k)) if k in at else (False, k) for k in range(len(consts))]

        def f(x):
            xs = (x,) if single else x
            return fn(*[xs[i] if mine else consts[i] for mine, i in order])

        return f

    def python(self, x: Any) -> Any:
        """The program in plain Python at a copy of ``x``, on copies of the constants."""
        args = list(copy.deepcopy(self.args))
        xs = (copy.deepcopy(x),) if len(self.at) == 1 else copy.deepcopy(x)
        for k, v in zip(self.at, xs, strict=True):
            args[k] = v
        return self.fn(*args)

    def constants_unchanged(self) -> bool:
        return all(np.array_equal(a, b) for a, b in
                   zip(flat(self.args)[0], flat(self.pristine)[0], strict=True))

    # -- structure and constants of the transforms

    def structure(self, chain: Chain) -> Any:
        """Zeros in the structure (and leaf shapes) of ``chain``'s result."""
        if not chain:
            return pb.tree_map(lambda y: np.zeros(np.shape(y)), self.refs[()])
        t, inner = chain[0], chain[1:]
        x = pb.tree_map(lambda v: np.zeros(np.shape(v)), self.x0)
        if t in IDENTITIES:
            return self.structure(inner)
        if t == "grad":
            return x
        if t == "vmap":
            return pb.tree_map(lambda y: np.zeros((len(LANES), *np.shape(y))),
                               self.structure(inner))
        if t == "value_and_grad":
            return np.zeros(()), x
        if t == "jvp":
            y = self.structure(inner)
            return y, y
        if t == "vjp":
            return self.structure(inner), x
        y = self.structure(("grad", *inner)) if t == "hessian" else self.structure(inner)
        return pb.tree_map(lambda o: pb.tree_map(lambda v: np.zeros(o.shape + v.shape), x), y)

    def weights(self, inner: Chain) -> Any:
        c = canonical(inner)
        return random_tree(self.structure(c), np.random.default_rng(_seed(self.name, "w", c)))

    def cotangent(self, inner: Chain) -> Any:
        c = canonical(inner)
        return random_tree(self.structure(c), np.random.default_rng(_seed(self.name, "ct", c)))

    def direction(self) -> Any:
        return random_tree(self.x0, np.random.default_rng(_seed(self.name, "v")))

    def lane_direction(self) -> Any:
        return random_tree(self.x0, np.random.default_rng(_seed(self.name, "lanes")))

    # -- chains as pullback functions

    def build(self, chain: Chain, backend: str) -> Callable:
        """``chain`` applied to the program, a function of ``x``; ``jit`` compiles for
        ``backend``."""
        g = self.base()
        for k in range(len(chain) - 1, -1, -1):
            g = self._apply(chain[k], g, chain[k + 1:], backend)
        return g

    def _apply(self, t: str, g: Callable, inner: Chain, backend: str) -> Callable:
        if t == "jit":
            return pb.jit(g, backend=backend)
        if t == "checkpoint":
            return pb.checkpoint(g)
        if t == "jvp":
            v = self.direction()
            return lambda x: pb.jvp(g, (x,), (v,))
        if t == "vjp":
            ct = self.cotangent(inner)

            def vjp_of(x):
                out, vjp_fn = pb.vjp(g, x)
                return out, vjp_fn(ct)[0]

            return vjp_of
        if t == "vmap":
            d = self.lane_direction()
            return lambda x: pb.vmap(g)(lanes(x, d))
        if t == "jacfwd":
            return pb.jacfwd(g)
        if t == "jacrev":
            return pb.jacrev(g)
        w = self.weights(inner)

        def s(x):
            return weighted_sum(g(x), w)

        return {"grad": pb.grad, "value_and_grad": pb.value_and_grad,
                "hessian": pb.hessian}[t](s)

    # -- references

    def ref(self, chain: Chain) -> Any:
        """The reference of ``chain`` at ``x0``; ``Unavailable`` when a function it
        differentiates raised."""
        c = canonical(chain)
        if c in self.unavailable:
            raise Unavailable(self.unavailable[c])
        if c not in self.refs:
            try:
                self.refs[c] = self._numerical(c[0], c[1:])
            except Unavailable as e:
                self.unavailable[c] = str(e)
                raise
        return self.refs[c]

    def _inner_function(self, inner: Chain) -> Callable:
        """``inner`` (canonical) as the references differentiate it: plain Python for the
        empty chain, else pullback called from Python (the caller has
        PULLBACK_BACKEND=interp), its value at ``x0`` checked against its reference."""
        if not inner:
            return self.python
        if inner in self.broken:
            raise Unavailable(self.broken[inner])
        if inner not in self.inner:
            g = self.build(inner, "interp")
            try:
                got = g(self.fresh())
            except Exception as e:  # noqa: BLE001 (any exception is the finding)
                self.broken[inner] = f"{chain_name(inner)} from Python raised {_first_line(e)}"
                self.reference_failures.append((inner, f"raised {_first_line(e)}"))
                raise Unavailable(self.broken[inner]) from e
            try:
                compare(got, self.ref(inner), TOLERANCE[np.dtype(np.float64)],
                        f"{chain_name(inner)} called from Python")
            except AssertionError as e:
                self.reference_failures.append((inner, f"wrong value: {e}"))
            except Unavailable:
                pass
            self.inner[inner] = lambda x: g(copy.deepcopy(x))
        return self.inner[inner]

    def _numerical(self, t: str, inner: Chain) -> Any:
        if t == "vmap":  # a loop over the lanes
            g = self._inner_function(inner)
            try:
                x, d = self.x0, self.lane_direction()
                return stack([g(pb.tree_map(lambda a, b, c=c: _like(a, a + c * b), x, d))
                              for c in LANES])
            except Exception as e:  # noqa: BLE001 (a lane raising is a finding)
                why = f"{chain_name(inner)} raised {_first_line(e)} in a lane"
                self.reference_failures.append((inner, why))
                raise Unavailable(why) from e
        if t == "hessian":  # the Jacobian of the gradient of s . inner
            grad = ("grad", *inner)
            value = self.ref(grad)
            g = self._inner_function(grad)
        else:
            value = self.ref(inner)
            g = self._inner_function(inner)
        x_leaves, x_tree = flat(self.x0)
        sizes = [int(np.size(x)) for x in x_leaves]
        scale = max([float(np.max(np.abs(x))) for x in x_leaves if np.size(x)] or [0.0])
        try:
            jac = jacobian(g, self.x0, self.pick.step * max(1.0, scale))  # per leaf [*o, n]
        except Exception as e:  # noqa: BLE001 (a function raising near x0 is a finding)
            c = ("grad", *inner) if t == "hessian" else inner
            why = f"{chain_name(c)} raised {_first_line(e)} near x0"
            self.reference_failures.append((c, why))
            raise Unavailable(why) from e
        o_leaves, o_tree = flat(value)

        def split(row: np.ndarray, lead: tuple) -> Any:
            """``row`` ([*lead, n]) cut into x's structure, each leaf ``lead + x.shape``."""
            parts, j = [], 0
            for x, m in zip(x_leaves, sizes, strict=True):
                parts.append(row[..., j:j + m].reshape(lead + np.shape(x)))
                j += m
            return pb.tree_unflatten(x_tree, parts)

        if t in ("jacfwd", "jacrev", "hessian"):
            return pb.tree_unflatten(o_tree, [split(j, np.shape(o))
                                              for j, o in zip(jac, o_leaves, strict=True)])
        if t == "jvp":
            v = np.concatenate([np.ravel(x) for x in flat(self.direction())[0]])
            return value, pb.tree_unflatten(o_tree, [j @ v for j in jac])
        w = self.weights(inner) if t in SCALAR else self.cotangent(inner)
        row = sum(np.tensordot(np.asarray(wl, np.float64), j, axes=np.ndim(wl))
                  for wl, j in zip(flat(w)[0], jac, strict=True))
        grad = split(np.asarray(row, np.float64), ())
        if t == "grad":
            return grad
        if t == "value_and_grad":
            return _scalar(value, w), grad
        assert t == "vjp", t
        return value, grad


def lanes(x: Any, d: Any) -> Any:
    """``vmap``'s argument: ``x + c d`` for ``c`` in ``LANES``, stacked leaf by leaf
    (staged code: containers walked by hand, no pytree functions)."""
    if isinstance(d, dict):
        return {k: lanes(x[k], d[k]) for k in d}
    if isinstance(d, (tuple, list)):
        parts = [lanes(a, b) for a, b in zip(x, d, strict=True)]
        return tuple(parts) if isinstance(d, tuple) else parts
    return np.stack([x + c * d for c in LANES])


def stack(trees: Sequence[Any]) -> Any:
    """Trees of one structure stacked leaf by leaf along a new first axis (float64)."""
    return pb.tree_map(lambda *xs: np.stack([np.asarray(x, np.float64) for x in xs]),
                       *trees)


def _shifted(x: Any, direction: np.ndarray) -> Any:
    """``x`` plus the flat ``direction`` spread over its leaves (of x's kinds)."""
    leaves, tree = flat(x)
    out, j = [], 0
    for leaf in leaves:
        m = int(np.size(leaf))
        out.append(_like(leaf, np.asarray(leaf, np.float64)
                         + direction[j:j + m].reshape(np.shape(leaf))))
        j += m
    return pb.tree_unflatten(tree, out)


#: Five-point central differences: f'(x) ~ sum(w f(x + s h)) / h, error O(h^4).
STENCIL = ((-2.0, 1 / 12), (-1.0, -2 / 3), (1.0, 2 / 3), (2.0, -1 / 12))


def jacobian(g: Callable, x: Any, h: float) -> list[np.ndarray]:
    """Per result leaf of ``g``, ``d leaf / d x`` as ``[*leaf.shape, n]`` (x's leaves
    flattened and concatenated), by five-point central differences with step ``h``."""
    n = sum(int(np.size(v)) for v in flat(x)[0])
    cols: list[list[np.ndarray]] = []
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        runs = [flat(g(_shifted(x, s * e)))[0] for s, _ in STENCIL]
        weights = [w for _, w in STENCIL]
        cols.append([sum(w * np.asarray(r[k], np.float64)
                         for w, r in zip(weights, runs, strict=True)) / h
                     for k in range(len(runs[0]))])
    return [np.stack([c[k] for c in cols], axis=-1) for k in range(len(cols[0]))]


def compare(got: Any, want: Any, tolerance: tuple[float, float], where: str) -> None:
    """``got`` has ``want``'s structure and, leaf by leaf, its shapes and (to
    ``assert_close``'s tolerance) values."""
    g_leaves, g_tree = flat(got)
    w_leaves, w_tree = flat(want)
    assert g_tree == w_tree, f"{where}: structure {g_tree} != {w_tree}"
    for k, (g, w) in enumerate(zip(g_leaves, w_leaves, strict=True)):
        assert is_float(g), f"{where}, leaf {k}: {type(g).__name__} {g!r}, not a float"
        assert_close(g, w, *tolerance, f"{where}, leaf {k}")


# -- running many chains in one compiled function ---------------------------------------


@dataclass
class Outcome:
    value: Any = None
    error: str | None = None  # what was raised


def _batch(fns: Sequence[Callable], subject: Subject, backend: str) -> tuple:
    """``(f(x) for f in fns)`` compiled as one function for ``backend``, each ``f`` on
    its own copy of ``x0`` (a chain writing to its argument changes nothing else)."""

    def batch(*xs):
        return tuple([f(x) for f, x in zip(fns, xs, strict=True)])

    jitted = pb.jit(batch, backend=backend)
    values = jitted(*[subject.fresh() for _ in fns])
    if backend == "c" and jitted.specialise(*[subject.fresh() for _ in fns])[0].runner is None:
        raise RuntimeError("the C backend did not compile it (it ran on the interpreter)")
    return values


def _staging_error(chain: Chain, fn: Callable, subject: Subject) -> str | None:
    """Why ``fn`` (``chain``) cannot be staged on its own, as the batch stages it, if it
    cannot (remembered per subject: staging does not depend on the backend)."""
    if chain not in subject.unstageable:
        try:
            pb.jit(fn, backend="interp").specialise(subject.fresh())
            subject.unstageable[chain] = None
        except Exception as e:  # noqa: BLE001 (any exception is the finding)
            subject.unstageable[chain] = _first_line(e)
    return subject.unstageable[chain]


def run_chains(subject: Subject, chains: Sequence[Chain], backend: str
               ) -> dict[Chain, Outcome]:
    """Each chain applied to the program, compiled for ``backend`` and called at ``x0``:
    all in one compiled function (less the chains already known not to stage).  When that
    raises, the chains that cannot be staged on their own are set apart and the others
    compiled together again, then by halves, down to the chains that raise."""
    out: dict[Chain, Outcome] = {}
    fns = {c: subject.build(c, backend) for c in chains}

    def set_apart(group: list[Chain]) -> list[Chain]:
        rest = []
        for c in group:
            why = _staging_error(c, fns[c], subject)
            if why is None:
                rest.append(c)
            else:
                out[c] = Outcome(error=why)
        return rest

    def run(group: list[Chain], first: bool) -> None:
        if not group:
            return
        try:
            values = _batch([fns[c] for c in group], subject, backend)
        except Exception as e:  # noqa: BLE001 (isolated below)
            if first:
                run(set_apart(group), False)
            elif len(group) == 1:
                out[group[0]] = Outcome(error=_first_line(e))
            else:
                run(group[:len(group) // 2], False)
                run(group[len(group) // 2:], False)
            return
        for c, v in zip(group, values, strict=True):
            out[c] = Outcome(value=v)

    known = [c for c in chains if subject.unstageable.get(c) is not None]
    run(set_apart(known) + [c for c in chains if c not in known], True)
    return out


@dataclass(frozen=True)
class Failure:
    chain: Chain
    kind: str  # "raised", "wrong value", "no reference", "from Python", "constants"
    detail: str

    def line(self) -> str:
        detail = self.detail.strip().splitlines()
        return f"{chain_name(self.chain):40s} {self.kind:16s} {detail[0] if detail else ''}"


def check(subject: Subject, chains: Sequence[Chain], backend: str) -> list[Failure]:
    """Every chain against its reference; what failed (nothing when all pass)."""
    failures: list[Failure] = []
    outcomes = run_chains(subject, chains, backend)
    tolerance = TOLERANCE[np.dtype(np.float64)]
    for c in chains:
        o = outcomes[c]
        if o.error is not None:
            failures.append(Failure(c, "raised", o.error))
            continue
        try:
            want = subject.ref(c)
        except Unavailable as e:
            failures.append(Failure(c, "no reference", str(e)))
            continue
        try:
            compare(o.value, want, tolerance, chain_name(c))
        except AssertionError as e:
            failures.append(Failure(c, "wrong value", str(e)))
    if backend == "interp":  # the references call pullback on the interpreter
        for c, why in subject.reference_failures:
            failures.append(Failure(c, "from Python", why))
    if not subject.constants_unchanged():
        failures.append(Failure((), "constants", "the program's other arguments changed"))
    return failures
