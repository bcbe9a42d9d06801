"""What an eval module hands the protocol loop for each of its functions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One GradBench function: JSON input -> arguments, the timed call, result -> JSON.

    ``prepare`` and ``post`` run outside the timed region (as in GradBench's Python
    tools); ``run`` is what each ``evaluate`` timing measures. ``runs`` is False for
    functions whose input carries no ``min_runs``/``min_seconds`` (the hello eval).
    """

    prepare: Callable[[Any], Any]
    run: Callable[[Any], Any]
    post: Callable[[Any], Any]
    runs: bool = True
