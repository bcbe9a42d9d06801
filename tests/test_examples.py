"""The examples run and check themselves against plain Python / NumPy."""

import runpy
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str, capsys) -> str:
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def test_builder_demo_runs_and_agrees_with_numpy(capsys):
    out = run("builder_demo.py", capsys)
    assert "func @mlp_rmse(" in out and "while_loop" in out
    assert out.rstrip().endswith("interpreter and NumPy agree")


def test_jit_demo_runs_and_agrees_with_python(capsys):
    out = run("jit_demo.py", capsys)
    assert "func @mlp_newton(" in out and "while_loop" in out and "jit_demo.py:" in out
    assert out.rstrip().endswith("compiled and plain Python agree")


def test_grad_demo_runs_and_agrees_with_central_differences(capsys, monkeypatch):
    monkeypatch.delenv("PULLBACK_BACKEND")  # the default: native code where a compiler is
    out = run("grad_demo.py", capsys)
    assert "func @sqrt_newton(" in out and "stack_push" in out and "stack_pop" in out
    assert out.rstrip().endswith("every derivative matches central differences")
