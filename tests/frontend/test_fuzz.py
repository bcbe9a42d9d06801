"""Mutated corpus programs: ``pb.jit`` agrees with plain Python, or refuses cleanly.

A random small edit (an operator, a comparison, a constant, a deleted statement) turns a
working program into one the corpus does not contain: it may compute something else,
raise, loop forever or be valid Python that pullback refuses.  Whatever it does, compiled
it must do the same, raise the same exception type, or raise a ``CompileError``.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import itertools
import linecache
import math
import os
import signal
import textwrap
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import Phase, assume, given, note, seed, settings
from hypothesis import strategies as st

import pullback as pb
from programs.registry import Program, load
from programs.test_corpus import assert_same_tree

ARITHMETIC = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow]
ORDERING = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq]
BODIES = ("body", "orelse", "finalbody")
PYTHON_SECONDS = 2.0
PULLBACK_SECONDS = 20.0
_files = itertools.count()

#: NumPy whose ``empty``/``empty_like`` fill zeros: a mutated program may read elements it
#: never wrote, which plain NumPy leaves arbitrary.
ZEROED_NUMPY = types.ModuleType("numpy")
ZEROED_NUMPY.__dict__.update(vars(np))
ZEROED_NUMPY.empty, ZEROED_NUMPY.empty_like = np.zeros, np.zeros_like
ZEROED = {id(np): ZEROED_NUMPY, id(np.empty): np.zeros, id(np.empty_like): np.zeros_like}


class Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def ring(signum: int, frame: Any) -> None:
        raise Timeout

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- mutations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """A place a mutation can go: the ``index``-th node of ``ast.walk`` and what to change
    there (``slot`` is the comparison operator or the statement position)."""

    kind: str  # 'binop' | 'compare' | 'constant' | 'delete'
    index: int
    slot: Any = None


def function_tree(prog: Program) -> ast.FunctionDef:
    """The program's definition, without the ``@program`` decorator (which registers)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(prog.fn)))
    fn = tree.body[0]
    fn.decorator_list = []
    return fn


def sites(fn: ast.FunctionDef) -> list[Site]:
    """Every place in ``fn`` a mutation can go, in ``ast.walk`` order."""
    out = []
    for k, node in enumerate(ast.walk(fn)):
        if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
            out.append(Site("binop", k))
        elif isinstance(node, ast.Compare):
            out += [Site("compare", k, j) for j, op in enumerate(node.ops)
                    if type(op) in ORDERING]
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            out.append(Site("constant", k))
        for field in BODIES:
            body = getattr(node, field, None)
            if isinstance(body, list) and len(body) > 1:
                out += [Site("delete", k, (field, j)) for j in range(len(body))]
    return out


def choices(node: ast.AST, site: Site) -> list:
    """The replacements a site allows, never the original."""
    if site.kind == "binop":
        return [op for op in ARITHMETIC if op is not type(node.op)]
    if site.kind == "compare":
        return [op for op in ORDERING if op is not type(node.ops[site.slot])]
    if site.kind == "constant":
        v = node.value
        return [v - 1, v + 1] if type(v) is int else [2.0 * v, -v]
    return [None]


def mutate(prog: Program, fn: ast.FunctionDef, site: Site, choice: Any
           ) -> tuple[ast.FunctionDef, str]:
    """A mutated copy of ``fn`` and a description of the edit, at its place in the
    program's file."""
    fn = copy.deepcopy(fn)
    node = next(itertools.islice(ast.walk(fn), site.index, None))
    if site.kind == "binop":
        what = f"{ast.unparse(node)}: {type(node.op).__name__} -> {choice.__name__}"
        node.op = choice()
    elif site.kind == "compare":
        what = f"{ast.unparse(node)}: {type(node.ops[site.slot]).__name__} -> {choice.__name__}"
        node.ops[site.slot] = choice()
    elif site.kind == "constant":
        what = f"constant {node.value!r} -> {choice!r}"
        node.value = choice
    else:
        field, j = site.slot
        node = getattr(node, field).pop(j)
        what = f"deleted `{ast.unparse(node).splitlines()[0]}`"
    file = inspect.getsourcefile(prog.fn)
    line = prog.fn.__code__.co_firstlineno + node.lineno - 1
    return ast.fix_missing_locations(fn), f"{file}:{line}:{node.col_offset}: {what}"


def define(prog: Program, fn: ast.FunctionDef) -> Callable:
    """Compile ``fn`` into a copy of the program's module globals (NumPy's ``empty``
    zeroed), with its source where ``linecache`` (and so pullback) can find it."""
    text = ast.unparse(fn) + "\n"
    name = f"<fuzz-{prog.fn.__name__}-{next(_files)}>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace = {k: ZEROED.get(id(v), v) for k, v in prog.fn.__globals__.items()}
    exec(compile(text, name, "exec"), namespace)
    return namespace[fn.name]


#: The programs that are module-level functions with somewhere to mutate.
PROGRAMS = {p.name: p for p in load() if not p.fn.__code__.co_freevars
            and sites(function_tree(p))}


# -- comparing results -----------------------------------------------------------------


def _zero_where(v: Any, bad: np.ndarray) -> Any:
    if isinstance(v, np.ndarray):
        return np.where(bad, 0, v).astype(v.dtype)
    return type(v)(0) if bad else v


def without_nonfinite(got: Any, want: Any) -> tuple[Any, Any]:
    """Both trees with every float position that is nan or inf on either side set to 0."""
    gl, gt = pb.tree_flatten(got)
    wl, wt = pb.tree_flatten(want)
    if gt != wt:
        return got, want
    gs, ws = [], []
    for g, w in zip(gl, wl, strict=True):
        ga, wa = np.asarray(g), np.asarray(w)
        if ga.dtype.kind == wa.dtype.kind == "f" and ga.shape == wa.shape:
            bad = ~(np.isfinite(ga) & np.isfinite(wa))
            g, w = _zero_where(g, bad), _zero_where(w, bad)
        gs.append(g)
        ws.append(w)
    return pb.tree_unflatten(gt, gs), pb.tree_unflatten(wt, ws)


