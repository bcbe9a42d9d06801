"""What the pass tests share: golden IR texts in and out, purity, the verifier, and
results that are equal bit for bit on the interpreter before and after."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pullback.backends import interp
from pullback.ir.core import Func
from pullback.ir.parser import parse_func
from pullback.ir.printer import format_func
from pullback.ir.types import TensorType
from pullback.ir.verify import verify


def golden(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def count_eqns(func: Func) -> int:
    """Equations of ``func`` and of every function it calls, nested blocks included."""
    return sum(1 for f in (func, *func.callees()) for _ in f.block.walk())


def sample_args(func: Func, seed: int = 0) -> list[np.ndarray]:
    """Random arguments of ``func``'s parameter types: normal floats, integers in
    [-3, 6), random booleans."""
    rng = np.random.default_rng(seed)
    args = []
    for t in func.in_types:
        assert isinstance(t, TensorType), f"cannot sample a {t}"
        if t.dtype.is_float:
            x = rng.standard_normal(t.shape)
        elif t.dtype.is_int:
            x = rng.integers(-3, 6, t.shape)
        else:
            x = rng.random(t.shape) < 0.5
        args.append(np.asarray(x, t.dtype.np))
    return args


def outcome(func: Func, args: Sequence[Any]) -> list | BaseException:
    """``func``'s results on the interpreter, or the exception it raises."""
    try:
        return interp.run(func, *copy.deepcopy(list(args)))
    except Exception as e:  # compared with what the other side raises
        return e


def assert_same_outcome(got: Func, want: Func, args: Sequence[Any], where: str = "") -> None:
    """Both raise the same exception, or return results of one dtype and shape that are
    equal bit for bit (the passes never reassociate arithmetic)."""
    g, w = outcome(got, args), outcome(want, args)
    if isinstance(w, BaseException) or isinstance(g, BaseException):
        assert type(g) is type(w) and str(g) == str(w), f"{where}: {g!r} != {w!r}"
        return
    assert len(g) == len(w), where
    for k, (a, b) in enumerate(zip(g, w, strict=True)):
        at = f"{where} result {k}"
        assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{at}: {a.dtype}{a.shape}"
        assert a.tobytes() == b.tobytes(), f"{at}: {a!r} != {b!r}"


def check_pass(run: Callable[[Func], Func], source: str, want: str,
               args: Sequence[Any] | None = None) -> Func:
    """Parse ``source``, run the pass: the result verifies, prints as ``want``, computes
    what ``source`` computes (on ``args``, random ones by default), and ``source``'s
    function is unchanged."""
    func = parse_func(golden(source))
    before = format_func(func)
    out = run(func)
    verify(out)
    assert format_func(func) == before, "the pass changed its input"
    got = format_func(out)
    assert got == golden(want), f"the pass gives:\n{got}"
    assert_same_outcome(out, func, sample_args(func) if args is None else args)
    return out
