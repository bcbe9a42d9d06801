"""Structured control flow (``cond``, ``while_loop``, ``for_loop``, ``call``) and ordered
effects (``debug_print``, ``check``).

Control ops own their bodies as ``Block`` params; their ``impl`` receives ``run``, the
evaluator of a block, from the backend.  Effects have no outputs; passes never reorder
or drop them.
"""

from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from ..errors import ShapeError
from ..ir.core import Block
from ..ir.op import Op
from ..ir.types import TensorType, bool_


def _show(types) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def _expect_params(op: str, region: str, blk: Block, types) -> None:
    if list(blk.in_types) != list(types):
        raise ShapeError(
            f"{op}: block '{region}' takes {_show(blk.in_types)} but is given {_show(types)}"
        )


def _expect_results(op: str, region: str, blk: Block, types) -> None:
    if list(blk.out_types) != list(types):
        raise ShapeError(
            f"{op}: block '{region}' returns {_show(blk.out_types)}, expected {_show(types)}"
        )


def _is_bool_scalar(t) -> bool:
    return isinstance(t, TensorType) and t.shape == () and t.dtype == bool_


# -- cond ---------------------------------------------------------------------------


def _cond_infer(ts, then, orelse):
    pred, *xs = ts
    if not _is_bool_scalar(pred):
        raise ShapeError(f"cond: predicate must be a 0-d bool, got {pred}")
    _expect_params("cond", "then", then, xs)
    _expect_params("cond", "orelse", orelse, xs)
    _expect_results("cond", "orelse", orelse, then.out_types)
    return then.out_types


def _cond_impl(pred, *xs, then, orelse, run):
    return run(then if bool(pred) else orelse, *xs)


cond = Op(
    "cond",
    infer=_cond_infer,
    impl=_cond_impl,
    params={"then": "block", "orelse": "block"},
    multiple_results=True,
    fusion="control",
)


# -- loops --------------------------------------------------------------------------

#: Loops staged while this is set carry ``checkpoint=k``: reverse mode then keeps a
#: snapshot of the carried values every k iterations instead of every residual, and
#: recomputes the rest during the backward pass.
LOOP_CHECKPOINT: ContextVar[int] = ContextVar("pullback_loop_checkpoint", default=0)


def loop_options() -> dict:
    """The optional params of a loop staged now."""
    every = LOOP_CHECKPOINT.get()
    return {"checkpoint": every} if every else {}


def _while_infer(ts, cond, body, checkpoint=0):
    _expect_params("while_loop", "cond", cond, ts)
    if len(cond.results) != 1 or not _is_bool_scalar(cond.results[0].type):
        raise ShapeError(f"while_loop: block 'cond' must return one 0-d bool, got "
                         f"{_show(cond.out_types)}")
    _expect_params("while_loop", "body", body, ts)
    _expect_results("while_loop", "body", body, ts)
    return ts


def _while_impl(*carry, cond, body, run, checkpoint=0):
    while bool(run(cond, *carry)[0]):
        carry = run(body, *carry)
    return list(carry)


while_loop = Op(
    "while_loop",
    infer=_while_infer,
    impl=_while_impl,
    params={"cond": "block", "body": "block", "checkpoint": "int"},
    multiple_results=True,
    fusion="control",
    optional=("checkpoint",),
)


# -- for_loop -----------------------------------------------------------------------


def _for_infer(ts, body, checkpoint=0, adjoint=False):
    lo, hi, step, *carry = ts
    bounds = (lo, hi, step)
    if any(not isinstance(t, TensorType) or t.shape != () or not t.dtype.is_int for t in bounds):
        raise ShapeError(f"for_loop: bounds must be 0-d integers, got {_show(bounds)}")
    if len({t.dtype for t in bounds}) != 1:
        raise ShapeError(f"for_loop: bounds must share one dtype, got {_show(bounds)}")
    if not body.params:
        raise ShapeError("for_loop: block 'body' must take the loop index first")
    index = body.params[0].type
    if not (isinstance(index, TensorType) and index.shape == () and index.dtype == lo.dtype):
        raise ShapeError(f"for_loop: index parameter is {index}, expected {lo.dtype}[]")
    _expect_params("for_loop", "body", Block(body.params[1:]), carry)
    _expect_results("for_loop", "body", body, carry)
    return carry


def _for_impl(lo, hi, step, *carry, body, run, checkpoint=0, adjoint=False):
    if int(step) == 0:
        raise ValueError("range() arg 3 must not be zero")
    index_dtype = body.params[0].type.dtype.np
    for i in range(int(lo), int(hi), int(step)):
        carry = run(body, np.asarray(i, index_dtype), *carry)
    return list(carry)


for_loop = Op(
    "for_loop",
    infer=_for_infer,
    impl=_for_impl,
    # adjoint: a reverse sweep's loop, all of whose results are derivatives (its sums
    # may be reordered: ``backends/c/loops/stencils.py``)
    params={"body": "block", "checkpoint": "int", "adjoint": "bool"},
    multiple_results=True,
    fusion="control",
    optional=("checkpoint", "adjoint"),
)


# -- call ---------------------------------------------------------------------------


def _call_infer(ts, callee):
    if list(callee.in_types) != list(ts):
        raise ShapeError(
            f"call @{callee.name}: takes {_show(callee.in_types)} but is given {_show(ts)}"
        )
    return callee.out_types


def _call_impl(*xs, callee, run):
    return run(callee.block, *xs)


call = Op(
    "call",
    infer=_call_infer,
    impl=_call_impl,
    params={"callee": "func"},
    multiple_results=True,
    fusion="control",
)


# -- effects ------------------------------------------------------------------------


def _print_infer(ts, fmt):
    if any(not isinstance(t, TensorType) for t in ts):
        raise ShapeError(f"debug_print: can only print tensors, got {_show(ts)}")
    return []


def _printable(x: np.ndarray):
    return x[()] if x.ndim == 0 else x


def _print_impl(*xs, fmt):
    print(fmt.format(*(_printable(x) for x in xs)), end="", flush=True)
    return []


debug_print = Op(
    "debug_print",
    infer=_print_infer,
    impl=_print_impl,
    params={"fmt": "str"},
    multiple_results=True,
    fusion="effect",
    effect=True,
)

#: Exceptions a failed ``check`` may raise (what plain Python would have raised).
CHECK_EXCEPTIONS = {
    e.__name__: e
    for e in (
        AssertionError, IndexError, ValueError, ZeroDivisionError, OverflowError, RuntimeError,
        TypeError, NameError, UnboundLocalError, KeyError, AttributeError,
        np.linalg.LinAlgError,
    )
}


def _check_infer(ts, exc, fmt):
    if not ts or not _is_bool_scalar(ts[0]):
        raise ShapeError(f"check: first operand must be a 0-d bool, got {_show(ts)}")
    if exc not in CHECK_EXCEPTIONS:
        raise ShapeError(f"check: cannot raise {exc!r}; one of {sorted(CHECK_EXCEPTIONS)}")
    return []


def _check_impl(ok, *xs, exc, fmt):
    if not bool(ok):
        raise CHECK_EXCEPTIONS[exc](fmt.format(*(_printable(x) for x in xs)))
    return []


check = Op(
    "check",
    infer=_check_infer,
    impl=_check_impl,
    params={"exc": "str", "fmt": "str"},
    multiple_results=True,
    fusion="effect",
    effect=True,
)
