"""The README's main command: the builder demo runs and agrees with NumPy."""

import runpy
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "examples" / "builder_demo.py"


def test_builder_demo_runs_and_agrees_with_numpy(capsys):
    runpy.run_path(str(DEMO), run_name="__main__")
    out = capsys.readouterr().out
    assert "func @mlp_rmse(" in out and "while_loop" in out
    assert out.rstrip().endswith("interpreter and NumPy agree")
