"""Run every corpus program (its first input) compiled for the C backend; print a
summary.  Run by ``test_sanitizers.py`` in a process whose generated code is built with
``-fsanitize=address,undefined``."""

from __future__ import annotations

import copy
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pullback as pb  # noqa: E402
from programs.registry import load  # noqa: E402


def main() -> None:
    warnings.simplefilter("ignore", RuntimeWarning)
    ran = 0
    for prog in load():
        args = prog.inputs[0](np.random.default_rng(0))
        try:
            prog.fn(*copy.deepcopy(args))
        except Exception:  # noqa: BLE001 - programs that raise are checked elsewhere
            continue
        pb.jit(prog.fn, static_argnames=prog.static, backend="c")(*copy.deepcopy(args))
        ran += 1
    print(f"ran {ran} programs")


if __name__ == "__main__":
    main()
