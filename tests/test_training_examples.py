"""The training examples reach their targets: the digits CNN 98% test accuracy, each
character LM its held-out loss threshold.  Each run trains for a minute or a few, so they
are in the slow tier; they run as scripts (a subprocess each), as a user runs them."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str, timeout: float) -> str:
    """The script's stdout; fails with its output's tail if it exits non-zero."""
    env = dict(os.environ, PULLBACK_PROGRESS="off",
               # one thread: pytest-xdist runs a worker per core beside this script
               PULLBACK_NUM_THREADS="1")
    env.pop("PULLBACK_BACKEND", None)  # native code, the default
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (f"{name} exited with {proc.returncode}\n"
                                  f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


def final_number(pattern: str, out: str) -> float:
    match = re.search(pattern, out)
    assert match, f"no line matching {pattern!r} in\n{out[-2000:]}"
    return float(match[1])


@pytest.mark.slow
def test_train_digits_reaches_98_percent():
    pytest.importorskip("sklearn")
    out = run_example("train_digits.py", timeout=600)
    assert final_number(r"final test accuracy ([0-9.]+)", out) >= 0.98
    assert "saved and reloaded: the same logits" in out
    assert len(re.findall(r"^epoch +\d+ +loss", out, re.M)) == 50


@pytest.mark.slow
@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_char_lm_gets_below_its_loss_threshold(model):
    out = run_example("char_lm.py", "--model", model, timeout=1200)
    loss = final_number(r"final held-out loss ([0-9.]+)", out)
    threshold = final_number(r"the threshold ([0-9.]+)", out)
    assert loss < threshold
    assert out.count("--- sample") >= 2


def test_char_lm_encodes_newline_and_printable_ascii_as_ids_0_to_95():
    lm = runpy.run_path(str(EXAMPLES / "char_lm.py"))
    printable = "\n" + "".join(map(chr, range(32, 127)))
    np.testing.assert_array_equal(lm["encode"](printable), np.arange(lm["VOCAB"]))
    assert lm["decode"](np.arange(lm["VOCAB"])) == printable
    np.testing.assert_array_equal(lm["encode"]("a\tb\u00e9\n~"), [66, 67, 0, 95])
    ids = lm["load_corpus"](20_000)
    assert ids.shape == (20_000,) and ids.min() == 0 and ids.max() < lm["VOCAB"]
    assert "def " in lm["decode"](ids)
