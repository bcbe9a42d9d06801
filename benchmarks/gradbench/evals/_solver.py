"""Gradient descent with an adaptive step, and forward/reverse gradient builders.

Shared by ``saddle`` and ``particle``, whose evals ask for an argmin whose objective
itself contains AD (nested differentiation). Functions take the point first and any
other run-time values after it, explicitly, so an outer derivative flows through them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import pullback as pb

Fn = Callable[..., np.ndarray]


# The gradient builders take f as an argument rather than closing over it: pullback's
# stager keys a call by its code and argument shapes, not by a closure's captured
# values, so nested calls of one closure made for two different f would be mistaken for
# recursion.

def grad_reverse(f: Fn, x: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    """df/dx at (x, *rest) by reverse mode."""
    return pb.grad(f, argnums=0)(x, *rest)


def grad_forward(f: Fn, x: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    """df/dx at (x, *rest) by forward mode, one jvp per coordinate of x."""
    n = x.shape[0]
    basis = np.eye(n)
    zeros = tuple(np.zeros_like(r) for r in rest)
    cols = [pb.jvp(f, (x, *rest), (basis[i], *zeros))[1] for i in range(n)]
    return np.stack(cols)


def argmin(f: Fn, grad: Callable[..., np.ndarray], x: np.ndarray,
           *rest: np.ndarray) -> np.ndarray:
    """Minimise f(., *rest) from x by gradient descent.

    The step starts at 1e-5, doubles after 10 accepted steps in a row and halves on a
    step that does not decrease f; it stops when the gradient or the step falls to 1e-5.
    """
    fx = f(x, *rest)
    gx = grad(f, x, *rest)
    eta = 1e-5
    accepted = 0
    go = True
    while go:
        if np.sqrt(np.sum(gx * gx)) <= 1e-5:
            go = False
        elif accepted == 10:
            eta = 2.0 * eta
            accepted = 0
        else:
            x_new = x - eta * gx
            if np.sqrt(np.sum((x - x_new) * (x - x_new))) <= 1e-5:
                go = False
            else:
                f_new = f(x_new, *rest)
                if f_new < fx:
                    x = x_new
                    fx = f_new
                    gx = grad(f, x_new, *rest)
                    accepted = accepted + 1
                else:
                    eta = eta / 2.0
                    accepted = 0
    return x


def argmax(f: Fn, grad: Callable[..., np.ndarray], x: np.ndarray,
           *rest: np.ndarray) -> np.ndarray:
    """Maximise f(., *rest) from x (the argmin of -f)."""
    def neg(y: np.ndarray, *r: np.ndarray) -> np.ndarray:
        return -f(y, *r)
    return argmin(neg, grad, x, *rest)
