"""Build the IR of a small model with the builder API, print it, run it on the interpreter.

The model is a two-layer perceptron with a mean-squared-error loss, followed by a
data-dependent ``while`` loop (Newton's method for the square root of the loss), so the
IR shows NumPy functions lowered to primitives and structured control flow.  Until the
frontend lands (``pb.jit``), this is how IR is made: NumPy functions are looked up in the
mapping registry by the NumPy object itself and called on IR values.
"""

import numpy as np

from pullback.backends import interp
from pullback.ir.builder import Builder, current
from pullback.ir.printer import format_func
from pullback.ir.types import TensorType, float32
from pullback.ir.verify import verify
from pullback.numpy_api import CALLABLES as NP
from pullback.numpy_api import OPERATORS as OP
from pullback.ops import control

BATCH, IN, HIDDEN, OUT = 16, 4, 8, 2


def newton_sqrt(a):
    """sqrt(a) by Newton's method: iterate until the update is below a tolerance."""
    b = current()
    t = TensorType((), float32)

    def not_converged(x, prev):
        return OP["gt"](NP[np.abs](OP["sub"](x, prev)), np.float32(1e-6))

    def step(x, prev):
        return [OP["mul"](np.float32(0.5), OP["add"](x, OP["truediv"](a, x))), x]

    start = OP["add"](a, np.float32(1.0))
    cond = b.block([t, t], not_converged)
    body = b.block([t, t], step)
    return control.while_loop(start, np.float32(0.0), cond=cond, body=body)[0]


def build_model():
    with Builder() as b:
        x = b.param(TensorType((BATCH, IN), float32))
        y = b.param(TensorType((BATCH, OUT), float32))
        w1 = b.param(TensorType((IN, HIDDEN), float32))
        b1 = b.param(TensorType((HIDDEN,), float32))
        w2 = b.param(TensorType((HIDDEN, OUT), float32))
        h = NP[np.tanh](OP["add"](NP[np.matmul](x, w1), b1))
        pred = OP["matmul"](h, w2)
        loss = NP[np.mean](NP[np.square](OP["sub"](pred, y)))
        rmse = newton_sqrt(loss)
        return b.finish("mlp_rmse", [rmse, NP[np.argmax](pred, axis=1)])


def reference(x, y, w1, b1, w2):
    pred = np.tanh(x @ w1 + b1) @ w2
    return np.sqrt(np.mean(np.square(pred - y))), np.argmax(pred, axis=1)


def main() -> None:
    func = build_model()
    verify(func)
    print(format_func(func))
    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal((BATCH, IN)).astype(np.float32),
        rng.standard_normal((BATCH, OUT)).astype(np.float32),
        rng.standard_normal((IN, HIDDEN)).astype(np.float32),
        rng.standard_normal(HIDDEN).astype(np.float32),
        rng.standard_normal((HIDDEN, OUT)).astype(np.float32),
    ]
    rmse, labels = interp.run(func, *args)
    want_rmse, want_labels = reference(*args)
    print(f"interpreter: rmse={rmse:.6f} labels={labels.tolist()}")
    print(f"numpy:       rmse={want_rmse:.6f} labels={want_labels.tolist()}")
    np.testing.assert_allclose(rmse, want_rmse, rtol=1e-5)
    np.testing.assert_array_equal(labels, want_labels)
    print("interpreter and NumPy agree")


if __name__ == "__main__":
    main()
