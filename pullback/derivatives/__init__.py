"""The derivative transforms users call: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``,
``jacfwd``, ``jacrev``, ``hessian``, ``custom_vjp``, ``custom_jvp``, ``stop_gradient``,
``checkpoint``, ``checkpoint_loops``.

One module per concern:

* ``transform``: what every transform is (compiled alone from plain Python, staged in
  place from staged code) and how it stages the function it transforms;
* ``arguments``: how arguments become operands, and derivatives come back in their
  structure;
* ``gradients`` (grad, value_and_grad), ``forward`` (jvp), ``reverse`` (vjp) and
  ``jacobians`` (jacfwd, jacrev, hessian); ``lanes``: forward mode with one lane per
  input scalar, which ``grad`` and ``jacfwd`` choose where it is cheaper;
* ``custom`` (user-written rules) and ``steering`` (stop_gradient, checkpoints).
"""

from .custom import custom_jvp, custom_vjp
from .forward import jvp
from .gradients import grad, value_and_grad
from .jacobians import hessian, jacfwd, jacrev
from .reverse import vjp
from .steering import checkpoint, checkpoint_loops, stop_gradient

__all__ = [
    "checkpoint", "checkpoint_loops", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd",
    "jacrev", "jvp", "stop_gradient", "value_and_grad", "vjp",
]
