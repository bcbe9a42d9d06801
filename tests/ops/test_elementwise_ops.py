"""Rule tests of every elementwise primitive, generated from the declarations in
``pullback/ops/elementwise.py``: for each op and dtype, the shape rule (``infer``) and the
reference semantics (``impl``, run through the IR and the interpreter) against NumPy —
values (NaN, infinities and signed zeros included), dtype, shape and weak-ness — over
shapes (), (0,), (3,), (2, 3) and 0-d operands splatted against arrays; and ShapeError
for the dtypes, shape pairs and dtype pairs an op rejects.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.op import Op
from pullback.ir.types import DTYPES, TensorType, type_of_value
from pullback.ops import elementwise as E


def _from_math(fn):
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x).astype(x.dtype)


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


try:
    import scipy.special as sc
except ImportError:  # the ops of scipy.special's functions run only where SciPy is
    sc = None

#: The ops of scipy.special's functions: SciPy's own functions are their reference.
SCIPY_UNARY = {} if sc is None else {
    "lgamma": (sc.gammaln, "f"), "erfinv": (sc.erfinv, "f"), "ndtri": (sc.ndtri, "f"),
    "i0e": (sc.i0e, "f"), "i1e": (sc.i1e, "f"),
}
SCIPY_BINARY = {} if sc is None else {
    "polygamma": (lambda n, x: sc.polygamma(n, x).astype(x.dtype), "f"),
}


#: What each primitive computes (its NumPy reference) and the dtype kinds it accepts.
UNARY = {
    "neg": (np.negative, "if"), "abs": (np.absolute, "if"), "sign": (np.sign, "if"),
    "floor": (np.floor, "f"), "ceil": (np.ceil, "f"), "round": (np.rint, "f"),
    "trunc": (np.trunc, "f"), "exp": (np.exp, "f"), "expm1": (np.expm1, "f"),
    "log": (np.log, "f"), "log1p": (np.log1p, "f"), "log2": (np.log2, "f"),
    "log10": (np.log10, "f"), "sqrt": (np.sqrt, "f"), "cbrt": (np.cbrt, "f"),
    "sin": (np.sin, "f"), "cos": (np.cos, "f"), "tan": (np.tan, "f"),
    "asin": (np.arcsin, "f"), "acos": (np.arccos, "f"), "atan": (np.arctan, "f"),
    "sinh": (np.sinh, "f"), "cosh": (np.cosh, "f"), "tanh": (np.tanh, "f"),
    "asinh": (np.arcsinh, "f"), "acosh": (np.arccosh, "f"), "atanh": (np.arctanh, "f"),
    "erf": (_from_math(math.erf), "f"), "erfc": (_from_math(math.erfc), "f"),
    "not": (_not, "bi"), **SCIPY_UNARY,
}
BINARY = {
    "add": (np.add, "if"), "sub": (np.subtract, "if"), "mul": (np.multiply, "if"),
    "div": (np.true_divide, "f"), "floordiv": (np.floor_divide, "if"),
    "mod": (np.remainder, "if"), "pow": (np.power, "if"), "max": (np.maximum, "bif"),
    "min": (np.minimum, "bif"), "atan2": (np.arctan2, "f"), "and": (np.bitwise_and, "bi"),
    "or": (np.bitwise_or, "bi"), "xor": (np.bitwise_xor, "bi"), "eq": (np.equal, "bif"),
    "ne": (np.not_equal, "bif"), "lt": (np.less, "bif"), "le": (np.less_equal, "bif"),
    "gt": (np.greater, "bif"), "ge": (np.greater_equal, "bif"), **SCIPY_BINARY,
}
DECLARED = {v.name: v for v in vars(E).values() if isinstance(v, Op)}
SHAPES = [(), (0,), (3,), (2, 3)]
SAMPLES = {
    "b": np.array([True, False, True, True, False, False]),
    "i": np.array([-7, 0, 3, 1, -1, 12]),
    "f": np.array([-1.5, -0.0, 0.0, 0.5, 2.75, np.nan, np.inf, -np.inf, 1e-300, -3.25]),
}
WEAK = {"b": True, "i": 3, "f": 0.75}


def test_every_declared_elementwise_op_is_covered():
    untested = {"lgamma", "erfinv", "ndtri", "i0e", "i1e", "polygamma"} if sc is None else set()
    assert set(DECLARED) - untested == set(UNARY) | set(BINARY) | {"select", "convert"}


def values(dt, shape, seed=0, nonnegative=False):
    base = np.roll(SAMPLES[dt.kind], seed)
    if nonnegative and dt.kind == "i":
        base = np.abs(base) % 4
    return np.resize(base, shape).astype(dt.np)


def reference(fn, *xs):
    with np.errstate(all="ignore"):
        return np.asarray(fn(*xs))


def assert_same(got, want, expected_type):
    assert got.dtype == want.dtype == expected_type.dtype.np
    assert got.shape == want.shape == expected_type.shape
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def check_op(op, fn, *inputs):
    """infer, impl (through the IR) and NumPy agree on ``inputs``."""
    types = [type_of_value(x) for x in inputs]
    (t,) = infer(op, *types)
    (got,) = run_op(op, *inputs)
    want = reference(fn, *(np.asarray(x) for x in inputs))
    assert_same(got, want, t)
    assert t.weak == all(u.weak for u in types)
    return t


def accepts(kinds, dt):
    return dt.kind in kinds


def op_dtypes(table):
    return [(name, dt) for name in table for dt in DTYPES]


@pytest.mark.parametrize("name,dt", op_dtypes(UNARY), ids=str)
def test_unary(name, dt):
    op, (fn, kinds) = DECLARED[name], UNARY[name]
    for shape in SHAPES:
        x = values(dt, shape)
        if not accepts(kinds, dt):
            with pytest.raises(ShapeError, match=name):
                infer(op, type_of_value(x))
            continue
        check_op(op, fn, x)
    if accepts(kinds, dt) and dt.np == type_of_value(WEAK[dt.kind]).dtype.np:
        assert check_op(op, fn, WEAK[dt.kind]).weak


def binary_cases(dt, exponent):
    """Operand pairs: equal shapes, and a 0-d operand splatted on either side."""
    for shape in SHAPES:
        yield values(dt, shape), values(dt, shape, 3, exponent)
        yield values(dt, shape), values(dt, (), 5, exponent)
        yield values(dt, (), 2), values(dt, shape, 1, exponent)


@pytest.mark.parametrize("name,dt", op_dtypes(BINARY), ids=str)
def test_binary(name, dt):
    op, (fn, kinds) = DECLARED[name], BINARY[name]
    for x, y in binary_cases(dt, exponent=name == "pow"):
        if not accepts(kinds, dt):
            with pytest.raises(ShapeError, match=name):
                infer(op, type_of_value(x), type_of_value(y))
            continue
        check_op(op, fn, x, y)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_weak_operands(name):
    """A result is weak only when every operand is; a weak operand meets a strong one."""
    op, (fn, kinds) = DECLARED[name], BINARY[name]
    kind = kinds[-1]
    a, b = WEAK[kind], (2 if kind == "i" else WEAK[kind])
    assert check_op(op, fn, a, b).weak
    strong = np.asarray(b, type_of_value(b).dtype.np)
    assert not check_op(op, fn, a, strong).weak
    assert not check_op(op, fn, strong, a).weak


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_rejects_mixed_shapes_and_dtypes(name):
    op, (_, kinds) = DECLARED[name], BINARY[name]
    dt = next(d for d in DTYPES if d.kind == kinds[-1])
    with pytest.raises(ShapeError, match=r"one shape"):
        infer(op, TensorType((3,), dt), TensorType((2, 3), dt))
    with pytest.raises(ShapeError, match=r"one shape"):
        infer(op, TensorType((2, 1), dt), TensorType((2, 3), dt))
    other = next(d for d in DTYPES if d.kind == dt.kind and d != dt)
    with pytest.raises(ShapeError, match=r"one dtype"):
        infer(op, TensorType((3,), dt), TensorType((3,), other))


def _where(p, a, b):
    return np.where(p, a, b)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_select(dt):
    op = DECLARED["select"]
    bools = next(d for d in DTYPES if d.is_bool)
    for shape in SHAPES:
        p, a, b = values(bools, shape), values(dt, shape), values(dt, shape, 4)
        check_op(op, _where, p, a, b)
        check_op(op, _where, values(bools, ()), a, b)
        check_op(op, _where, p, values(dt, ()), b)
        check_op(op, _where, p, a, values(dt, (), 1))


@pytest.mark.parametrize("a,b", [(True, False), (3, -4), (0.5, -0.0)])
def test_select_weak(a, b):
    op = DECLARED["select"]
    assert check_op(op, _where, False, a, b).weak
    assert not check_op(op, _where, True, a, np.asarray(b)).weak


def test_select_rejects():
    op = DECLARED["select"]
    f32, f64 = (d for d in DTYPES if d.name in ("float32", "float64"))
    i32 = next(d for d in DTYPES if d.name == "int32")
    with pytest.raises(ShapeError, match="boolean predicate"):
        infer(op, TensorType((3,), i32), TensorType((3,), f32), TensorType((3,), f32))
    with pytest.raises(ShapeError, match="one dtype"):
        infer(op, TensorType((3,), DTYPES[0]), TensorType((3,), f32), TensorType((3,), f64))
    with pytest.raises(ShapeError, match="one shape"):
        infer(op, TensorType((2,), DTYPES[0]), TensorType((3,), f32), TensorType((3,), f32))


@pytest.mark.parametrize("src,dst", [(s, d) for s in DTYPES for d in DTYPES], ids=str)
def test_convert(src, dst):
    op = DECLARED["convert"]
    for shape in SHAPES:
        x = values(src, shape)
        (t,) = infer(op, type_of_value(x), dtype=dst, weak=False)
        (got,) = run_op(op, x, dtype=dst, weak=False)
        assert_same(got, reference(lambda v: v.astype(dst.np), x), t)
    (t,) = infer(op, TensorType((), src), dtype=dst, weak=True)
    assert t == TensorType((), dst, True)
    with pytest.raises(ShapeError, match="0-d"):
        infer(op, TensorType((3,), src), dtype=dst, weak=True)
