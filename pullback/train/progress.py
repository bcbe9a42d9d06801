"""A progress display for training loops: tqdm's bar when tqdm is installed (an optional
dependency), else a plain line printer that suits logs (a line at most every ``interval``
seconds, and one line with the totals at the end)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

import numpy as np


def _show(value: Any) -> str:
    """A metric as the display shows it: numbers (incl. one-element arrays) to 4 digits."""
    number = np.asarray(value)
    if number.size == 1 and number.dtype.kind in "biuf":
        return f"{number.item():.4g}"
    return str(value)


def _tqdm(wanted: bool | None) -> Any:
    """tqdm's bar class when ``wanted`` (None: if it can be imported), else None."""
    if wanted is False:
        return None
    try:
        from tqdm.auto import tqdm  # an optional dependency
    except ImportError:
        if wanted:
            raise
        return None
    return tqdm


class Progress:
    """Examples per second and the latest metrics of a loop; a context manager.

    ``total``: the number of examples expected (shown as ``done/total``), or None.
    ``tqdm``: None uses tqdm when it can be imported, True requires it, False forces the
    plain printer.  ``file``: where the display goes (``sys.stderr`` by default).
    ``interval``: the least number of seconds between two plain lines.
    """

    def __init__(self, total: int | None = None, *, desc: str = "", unit: str = "ex",
                 tqdm: bool | None = None, file: TextIO | None = None,
                 interval: float = 0.5):
        self.total = total
        self.desc = desc
        self.unit = unit
        self.file = sys.stderr if file is None else file
        self.interval = interval
        self.count = 0
        self.metrics: dict[str, Any] = {}
        bar = _tqdm(tqdm)
        self._bar = None if bar is None else bar(
            total=total, desc=desc or None, unit=unit, file=self.file, dynamic_ncols=True)
        self._start = time.monotonic()
        self._last = self._start
        self._closed = False

    def update(self, n: int = 1, **metrics: Any) -> None:
        """Count ``n`` more examples and show ``metrics`` (e.g. ``loss=...``) from now on."""
        self.count += n
        self.metrics.update(metrics)
        if self._bar is not None:
            if metrics:
                self._bar.set_postfix({k: _show(v) for k, v in self.metrics.items()},
                                      refresh=False)
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._print(now)

    def close(self) -> None:
        """Show the totals (once)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        else:
            self._print(time.monotonic(), final=True)

    def _print(self, now: float, final: bool = False) -> None:
        elapsed = now - self._start
        rate = self.count / elapsed if elapsed > 0 else float("nan")
        speed = f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"
        done = f"{self.count}" if self.total is None else f"{self.count}/{self.total}"
        parts = [f"{self.desc}:" if self.desc else "", "done" if final else "",
                 f"{done} {self.unit}", f"in {elapsed:.2f} s" if final else "",
                 f"{speed} {self.unit}/s", *(f"{k}={_show(v)}" for k, v in self.metrics.items())]
        print(" ".join(p for p in parts if p), file=self.file, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
