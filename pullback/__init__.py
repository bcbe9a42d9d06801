"""pullback: a differentiable-programming compiler for Python + NumPy.

The subpackages ``nn`` (layers, initialisers, losses as pytrees), ``optim``
(optimisers as pure functions of pytrees), ``random`` (key-based random numbers,
compiled or not) and ``train`` (batches, progress, metrics, save/load) are imported when
first used (``pb.nn``): a program that only jits pays nothing for them at import."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"  # the one place it is written: pyproject.toml reads it from here

from . import ops as _ops  # noqa: F401  (registers the primitives)
from .api import jit, make_ir
from .batching import vmap
from .derivatives import (
    checkpoint,
    checkpoint_loops,
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    stop_gradient,
    value_and_grad,
    vjp,
)
from .errors import (
    CompileError,
    ConcretizationError,
    InternalError,
    ShapeError,
    UnsupportedError,
)
from .ir.types import bool_, float32, float64, int32, int64
from .tree import (
    TreeDef,
    field,
    frozen_leaves,
    register_pytree,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)

_SUBPACKAGES = ("nn", "optim", "random", "train")


def __getattr__(name: str) -> Any:
    """``pb.nn``, ``pb.optim``, ``pb.random``, ``pb.train``, imported on first use."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES})


__all__ = [
    "CompileError", "ConcretizationError", "InternalError", "ShapeError", "TreeDef",
    "UnsupportedError",
    "bool_", "checkpoint", "checkpoint_loops", "custom_jvp", "custom_vjp", "field",
    "float32", "float64", "frozen_leaves", "grad", "hessian", "int32", "int64", "jacfwd",
    "jacrev", "jit", "jvp",
    "make_ir", "register_pytree", "stop_gradient", "tree_flatten", "tree_leaves", "tree_map",
    "tree_structure", "tree_unflatten", "value_and_grad", "vjp", "vmap",
]
