"""ruff is clean over the package, the tests, the tools and the notebooks (config in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_catches_a_comparison_without_assert(tmp_path):
    """The bugbear rule B015 is on: a test that compares without asserting cannot fail, so ruff must flag it."""
    bad = tmp_path / "test_bad.py"
    bad.write_text("def test_shape():\n    x = [1, 2]\n    len(x) == 2\n")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                             str(ROOT / "pyproject.toml"), str(bad)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "B015" in result.stdout
