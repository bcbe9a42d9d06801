"""pullback as users install it: a wheel built from the checkout, installed in a fresh
virtual environment, compiles and differentiates natively from a directory outside the
checkout (the runtime's C sources must be in the wheel)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import numpy as np
    import pullback as pb

    @pb.jit
    def energy(x):
        return np.sum(np.sin(x) ** 2)

    def total(x):
        return energy(x) * 3

    x = np.linspace(0.0, 1.0, 5)
    assert pb.__file__.startswith(PREFIX), pb.__file__
    from importlib import metadata, resources
    assert pb.__version__ == metadata.version("pullback"), pb.__version__
    assert resources.files("pullback").joinpath("py.typed").is_file()  # PEP 561
    np.testing.assert_allclose(pb.jit(total, backend="c")(x), 3 * np.sum(np.sin(x) ** 2))
    np.testing.assert_allclose(pb.grad(energy)(x), np.sin(2 * x))
    print("ok")
""")


def _smoke(venv: Path) -> str:
    return f"PREFIX = {str(venv)!r}\n{SCRIPT}"


def _wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"  # a clean copy: an in-tree build/ may hold stale files
    shutil.copytree(ROOT / "pullback", source / "pullback",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(wheels), str(source)], check=True, cwd=tmp_path)
    return next(wheels.glob("pullback-*.whl"))


def _run_outside(tmp_path: Path, python: Path, script: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PULLBACK_BACKEND")}
    env["PULLBACK_CACHE_DIR"] = str(tmp_path / "cache")
    path = tmp_path / "use.py"  # pullback compiles from source: a file, not -c
    path.write_text(script)
    out = subprocess.run([str(python), str(path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_wheel_installed_outside_the_checkout_compiles(tmp_path):
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv"
    # the test environment's NumPy and OpenBLAS, pullback from the wheel only
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                   check=True, cwd=tmp_path)
    assert _run_outside(tmp_path, python, _smoke(venv)).strip() == "ok"


def _lowest_python() -> Path | None:
    """An interpreter of the lowest Python ``pyproject.toml`` declares (on PATH, or one
    pyenv installed)."""
    declared = re.search(r'requires-python = ">=(\d+)\.(\d+)"',
                         (ROOT / "pyproject.toml").read_text())
    name = f"python{declared[1]}.{declared[2]}"
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(pyenv.glob(f"{declared[1]}.{declared[2]}.*/bin/{name}"))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path and subprocess.run([on_path, "-c", ""], capture_output=True).returncode == 0:
        return Path(on_path)
    return None


def test_the_wheel_and_the_demo_on_the_lowest_declared_python(tmp_path):
    """From the wheel and PyPI alone (NumPy, OpenBLAS), in a venv of the lowest declared
    Python: the smoke test and the README's demo."""
    python = _lowest_python()
    if python is None:
        pytest.skip("no interpreter of the lowest declared Python on this machine")
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv-lowest"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
    inner = venv / "bin" / "python"
    subprocess.run([str(inner), "-m", "pip", "install", "--quiet", str(wheel)], check=True,
                   cwd=tmp_path, timeout=600)
    assert _run_outside(tmp_path, inner, _smoke(venv)).strip() == "ok"
    demo = (ROOT / "examples" / "grad_demo.py").read_text()
    out = _run_outside(tmp_path, inner, demo)
    assert "Traceback" not in out and out.strip()
