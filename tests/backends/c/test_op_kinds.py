"""The C backend's sets of ops come from the ops' declarations (fusion kind, arity), and
every elementwise op either has C code — compiled here in every dtype it accepts and
checked against the interpreter — or is deliberately lowered by a handler of its own."""

from __future__ import annotations

import numpy as np
import pytest

from pullback.backends import interp
from pullback.backends.c import compile_func
from pullback.backends.c.build import compiler
from pullback.backends.c.plan import fusion
from pullback.errors import ShapeError
from pullback.ir.builder import Builder
from pullback.ir.op import OPS
from pullback.ir.types import DTYPES, TensorType

SHAPE = (7,)


def _declared(kind: str) -> set[str]:
    return {name for name, op in OPS.items() if op.fusion == kind}


def test_every_elementwise_op_is_computed_or_left_to_its_own_handler():
    assert fusion.UNARY | fusion.BINARY | fusion.OWN_RULES | fusion.GENERATORS == \
        _declared("elementwise")
    assert fusion.OWN_RULES | fusion.GENERATORS <= _declared("elementwise")
    assert all(OPS[n].arity == 1 for n in fusion.UNARY)
    assert all(OPS[n].arity == 2 for n in fusion.BINARY)
    assert fusion.POINTWISE == fusion.UNARY | fusion.BINARY | fusion.OWN_RULES


def test_reductions_over_axes_are_those_fused():
    """argmax and argmin reduce along one axis and have handlers of their own."""
    over_axes = {n for n in _declared("reduction") if "axes" in OPS[n].params}
    assert set(fusion.REDUCE) == over_axes
    assert _declared("reduction") - over_axes == {"argmax", "argmin"}


def test_every_op_declares_the_operands_it_takes():
    with Builder() as b:
        x = b.param(TensorType(SHAPE, DTYPES[-1]))
        with pytest.raises(ShapeError, match="takes 2 operands, got 1"):
            b.emit(OPS["add"], [x], {})


def _operands(dt, k: int, rng) -> np.ndarray:
    """Values every op accepts without a fault: small positive integers, fractions."""
    if dt.is_bool:
        return rng.random(SHAPE) < 0.5
    if dt.is_int:
        return rng.integers(1, 5, SHAPE).astype(dt.np)
    return (rng.random(SHAPE) * 0.8 + 0.1 + k).astype(dt.np)


@pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")
def test_unary_and_binary_ops_compile_in_every_dtype_they_accept():
    rng = np.random.default_rng(0)
    args, labels = [], []
    with Builder() as b:
        outs = []
        for name in sorted(fusion.UNARY | fusion.BINARY):
            op = OPS[name]
            for dt in DTYPES:
                types = [TensorType(SHAPE, dt)] * op.arity
                try:
                    op.infer_types(types, {})
                except ShapeError:
                    continue
                args += [_operands(dt, k, rng) for k in range(op.arity)]
                outs += b.emit(op, [b.param(t) for t in types], {})
                labels.append(f"{name} {dt.name}")
        func = b.finish("every_op", outs)
    assert len(labels) > 100
    got = compile_func(func)(*args)
    want = interp.run(func, *args)
    for g, w, where in zip(got, want, labels, strict=True):
        assert g.dtype == w.dtype, where
        tol = 1e-5 if g.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=where)
