"""Dtypes, types, NumPy 2 promotion (NEP 50 weak Python scalars) and broadcasting,
compared with what NumPy itself does."""

import itertools

import numpy as np
import pytest

from pullback.errors import ShapeError, UnsupportedError
from pullback.ir import types as T
from pullback.ir.types import (
    DTYPES,
    StackType,
    TensorType,
    broadcast_shapes,
    promote_types,
    result_type,
    type_of_value,
)

PYTHON_SCALARS = [True, 3, 2.5]
# An operand: ("strong", DType) or ("weak", Python scalar).
OPERANDS = [("strong", d) for d in DTYPES] + [("weak", v) for v in PYTHON_SCALARS]


def _ir_type(operand) -> TensorType:
    kind, x = operand
    return TensorType((), x) if kind == "strong" else type_of_value(x)


def _np_arg(operand):
    kind, x = operand
    return x.np if kind == "strong" else x


@pytest.mark.parametrize("a", DTYPES, ids=str)
@pytest.mark.parametrize("b", DTYPES, ids=str)
def test_promote_types_is_numpys(a, b):
    assert promote_types(a, b).np == np.promote_types(a.np, b.np)


@pytest.mark.parametrize("operands", [
    c for n in (1, 2, 3) for c in itertools.product(OPERANDS, repeat=n)
    if any(kind == "strong" for kind, _ in c)
], ids=lambda c: "-".join(str(x) for _, x in c))
def test_result_type_with_a_strong_operand_is_numpys(operands):
    got = result_type(*map(_ir_type, operands))
    assert not got.weak
    assert got.dtype.np == np.result_type(*map(_np_arg, operands))


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("scalar", PYTHON_SCALARS, ids=repr)
@pytest.mark.parametrize("shape", [(), (3,), (0,), (2, 3)], ids=str)
def test_result_type_matches_numpy_arithmetic(dt, scalar, shape):
    """``array op python_scalar`` computes in the dtype result_type gives (NEP 50)."""
    arr = np.ones(shape, dt.np)
    want = result_type(TensorType((), dt), type_of_value(scalar)).dtype.np
    with np.errstate(all="ignore"):
        assert (arr * scalar).dtype == want
        assert (scalar * arr).dtype == want
        assert np.maximum(arr, scalar).dtype == want


@pytest.mark.parametrize("a", PYTHON_SCALARS, ids=repr)
@pytest.mark.parametrize("b", PYTHON_SCALARS, ids=repr)
def test_result_type_of_only_weak_operands_follows_python(a, b):
    got = result_type(type_of_value(a), type_of_value(b))
    assert got.weak and got.shape == ()
    # Python arithmetic on two bools gives an int; the op-agnostic promotion keeps bool.
    want = bool if type(a) is type(b) is bool else type(a * b)
    assert got == type_of_value(want(1))


@pytest.mark.parametrize("value, want", [
    (True, "~bool[]"), (0, "~i64[]"), (-2.5, "~f64[]"),
    (np.float32(1), "f32[]"), (np.int32(1), "i32[]"), (np.bool_(False), "bool[]"),
    (np.zeros((2, 0), np.int64), "i64[2,0]"), (np.ones(3), "f64[3]"),
])
def test_type_of_value(value, want):
    assert str(type_of_value(value)) == want


@pytest.mark.parametrize("x, want", [
    ("f32", T.float32), ("float64", T.float64), ("bool", T.bool_), (bool, T.bool_),
    (int, T.int64), (float, T.float64), (np.int32, T.int32), (np.dtype("int64"), T.int64),
    (T.float32, T.float32),
])
def test_dtype_lookup(x, want):
    assert T.dtype(x) is want


@pytest.mark.parametrize("x", [np.float16, np.complex128, "f16", np.uint8])
def test_dtype_lookup_refuses_unsupported(x):
    with pytest.raises(UnsupportedError):
        T.dtype(x)


def test_type_strings_and_validation():
    assert str(TensorType((3, 4), T.float32)) == "f32[3,4]"
    assert str(TensorType((), T.float64, weak=True)) == "~f64[]"
    assert str(StackType()) == "stack"
    assert TensorType((), T.int64, True).strong() == TensorType((), T.int64)
    with pytest.raises(ValueError, match="weak"):
        TensorType((3,), T.float64, weak=True)
    with pytest.raises(ValueError, match="bad shape"):
        TensorType((-1,), T.float64)


SHAPES = [(), (0,), (1,), (3,), (1, 3), (3, 1), (2, 1, 3), (0, 3), (1, 0), (4, 1, 1), (5, 4, 3)]


@pytest.mark.parametrize("a, b", list(itertools.product(SHAPES, SHAPES)), ids=str)
def test_broadcast_shapes_is_numpys(a, b):
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(ShapeError, match="could not be broadcast") as e:
            broadcast_shapes(a, b)
        assert f"{a} {b}" in str(e.value)
    else:
        assert broadcast_shapes(a, b) == want


@pytest.mark.parametrize("shapes", [(), ((2, 3),), ((1,), (3, 1), (2, 1, 1)), ((0,), (1,), ())])
def test_broadcast_shapes_many(shapes):
    assert broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


def test_broadcast_error_names_every_shape():
    with pytest.raises(ShapeError) as e:
        broadcast_shapes((2, 3), (1,), (4, 3))
    assert "(2, 3) (1,) (4, 3)" in str(e.value)
    assert isinstance(e.value, ValueError)
