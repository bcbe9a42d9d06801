"""The derivative transforms users call (being split into one module per concern)."""

from .custom import (  # noqa: F401
    FORWARD_JACOBIAN,
    checkpoint,
    checkpoint_loops,
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    stop_gradient,
    value_and_grad,
    vjp,
)
