"""The language's operators by the names staging gives them: the names of the ``operator``
module's functions, which are also the keys of NumPy's operator mappings
(``numpy_api.OPERATORS``).  Expressions, augmented assignments, the ``operator`` module's
functions and cells met by native Python all read these tables."""

from __future__ import annotations

import ast

#: Arithmetic and bitwise operators (``a + b``, and ``a += b`` in place).
BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
    ast.BitAnd: "and_", ast.BitOr: "or_", ast.BitXor: "xor", ast.LShift: "lshift",
    ast.RShift: "rshift",
}
UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert"}
COMPARE = {
    ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne",
}
#: How an operator without a NumPy mapping reads in an error message.
SYMBOL = {"lshift": "<<", "rshift": ">>"}


def dunder(name: str) -> str:
    """The special method's stem of an operator (``and_``: ``__and__``)."""
    return name.rstrip("_")
