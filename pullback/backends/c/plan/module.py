"""The plan of a module: what lowering reads about its functions, decided up front."""

from __future__ import annotations

from dataclasses import dataclass

from ....ir.core import Module
from .donation import Donations, donations


@dataclass(frozen=True)
class ModulePlan:
    """``donated``: per called function, the array parameters it takes over."""

    donated: Donations


def plan_module(module: Module) -> ModulePlan:
    """The plan ``lower_module`` reads for ``module``."""
    return ModulePlan(donations(module))
