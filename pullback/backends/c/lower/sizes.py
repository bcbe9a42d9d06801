"""Arrays no machine of this size can hold: what NumPy raises for them, raised where the
program makes them, before any kernel runs over them.

Plain NumPy allocates every array a program makes, and an allocation larger than the
machine's memory and swap fails at once (``MemoryError``; Linux refuses it outright in
its default overcommit mode), as does one whose byte count is beyond ``intp``
(``ValueError``).  Compiled code fuses most arrays into the loops that read them and
never allocates them, so without this check it would run a loop over 10**15 elements
for hours where NumPy fails in a microsecond.  The bound is the machine's, read once
per process: shapes are known when a function is compiled, so a fitting array costs
nothing at run time.
"""

from __future__ import annotations

import functools
import math
import os

from ....ir.types import TensorType

#: NumPy's refusal of a byte count beyond ``intp`` (``np.empty``'s message).
TOO_BIG = ("array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum "
           "possible size.")
_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


@functools.cache
def machine_bytes() -> int:
    """Physical memory plus swap, in bytes (2**63 where the system does not say)."""
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2 ** 63
    swap = 0
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("SwapTotal:"):
                    swap = int(line.split()[1]) * 1024
    except OSError:
        pass
    return ram + swap


def size_text(nbytes: int) -> str:
    """A byte count in binary units to three figures, as NumPy's message gives it."""
    unit = min((max(nbytes.bit_length(), 1) - 1) // 10, len(_UNITS) - 1)
    value = nbytes / 1024 ** unit
    if round(value) == 1024 and unit + 1 < len(_UNITS):
        unit, value = unit + 1, value / 1024
    if unit == 0:
        return f"{nbytes} bytes"
    return f"{value:#.3g} {_UNITS[unit]}" if value < 999.5 else f"{value:#.0f} {_UNITS[unit]}"


def allocation_error(t: TensorType) -> tuple[str, str] | None:
    """The exception (name, message) NumPy raises allocating an array of type ``t``,
    or None when the machine can hold it."""
    nbytes = math.prod(t.shape) * t.dtype.np.itemsize
    if nbytes >= 2 ** 63:
        return "ValueError", TOO_BIG
    if nbytes <= machine_bytes():
        return None
    return ("MemoryError", f"Unable to allocate {size_text(nbytes)} for an array with "
            f"shape {t.shape} and data type {t.dtype.name}")
