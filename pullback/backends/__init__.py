"""Backends: ``interp`` (reference, NumPy) and, later, ``c`` (native)."""
