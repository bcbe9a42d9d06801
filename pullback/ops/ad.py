"""Ops that steer differentiation: ``stop_gradient``, ``checkpoint``, ``custom_jvp`` and
``custom_vjp``.

Each evaluates like the function it wraps; only the transforms treat them differently.
The region ops own closed blocks (staged from the user's functions with every value
they read as an operand), so the blocks take the op's operands as parameters:

* ``checkpoint(*xs){body}`` — reverse mode saves only ``xs`` and recomputes ``body``'s
  forward pass during the backward pass;
* ``custom_jvp(*xs){primal, rule}`` — ``rule(*xs, *tangents of float xs)`` returns the
  results and their tangents;
* ``custom_vjp(*xs){primal, fwd, bwd}`` — ``fwd(*xs)`` returns the results and then
  residuals; ``bwd(*residuals, *cotangents of float results)`` returns cotangents of the
  float ``xs``.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir.op import Op
from .batching import elementwise
from .derivs import zero_jvp, zero_vjp

stop_gradient = Op(
    "stop_gradient",
    infer=lambda ts: ts[0],
    arity=1,
    impl=lambda x: x.copy(),
    fusion="elementwise",
    jvp=zero_jvp,
    vjp=zero_vjp,
    batch=elementwise("stop_gradient"),
)


def _takes_operands(op: str, region: str, block, ts) -> None:
    if list(block.in_types) != list(ts):
        shown = ", ".join(str(t) for t in ts)
        raise ShapeError(f"{op}: block '{region}' must take the operands ({shown})")


def _checkpoint_infer(ts, body):
    _takes_operands("checkpoint", "body", body, ts)
    return body.out_types


checkpoint = Op(
    "checkpoint",
    infer=_checkpoint_infer,
    impl=lambda *xs, body, run: run(body, *xs),
    params={"body": "block"},
    multiple_results=True,
    fusion="control",
)


def _custom_jvp_infer(ts, primal, rule):
    _takes_operands("custom_jvp", "primal", primal, ts)
    return primal.out_types


custom_jvp = Op(
    "custom_jvp",
    infer=_custom_jvp_infer,
    impl=lambda *xs, primal, rule, run: run(primal, *xs),
    params={"primal": "block", "rule": "block"},
    multiple_results=True,
    fusion="control",
)


def _custom_vjp_infer(ts, primal, fwd, bwd):
    _takes_operands("custom_vjp", "primal", primal, ts)
    _takes_operands("custom_vjp", "fwd", fwd, ts)
    return primal.out_types


custom_vjp = Op(
    "custom_vjp",
    infer=_custom_vjp_infer,
    impl=lambda *xs, primal, fwd, bwd, run: run(primal, *xs),
    params={"primal": "block", "fwd": "block", "bwd": "block"},
    multiple_results=True,
    fusion="control",
)
