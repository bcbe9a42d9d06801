"""pullback as users install it: a wheel built from the checkout, installed in a fresh
virtual environment, compiles and differentiates natively from a directory outside the
checkout (the runtime's C sources must be in the wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

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


def test_a_wheel_installed_outside_the_checkout_compiles(tmp_path):
    source = tmp_path / "source"  # a clean copy: an in-tree build/ may hold stale files
    shutil.copytree(ROOT / "pullback", source / "pullback",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(wheels), str(source)], check=True, cwd=tmp_path)
    wheel = next(wheels.glob("pullback-*.whl"))
    venv = tmp_path / "venv"
    # the test environment's NumPy and OpenBLAS, pullback from the wheel only
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                   check=True, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PULLBACK_BACKEND")}
    env["PULLBACK_CACHE_DIR"] = str(tmp_path / "cache")
    script = tmp_path / "use.py"  # pullback compiles from source: a file, not -c
    script.write_text(f"PREFIX = {str(venv)!r}\n{SCRIPT}")
    out = subprocess.run([str(python), str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
