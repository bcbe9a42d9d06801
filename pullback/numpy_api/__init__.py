"""How ``np.*``, ``np.linalg.*``, ``math.*``, builtins, ndarray methods and Python operators
map onto primitives.  Importing this package registers every mapping."""

from . import (  # noqa: F401  (SciPy's mappings: optional.py, once a program imports it)
    counting,
    creation,
    decompositions,
    indexing,
    linalg,
    manip,
    numerical,
    python,
    reductions,
    selection,
    sorting,
    ufuncs,
)
from .core import ATTRIBUTES, CALLABLES, METHODS, OPERATORS  # noqa: F401
