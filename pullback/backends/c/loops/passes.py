"""The loop-IR passes, in the order they run on every function of a lowered module."""

from __future__ import annotations

from collections.abc import Callable

from .arena import place_arena
from .counted import count_short_ranges
from .guarded import guard_locals
from .ir import PARALLEL_MIN, LoopFunc, LoopModule
from .panels import panel_products
from .splitting import split_kernels
from .stencils import gather_stencils
from .transposed import transpose_products

#: Whether a loop of so many iterations runs on every thread (``build/threads.py``).
Parallel = Callable[[int], bool]


def _panels(func: LoopFunc, _: Parallel) -> None:
    func.body = panel_products(func.body)


def _transposed(func: LoopFunc, _: Parallel) -> None:
    func.body = transpose_products(func.body)


def _guarded(func: LoopFunc, _: Parallel) -> None:
    func.body = guard_locals(func.body)


def _split(func: LoopFunc, runs_parallel: Parallel) -> None:
    func.body = split_kernels(func.body, runs_parallel)


def _arena(func: LoopFunc, _: Parallel) -> None:
    place_arena(func)


def _counted(func: LoopFunc, _: Parallel) -> None:
    func.body = count_short_ranges(func.body)


#: Each pass rewrites one function in place, told which loop lengths run on every thread
#: (``build/threads.runs_parallel``, as lowering asked it).
LOOP_PASSES: list[tuple[str, Callable[[LoopFunc, Parallel], None]]] = [
    ("panels", _panels),  # products read row by row computed a panel at a time
    ("transposed", _transposed),  # products read by whole columns computed transposed
    ("guarded", _guarded),  # kernel locals read under a test of the index computed there
    ("split", _split),  # kernels choosing by index split into stretches
    ("arena", _arena),  # the entry's top-level buffers placed on the call's arena
    ("counted", _counted),  # short constant-bound program loops stop polling for Ctrl-C
    ("stencils", gather_stencils),  # loops on elements: adds at offsets gathered, sums split
]


def run_loop_passes(module: LoopModule,
                    runs_parallel: Parallel = lambda n: n >= PARALLEL_MIN) -> LoopModule:
    """``module`` after every pass of ``LOOP_PASSES``, function by function."""
    for func in module.funcs:
        for _, run in LOOP_PASSES:
            run(func, runs_parallel)
    return module
