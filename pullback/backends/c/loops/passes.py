"""The loop-IR passes, in the order they run on every function of a lowered module."""

from __future__ import annotations

from collections.abc import Callable

from .arena import place_arena
from .ir import PARALLEL_MIN, LoopFunc, LoopModule
from .panels import panel_products
from .splitting import split_kernels


def _panels(func: LoopFunc, _: int) -> None:
    func.body = panel_products(func.body)


def _split(func: LoopFunc, parallel_min: int) -> None:
    func.body = split_kernels(func.body, parallel_min)


def _arena(func: LoopFunc, _: int) -> None:
    place_arena(func)


#: Each pass rewrites one function in place, given the loop length from which loops run
#: on every thread (``build/threads.parallel_min``, as lowering used it).
LOOP_PASSES: list[tuple[str, Callable[[LoopFunc, int], None]]] = [
    ("panels", _panels),  # products read row by row computed a panel at a time
    ("split", _split),  # kernels choosing by index split into stretches
    ("arena", _arena),  # the entry's top-level buffers placed on the call's arena
]


def run_loop_passes(module: LoopModule, parallel_min: int = PARALLEL_MIN) -> LoopModule:
    """``module`` after every pass of ``LOOP_PASSES``, function by function."""
    for func in module.funcs:
        for _, run in LOOP_PASSES:
            run(func, parallel_min)
    return module
