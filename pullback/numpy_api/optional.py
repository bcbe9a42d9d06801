"""Mappings of optional libraries (SciPy), registered once the program has imported the
library: importing SciPy takes about a second, which importing pullback does not pay,
and pullback never imports SciPy for a program that does not use it."""

from __future__ import annotations

import importlib
import sys
from typing import Any

from .core import CALLABLES

#: An optional library's module, and pullback's module of its mappings.
_LIBRARIES = {"scipy.special": "scipy_special", "scipy.linalg": "scipy_linalg"}
_loaded: set[str] = set()

#: The public module each optional library's mapped callable is documented under (SciPy's
#: ufuncs have no ``__module__``; its functions name private modules).
PUBLIC_MODULE: dict[Any, str] = {}


def load_imported() -> None:
    """Register the mappings of every optional library imported by now."""
    for library, mappings in _LIBRARIES.items():
        if library not in _loaded and library in sys.modules:
            importlib.import_module(f"{__package__}.{mappings}")
            _loaded.add(library)


def optional_mapping(fn: Any) -> Any:
    """``fn``'s mapping among libraries imported since the last look; None if none."""
    if len(_loaded) == len(_LIBRARIES):
        return None
    load_imported()
    return CALLABLES.get(fn)


def load_installed() -> None:
    """Import every installed optional library and register its mappings (for the
    coverage list, which lists them whether or not a program imported them)."""
    for library in _LIBRARIES:
        try:
            importlib.import_module(library)
        except ImportError:
            continue
    load_imported()
