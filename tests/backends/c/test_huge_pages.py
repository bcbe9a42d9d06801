"""Fresh result buffers of 4 MiB and more are advised to be backed by huge pages (as
NumPy's arrays are), so that a program keeping its results alive does not fault in 4 KiB
at a time."""

import sys
from pathlib import Path

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = [
    pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's madvise"),
]


def _advised_huge(result: np.ndarray) -> bool:
    """Whether the mapping holding the middle of result's data is flagged MADV_HUGEPAGE
    (``hg``; the advice splits a mapping, and the page holding the allocator's header is
    left out)."""
    address = result.ctypes.data + result.nbytes // 2
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:  # a mapping's first line: lo-hi perms ...
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "VmFlags:":
            return "hg" in line.split()[1:]
    raise AssertionError("no mapping holds the address")


def _double(x):
    return x * 2


def test_big_results_are_advised_huge_pages(monkeypatch):
    monkeypatch.setenv("PULLBACK_TIERED", "0")  # native code from the first call
    f = pb.jit(_double, backend="c")
    kept = [f(np.ones(n, np.float32)) for n in (2 << 20, 2 << 20)]  # 8 MiB, kept alive
    assert all(_advised_huge(r) for r in kept)
    assert np.array_equal(kept[1], np.full(2 << 20, 2, np.float32))
