"""docs/training.md: its code blocks run, in order, and the loop they show trains."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def test_the_pages_code_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    assert len(blocks) == 4
    script = tmp_path / "training_doc.py"  # pullback compiles from source files
    script.write_text("\n".join(blocks))
    monkeypatch.chdir(tmp_path)  # the page saves files in the working directory
    namespace = runpy.run_path(str(script))
    restored = namespace["restored"]
    np.testing.assert_allclose(restored.w, [2.0, -1.0, 0.5], atol=0.02)
    np.testing.assert_allclose(restored.b, 3.0, atol=0.02)
    out = capsys.readouterr().out.splitlines()
    assert out[4].startswith("epoch 4: mean loss 0.01")
    assert out[5] == "0.6666666666666666"
    assert namespace["state"]["step"] == 200
