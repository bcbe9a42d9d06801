"""The derivative transforms users call: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``,
``jacfwd``, ``jacrev``, ``hessian``, ``custom_vjp``, ``custom_jvp``, ``stop_gradient``,
``checkpoint``, ``checkpoint_loops``.

``transform`` holds what they share (compiled alone from plain Python, staged in place
from staged code), ``arguments`` how arguments become operands and derivatives come
back in their structure; then one module per kind of transform: ``gradients``,
``forward`` (jvp), ``reverse`` (vjp), ``jacobians`` (with ``lanes``, the one-pass forward
mode they and ``grad`` may choose), ``custom`` (user rules) and ``steering``.
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
