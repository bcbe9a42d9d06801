"""pullback: a differentiable-programming compiler for Python + NumPy."""

__version__ = "0.1.0"  # the one place it is written: pyproject.toml reads it from here

from . import nn as nn  # pb.nn: layers, initialisers, losses as pytrees
from . import ops as _ops  # noqa: F401  (registers the primitives)
from . import optim as optim  # pb.optim: optimisers as pure functions of pytrees
from . import random as random  # pb.random: key-based random numbers, compiled or not
from . import train as train  # pb.train: batches, progress, metrics, save/load
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

__all__ = [
    "CompileError", "ConcretizationError", "InternalError", "ShapeError", "TreeDef",
    "UnsupportedError",
    "bool_", "checkpoint", "checkpoint_loops", "custom_jvp", "custom_vjp", "field",
    "float32", "float64", "frozen_leaves", "grad", "hessian", "int32", "int64", "jacfwd",
    "jacrev", "jit", "jvp",
    "make_ir", "register_pytree", "stop_gradient", "tree_flatten", "tree_leaves", "tree_map",
    "tree_structure", "tree_unflatten", "value_and_grad", "vjp", "vmap",
]
