"""The calling convention of a module's entry, ``call(args, form)``.

``form`` is bytes: form[0] how the results come back (``LIST``; ``ONE``: the only
result; ``TUPLE``), then three bytes per parameter: how it comes (``ARRAY``; ``SCALAR``:
a NumPy scalar of its type; ``FLOAT``: a Python float for a weak float64 scalar) and its
place in ``args`` (16 bits, little-endian), then one byte per result (``ARRAY``;
``NUMPY``: a NumPy scalar; ``PYTHON``: a Python scalar).  Arguments not of the compiled
types give NotImplemented, so a caller can fall back to a converting path.  The glue
library (``runtime/glue.c``) reads it.
"""

from __future__ import annotations

LIST, ONE, TUPLE = 0, 1, 2
ARRAY, SCALAR, FLOAT = 0, 1, 2
NUMPY, PYTHON = 1, 2


def form(shape: int, params: list[tuple[int, int]], results: list[int]) -> bytes:
    """The ``form`` argument of ``call``: (how, place) per parameter, how per result."""
    return bytes([shape, *(b for how, at in params for b in (how, at & 255, at >> 8)),
                  *results])
