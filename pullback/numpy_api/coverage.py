"""The coverage list: what NumPy, ``math`` and builtins pullback maps, from the registries.

``python -m pullback.numpy_api.coverage > docs/numpy_coverage.md`` regenerates the
committed document; a test keeps the two equal.
"""

from __future__ import annotations

import importlib
import sys
from collections import defaultdict
from typing import Any

import numpy as np

from . import ATTRIBUTES, CALLABLES, METHODS, OPERATORS
from .core import SUBSCRIPTS
from .optional import PUBLIC_MODULE, load_installed

#: Modules in the order the document lists them (others follow, sorted).
_MODULE_ORDER = ("numpy", "numpy.linalg", "math", "builtins")
_PREFIX = {"numpy": "np", "numpy.linalg": "np.linalg"}


def _ufunc_of(obj: Any) -> Any:
    """The ufunc of a ufunc method (``np.add.at``), else None."""
    owner = getattr(obj, "__self__", None)
    return owner if isinstance(owner, np.ufunc) else None


def _module(obj: Any) -> str:
    if _ufunc_of(obj) is not None:
        return "numpy"
    return PUBLIC_MODULE.get(obj) or obj.__module__


def _name(obj: Any) -> str:
    ufunc = _ufunc_of(obj)
    return obj.__name__ if ufunc is None else f"{ufunc.__name__}.{obj.__name__}"


def _names(obj: Any, module: str) -> list[str]:
    """Every public name ``module`` gives ``obj``, its own name first."""
    namespace = importlib.import_module(module)
    own = _name(obj)
    aliases = sorted(
        n for n in dir(namespace)
        if not n.startswith("_") and n != own and getattr(namespace, n, None) is obj
    )
    return [own, *aliases]


def _entry(obj: Any, module: str) -> str:
    prefix = _PREFIX.get(module, module)
    own, *aliases = _names(obj, module)
    also = f" (also {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""
    return f"`{prefix}.{own}`{also}"


def _listed() -> list[Any]:
    """The mapped callables a user calls: not pullback's private helpers registered onto
    primitives (``pb.nn``'s staged conv and erf)."""
    return [obj for obj in CALLABLES if not (_module(obj).startswith("pullback.")
                                             and _name(obj).startswith("_"))]


def callables_by_module() -> dict[str, list[str]]:
    """Entries of the mapped callables, grouped by the module that defines them."""
    load_installed()
    for name in ("nn", "optim", "random", "train"):  # pb.random registers on first use
        importlib.import_module(f"pullback.{name}")
    groups: dict[str, list[Any]] = defaultdict(list)
    for obj in _listed():
        groups[_module(obj)].append(obj)
    order = [m for m in _MODULE_ORDER if m in groups] + sorted(set(groups) - set(_MODULE_ORDER))
    return {
        m: [_entry(o, m) for o in sorted(groups[m], key=lambda o: _name(o).lower())]
        for m in order
    }


def _section(title: str, entries: list[str]) -> list[str]:
    return [f"## {title} ({len(entries)})", "", *(f"- {e}" for e in entries), ""]


def numpy_series() -> str:
    """The installed NumPy's major.minor: what it has to map changes between them."""
    return ".".join(np.__version__.split(".")[:2])


def render() -> str:
    """The text of ``docs/numpy_coverage.md``."""
    groups = callables_by_module()
    counts = ", ".join(f"{m}: {len(v)}" for m, v in groups.items())
    lines = [
        "# NumPy, math and builtins coverage",
        "",
        "Generated from the registries of `pullback/numpy_api/` by",
        "`python -m pullback.numpy_api.coverage > docs/numpy_coverage.md`; do not edit.",
        f"Made with NumPy {numpy_series()}: another NumPy maps the callables it has.",
        "",
        f"**{len(_listed())} distinct callables** ({counts}), {len(METHODS)} ndarray methods, "
        f"{len(ATTRIBUTES)} ndarray attributes, {len(OPERATORS)} Python operators.",
        "",
    ]
    for module, entries in groups.items():
        lines += _section(f"`{module}`", entries)
    lines += _section("ndarray methods", [f"`.{n}()`" for n in sorted(METHODS)])
    lines += _section("ndarray attributes", [f"`.{n}`" for n in sorted(ATTRIBUTES)])
    lines += _section("Python operators", [f"`operator.{n}`" for n in sorted(OPERATORS)])
    lines += _section("Index expressions", sorted(
        f"`np.{n}[...]`" for n in dir(np) if id(getattr(np, n, None)) in SUBSCRIPTS))
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
