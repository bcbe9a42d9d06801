"""pb.train.Progress: the plain printer's lines, rate limit and totals; tqdm when present."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import pullback as pb
from pullback.train import progress


class Clock:
    """Stands in for the ``time`` module: ``monotonic`` reads a hand-set time."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(progress, "time", fake)
    return fake


def test_plain_lines_show_rate_and_metrics(clock):
    out = io.StringIO()
    with pb.train.Progress(100, desc="train", tqdm=False, file=out) as bar:
        clock.now += 2.0
        bar.update(50, loss=np.float32(0.123456))
        clock.now += 0.1  # within the interval: no line
        bar.update(10, loss=np.array(0.5), acc=0.75)
        clock.now += 0.4
        bar.update(10, loss=0.25)
        clock.now += 0.5
    assert out.getvalue().splitlines() == [
        "train: 50/100 ex 25 ex/s loss=0.1235",
        "train: 70/100 ex 28 ex/s loss=0.25 acc=0.75",
        "train: done 70/100 ex in 3.00 s 23.3 ex/s loss=0.25 acc=0.75",
    ]


def test_interval_and_final_line_once(clock):
    out = io.StringIO()
    bar = pb.train.Progress(unit="img", tqdm=False, file=out, interval=10.0)
    for _ in range(20):
        clock.now += 0.25
        bar.update(200)
    bar.close()
    bar.close()
    assert out.getvalue().splitlines() == ["done 4000 img in 5.00 s 800 img/s"]


def test_the_final_line_comes_after_an_error(clock):
    out = io.StringIO()
    with pytest.raises(KeyError), pb.train.Progress(tqdm=False, file=out) as bar:
        bar.update(3)
        raise KeyError
    assert out.getvalue().startswith("done 3 ex in 0.00 s")


def test_stderr_by_default(clock, capsys):
    with pb.train.Progress(tqdm=False) as bar:
        clock.now += 1.0
        bar.update(5)
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "5 ex 5 ex/s\ndone 5 ex in 1.00 s 5 ex/s\n")


def test_tqdm_bar_when_importable():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    with pb.train.Progress(8, desc="eval", file=out) as bar:
        for _ in range(4):
            bar.update(2, loss=np.float64(1.5))
    text = out.getvalue()
    assert "eval" in text and "8/8" in text and "loss=1.5" in text and "ex/s" in text


def test_without_tqdm(monkeypatch, clock):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as if tqdm were not installed
    with pytest.raises(ImportError):
        pb.train.Progress(tqdm=True)
    out = io.StringIO()
    with pb.train.Progress(2, file=out) as bar:  # tqdm=None: the plain printer
        bar.update(2)
    assert out.getvalue() == "done 2/2 ex in 0.00 s nan ex/s\n"