def as_python_kinds(got: Any, want: Any) -> Any:
    """``got`` with NumPy scalars made Python numbers where ``want`` has a Python number of
    the same dtype.  A variable that holds a Python number on one run-time path and a NumPy
    scalar on another is carried as the NumPy scalar (a documented deviation: equal value,
    the type follows the path only in plain Python)."""
    gl, gt = pb.tree_flatten(got)
    wl, wt = pb.tree_flatten(want)
    if gt != wt:
        return got
    out = [type(w)(g) if type(w) in (bool, int, float) and isinstance(g, np.generic)
           and g.dtype == np.asarray(w).dtype else g for g, w in zip(gl, wl, strict=True)]
    return pb.tree_unflatten(gt, out)


def assert_agree(got: Any, want: Any, where: str) -> None:
    """``assert_same_tree``, except where a float is nan or inf on either side, and up to
    the Python/NumPy scalar kind of a value whose kind depends on the path taken."""
    try:
        assert_same_tree(got, want, where)
    except AssertionError:
        assert_same_tree(*without_nonfinite(as_python_kinds(got, want), want), where)


# -- the property ----------------------------------------------------------------------


def run(fn: Callable, args: tuple, seconds: float) -> tuple[Any, BaseException | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with time_limit(seconds):
                return fn(*args), None
        except Exception as e:
            return None, e


def public_class(e: BaseException) -> type:
    """The class a user would catch: NumPy's private exception classes (such as
    ``UFuncTypeError``) stand for their public base (``TypeError``)."""
    return next(c for c in type(e).__mro__ if not c.__module__.startswith("numpy._"))


def nudged(args: tuple) -> tuple:
    """The arguments with every float moved up by one ulp."""
    def up(x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            return np.asarray(np.nextafter(x, np.inf), x.dtype)
        if isinstance(x, np.floating):
            return type(x)(np.nextafter(x, np.inf))
        return math.nextafter(x, math.inf) if type(x) is float else x

    return pb.tree_map(up, args)


def ill_conditioned(fn: Callable, args: tuple, want: tuple) -> bool:
    """Whether plain Python's results move by more than the tolerance when the float
    arguments move by one ulp: then a different rounding in pullback may move them too
    (mutated programs are often chaotic)."""
    args = nudged(copy.deepcopy(args))
    try:
        again, raised = run(fn, args, PYTHON_SECONDS)
    except Timeout:
        return True
    if raised is not None:
        return True
    try:
        assert_agree((again, args), want, "nudged")
    except AssertionError:
        return True
    return False


def check(fn: Callable, prog: Program, case: int) -> None:
    """The property for one mutated program ``fn`` on the program's ``case``-th input."""
    args = prog.inputs[case](np.random.default_rng(case))
    theirs, mine = copy.deepcopy(args), copy.deepcopy(args)
    try:
        want, raised = run(fn, theirs, PYTHON_SECONDS)
    except Timeout:
        assume(False)
    assume(not isinstance(raised, RecursionError))
    # complex numbers (a negative float to a fractional power) are outside the language
    assume(not any(np.iscomplexobj(v) for v in pb.tree_leaves(want)))
    try:
        got, error = run(pb.jit(fn, static_argnames=prog.static), mine, PULLBACK_SECONDS)
    except Timeout:
        raise AssertionError(f"pb.jit took more than {PULLBACK_SECONDS} s") from None
    if isinstance(error, pb.InternalError):
        raise AssertionError("pullback failed inside (InternalError)") from error
    if isinstance(error, pb.CompileError):
        return
    if raised is not None:
        assert isinstance(error, public_class(raised)), (
            f"Python raised {type(raised).__name__}: {raised}\n"
            f"pullback {'returned ' + repr(got) if error is None else 'raised ' + repr(error)}")
        return
    if error is not None:
        raise AssertionError(f"Python returned {want!r}; pullback raised") from error
    try:
        assert_agree((got, mine), (want, theirs), "(result, arguments after the call)")
    except AssertionError:
        assume(not ill_conditioned(fn, args, (want, theirs)))
        raise


#: ``PULLBACK_FUZZ_EXAMPLES=3000 PULLBACK_FUZZ_SEED=1`` runs a longer campaign than CI's.
EXAMPLES = int(os.environ.get("PULLBACK_FUZZ_EXAMPLES", "60"))
SEED = os.environ.get("PULLBACK_FUZZ_SEED")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
          phases=[Phase.explicit, Phase.generate])
@given(st.data())
def test_mutated_program_agrees_or_is_refused(data: st.DataObject) -> None:
    prog = PROGRAMS[data.draw(st.sampled_from(sorted(PROGRAMS)), label="program")]
    case = data.draw(st.integers(0, len(prog.inputs) - 1), label="input")
    tree = function_tree(prog)
    site = data.draw(st.sampled_from(sites(tree)), label="site")
    node = next(itertools.islice(ast.walk(tree), site.index, None))
    choice = data.draw(st.sampled_from(choices(node, site)), label="choice")
    mutated, what = mutate(prog, tree, site, choice)
    note(f"{prog.name} input {case}, {what}:\n{ast.unparse(mutated)}")
    check(define(prog, mutated), prog, case)


if SEED is not None:
    test_mutated_program_agrees_or_is_refused = seed(int(SEED))(
        test_mutated_program_agrees_or_is_refused)
