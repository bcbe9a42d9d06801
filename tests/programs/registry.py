"""The program corpus: real programs, each with generators of example inputs.

    @program(lambda rng: (rng.standard_normal((3, 4)), 2.0))
    def scale(x, a):
        return a * x

``inputs`` are functions of a ``numpy.random.Generator`` returning an argument tuple;
every program is checked with each of them (plain Python is the oracle).  ``static``
names the arguments compiled as static values besides Python ints/bools/strs/None.
``differentiable`` lists the argument positions the AD tests differentiate (empty for
programs whose outputs are integers, booleans or non-smooth).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Inputs = Callable[[Any], tuple]


@dataclass(frozen=True)
class Program:
    fn: Callable
    inputs: tuple[Inputs, ...]
    category: str
    static: tuple[str, ...] = ()
    differentiable: tuple[int, ...] = ()
    tags: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.category}.{self.fn.__name__}"


PROGRAMS: list[Program] = []


def program(
    *inputs: Inputs,
    static: Sequence[str] = (),
    differentiable: Sequence[int] = (),
    tags: Sequence[str] = (),
) -> Callable[[Callable], Callable]:
    """Register the decorated function in the corpus; the function itself is unchanged."""

    def deco(fn: Callable) -> Callable:
        category = fn.__module__.rsplit(".", 1)[-1].removeprefix("p_")
        PROGRAMS.append(Program(fn, tuple(inputs), category, tuple(static),
                                tuple(differentiable), tuple(tags)))
        return fn

    if not inputs:
        raise ValueError("a program needs at least one input generator")
    return deco


def load() -> list[Program]:
    """Every program of every ``p_*.py`` module in this folder."""
    import importlib
    import pkgutil
    from pathlib import Path

    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda i: i.name):
        if info.name.startswith("p_"):
            importlib.import_module(f"programs.{info.name}")
    return PROGRAMS
