"""The interpreter checks its inputs and what each op's impl returns."""

import numpy as np
import pytest

from pullback.backends import interp
from pullback.ir.builder import Builder, build_func
from pullback.ir.core import Module
from pullback.ir.op import OPS, Op
from pullback.ir.types import TensorType, float32, float64, int64
from pullback.ops import elementwise as E

F32 = TensorType((2,), float32)


def test_arguments_are_checked_against_the_signature():
    f = build_func("f", [F32], lambda x: E.neg(x))
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        interp.run(f, np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="shape"):
        interp.run(f, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="dtype"):
        interp.run(f, np.ones(2, np.int64))
    with pytest.raises(TypeError, match="dtype"):
        interp.run(f, np.ones(2))
    g = build_func("g", [TensorType((), float32)], lambda x: E.neg(x))
    assert interp.run(g, 1.5)[0].dtype == np.float32  # Python scalars take the param's dtype


def test_an_impl_that_breaks_its_shape_rule_is_caught():
    liar = Op("test_liar", infer=lambda ts: ts[0], impl=lambda x: x.astype(np.float64))
    try:
        with Builder() as b:
            x = b.param(F32)
            f = b.finish("f", b.emit(liar, [x]))
        with pytest.raises(TypeError, match="test_liar: produced float64"):
            interp.run(f, np.ones(2, np.float32))
    finally:
        del OPS["test_liar"]


def test_modules_run_their_entry_function():
    g = build_func("g", [TensorType((), int64)], lambda x: E.mul(x, x))
    m = Module([build_func("main", [TensorType((), float64)], lambda x: E.exp(x)), g])
    assert interp.run(m, 0.0)[0] == 1.0
    assert m.main.name == "main"
