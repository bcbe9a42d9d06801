"""A function's extension module as C text: the includes, the loop IR's functions
(``codegen``) and the entry, under a name that is a hash of the text."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ....ir.core import Eqn, Func
from ..loops.ir import LoopModule
from ..loops.printer import format_module
from ..lower.lowering import LoweredModule
from .codegen import generate
from .entry import INCLUDES, entry


@dataclass
class Source:
    """A function's extension module before it is built: its name and C text, its loop
    IR as text, and the checks and prints its faults and output refer to."""

    name: str
    text: str
    module: LoopModule
    checks: list
    prints: list

    @property
    def loops(self) -> str:
        return format_module(self.module)


def module_source(func: Func, lowered: LoweredModule,
                  donated: Mapping[int, int] = MappingProxyType({})) -> Source:
    """The C of ``func``'s module, from its loop IR after the loop passes; ``donated``:
    the parameters its callers hand over, with the results they become."""
    loops, checks, prints = lowered
    body = generate(loops)
    # checks and prints share code whatever they say, and modules of one source share
    # their hooks: what they say (and the lines faults name) goes in the source, so
    # different messages differ
    notes = repr([(e.op.name, _said(e)) for e in [*checks, *prints]] +
                 [(str(e.loc), e.loc.func) for e in checks if e.loc is not None])
    notes = notes.replace("*/", "* /")
    digest = hashlib.sha256((body + entry(func, "", notes, donated)).encode()).hexdigest()
    name = f"pb_{digest[:16]}"
    return Source(name, "\n".join([INCLUDES, body, entry(func, name, notes, donated)]), loops,
                  checks, prints)


def _said(eqn: Eqn) -> list:
    """The params of a fault site or print that its message may use: a region's blocks
    say nothing (and their reprs hold addresses, which would give the module another
    name, and another build, in every process)."""
    return [(k, v) for k, v in sorted(eqn.params.items())
            if eqn.op.params.get(k) not in ("block", "func")]
