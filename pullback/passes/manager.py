"""The pipeline: which passes run, in which order, and how to watch them.

Inlining comes first, so that the other passes see across function boundaries; constant
folding and simplification then expose duplicates and dead values for CSE and DCE.
LICM moves what is left invariant out of loops, and a second round cleans up what the
moves and the first round uncovered (a moved equation may repeat one outside the loop).

``PULLBACK_DUMP=passes`` prints the IR after each pass; ``PULLBACK_VERIFY=1`` verifies the
pipeline's result, ``PULLBACK_VERIFY=passes`` the IR after each pass, naming the pass that
broke it.
"""

from __future__ import annotations

from .. import config
from ..errors import VerifyError
from ..ir.core import Func
from ..ir.verify import verify
from .cse import cse
from .dce import dce
from .fold import fold
from .inline import inline
from .licm import licm
from .simplify import simplify
from .walk import FunctionPass, copy_func

_ROUND: list[tuple[str, FunctionPass]] = [
    ("fold", fold), ("simplify", simplify), ("cse", cse), ("dce", dce),
]

PIPELINE: list[tuple[str, FunctionPass]] = [("inline", inline), *_ROUND, ("licm", licm), *_ROUND]


def optimize(func: Func, trace: list[tuple[str, Func]] | None = None) -> Func:
    """``func`` after every pass of ``PIPELINE`` (a new function; ``func`` is unchanged).
    The passes rewrite one private copy in place, which saves a copy per pass; ``trace``
    collects a copy of the IR after each pass."""
    dump = config.dumps("passes")
    each = config.verifying_passes()
    func = copy_func(func)
    for name, run in PIPELINE:
        run.in_place(func)
        if dump:
            print(f"# after {name}\n{func}")
        if trace is not None:
            trace.append((name, copy_func(func)))
        if each:
            _verify_after(f"pass {name}", func)
    if config.verifying() and not each:
        _verify_after("the passes (PULLBACK_VERIFY=passes names the one)", func)
    return func


def _verify_after(what: str, func: Func) -> None:
    try:
        verify(func)
    except VerifyError as e:
        raise VerifyError(f"after {what}: {e}") from e
