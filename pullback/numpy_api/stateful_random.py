"""Random generators with hidden state (``np.random``, a ``Generator``, Python's
``random``) in compiled code: refused.

Staging runs calls on compile-time values once, at compile time, so a draw would become
a constant and every call of the compiled function would return the same "noise".
Compiled code draws from ``pb.random`` keys instead (docs/random.md).  What is refused is
found by identity: the callables of the two modules, and methods bound to a generator.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ..errors import UnsupportedError

#: Objects whose bound methods read or advance a hidden random state.
_GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
               np.random.SeedSequence, random.Random)

#: The modules' own callables (functions bound to their global generator, constructors,
#: ``seed``, ``default_rng`` ...), by identity (they live as long as their modules).
_MODULE_CALLABLES = {
    id(getattr(module, name)): f"{label}.{name}"
    for module, label in ((np.random, "np.random"), (random, "random"))
    for name in module.__all__
}


def refuse_hidden_state(fn: Any) -> None:
    """Raise ``UnsupportedError`` if calling ``fn`` would draw from (or seed, or make) a
    generator with hidden state."""
    name = _MODULE_CALLABLES.get(id(fn))
    owner = getattr(fn, "__self__", None)
    if name is None and isinstance(owner, _GENERATORS):
        name = f"{type(owner).__name__}.{getattr(fn, '__name__', '?')}"
    if name is None:
        return
    raise UnsupportedError(
        f"{name} uses a random generator's hidden state, which compiled code would read "
        "once, at compile time, and return the same numbers on every call",
        hint="draw with pb.random: pass a key (pb.random.key(seed)) as an argument, split "
        "it per draw (key, sub = pb.random.split(key)) and call e.g. "
        "pb.random.normal(sub, shape); see docs/random.md")
