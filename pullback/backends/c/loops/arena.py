"""The call's arena: the entry's top-level buffers share one allocation per call.

Each arena buffer lives from its ``Alloc`` to its ``Free`` (statement positions of the
entry's top block); buffers whose lives do not overlap share bytes.
"""

from __future__ import annotations

from .ir import Alloc, Free, LoopFunc


def _place(lives: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    """Offsets in one arena for buffers of these ``(bytes, start, end)`` lives (largest
    first, each at the lowest offset clear of the placed ones whose lives overlap its
    own), and the arena's size."""
    offsets = [0] * len(lives)
    placed: list[int] = []
    for k in sorted(range(len(lives)), key=lambda k: -lives[k][0]):
        size, start, end = lives[k]
        busy = sorted((offsets[j], offsets[j] + lives[j][0]) for j in placed
                      if lives[j][1] < end and start < lives[j][2])
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            at = max(at, hi)
        offsets[k] = at
        placed.append(k)
    return offsets, max((o + s for o, (s, _, _) in zip(offsets, lives, strict=True)), default=0)


def place_arena(func: LoopFunc) -> None:
    """Offsets for the arena buffers of ``func``'s top block, and its ``Free``s mark the
    bytes dead (for AddressSanitizer)."""
    body = func.body
    start = {s.name: k for k, s in enumerate(body) if isinstance(s, Alloc) and s.arena}
    allocs = {s.name: s for s in body if isinstance(s, Alloc) and s.arena}
    end = {s.name: k for k, s in enumerate(body) if isinstance(s, Free) and s.name in start}
    names = list(start)
    offsets, func.arena = _place([(allocs[n].nbytes, start[n], end.get(n, len(body)))
                                  for n in names])
    for n, at in zip(names, offsets, strict=True):
        allocs[n].offset = at
    for s in body:
        if isinstance(s, Free) and s.name in allocs:
            s.arena_bytes = allocs[s.name].nbytes
