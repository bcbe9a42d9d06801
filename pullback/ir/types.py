"""Element dtypes, tensor and stack types, and NumPy 2 type promotion (NEP 50).

A ``TensorType`` may be *weak*: a 0-d value that came from a Python ``int``/``float``/
``bool`` rather than from NumPy.  Weak values take the dtype of the strong operand they
meet, exactly as NumPy 2 treats Python scalars, and a result that stays weak goes back
to the user as a Python scalar.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from ..errors import ShapeError, UnsupportedError


class DType:
    """One of the element types pullback computes with."""

    __slots__ = ("name", "short", "np", "kind", "itemsize")

    def __init__(self, name: str, short: str, np_dtype: type, kind: str):
        self.name = name
        self.short = short
        self.np = np.dtype(np_dtype)
        self.kind = kind  # 'b' bool, 'i' signed integer, 'f' floating
        self.itemsize = self.np.itemsize

    def __repr__(self) -> str:
        return f"pb.{self.name}"

    def __str__(self) -> str:
        return self.short

    def __reduce__(self):
        return (dtype, (self.name,))

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"


bool_ = DType("bool", "bool", np.bool_, "b")
int32 = DType("int32", "i32", np.int32, "i")
int64 = DType("int64", "i64", np.int64, "i")
float32 = DType("float32", "f32", np.float32, "f")
float64 = DType("float64", "f64", np.float64, "f")

DTYPES = (bool_, int32, int64, float32, float64)
_BY_NAME = {d.name: d for d in DTYPES} | {d.short: d for d in DTYPES}
_BY_NP = {d.np: d for d in DTYPES}
_KIND_RANK = {"b": 0, "i": 1, "f": 2}


def complex_unsupported(what: str) -> UnsupportedError:
    """The refusal of a complex value (a literal, an array, a dtype, a conversion)."""
    return UnsupportedError(
        f"complex numbers are not supported yet: {what}",
        hint="pullback computes with bool, int32, int64, float32 and float64; carry the "
        "real and imaginary parts as two float arrays")


def dtype(x) -> DType:
    """The DType for a DType, a name ('f32', 'float32'), a NumPy dtype or a scalar type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is bool:
        return bool_
    if x is int:
        return int64
    if x is float:
        return float64
    try:
        npd = np.dtype(x)
    except TypeError:
        raise UnsupportedError(f"{x!r} is not a dtype") from None
    if npd in _BY_NP:
        return _BY_NP[npd]
    if npd.kind == "c":
        raise complex_unsupported(f"dtype {npd}")
    raise UnsupportedError(
        f"dtype {npd} is not supported",
        hint="pullback computes with bool, int32, int64, float32 and float64; "
        "convert with .astype(np.float32) or similar",
    )


@dataclass(frozen=True)
class TensorType:
    """An array type: static shape, dtype, and whether it is a weak Python scalar."""

    shape: tuple[int, ...]
    dtype: DType
    weak: bool = False

    def __post_init__(self):
        if not isinstance(self.shape, tuple) or not all(
            isinstance(d, int) and d >= 0 for d in self.shape
        ):
            raise ValueError(f"bad shape {self.shape!r}")
        if self.weak and self.shape != ():
            raise ValueError("only 0-d types can be weak")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def strong(self) -> TensorType:
        return TensorType(self.shape, self.dtype) if self.weak else self

    def with_dtype(self, dt: DType) -> TensorType:
        return TensorType(self.shape, dt)

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{'~' if self.weak else ''}{self.dtype.short}[{dims}]"


@dataclass(frozen=True)
class StackType:
    """A run-time-sized LIFO stack of tensors of any types (the residual tape of
    reverse-mode AD).  Each pop names the type it expects; pops mirror pushes."""

    def __str__(self) -> str:
        return "stack"


Type = TensorType | StackType


def scalar(dt: DType, weak: bool = False) -> TensorType:
    return TensorType((), dt, weak)


def promote_types(a: DType, b: DType) -> DType:
    """NumPy's promotion of two strong dtypes."""
    return _BY_NP[np.promote_types(a.np, b.np)]


def _weak_python_dtype(kind: str) -> DType:
    return {"b": bool_, "i": int64, "f": float64}[kind]


def result_type(*types: TensorType) -> TensorType:
    """The 0-d type an operation on these operands computes in (NumPy 2 + NEP 50).

    Strong operands promote by NumPy's table.  A weak Python scalar takes the strong
    dtype when its kind (bool < int < float) is not higher; otherwise it lifts the result
    to the default dtype of its kind (int64, float64).  With only weak operands the
    result is weak and follows Python (int + float is float).
    """
    strong = [t.dtype for t in types if not t.weak]
    weak = [t.dtype for t in types if t.weak]
    if not strong:
        kind = max((d.kind for d in weak), key=_KIND_RANK.__getitem__)
        return TensorType((), _weak_python_dtype(kind), weak=True)
    out = reduce(promote_types, strong)
    for w in weak:
        if _KIND_RANK[w.kind] > _KIND_RANK[out.kind]:
            out = _weak_python_dtype(w.kind)
    return TensorType((), out)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of shapes; raises ShapeError naming every shape."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            shown = " ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(f"operands could not be broadcast together with shapes {shown}")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def type_of_value(value) -> TensorType:
    """The type of a concrete Python scalar or NumPy value (Python scalars are weak)."""
    if isinstance(value, (np.generic, np.ndarray)):  # np.float64 subclasses float
        return TensorType(tuple(int(d) for d in value.shape), dtype(value.dtype))
    if isinstance(value, bool):
        return TensorType((), bool_, True)
    if isinstance(value, int):
        return TensorType((), int64, True)
    if isinstance(value, float):
        return TensorType((), float64, True)
    if isinstance(value, complex):
        raise complex_unsupported(repr(value))
    arr = np.asarray(value)
    return TensorType(tuple(int(d) for d in arr.shape), dtype(arr.dtype))
