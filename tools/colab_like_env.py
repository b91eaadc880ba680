"""Create `.venv-colab`: a small environment that looks like Google Colab's, for tests/test_colab.py.

Colab today ships torch (with CUDA), matplotlib 3.10, ipywidgets 7.7.1 and IPython 7. This environment has
the same matplotlib, ipywidgets and IPython releases, and the same torch release as the main environment
(on CI: the local CPU wheel, so nothing large is downloaded), plus pytest to run the explorer tests.

    python tools/colab_like_env.py [PATH]     # default PATH: .venv-colab
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COLAB_PINS = ["ipywidgets==7.7.1", "matplotlib==3.10.*", "ipython==7.34.0"]
TOOLS = ["pytest", "hypothesis", "setuptools>=77"]  # to run the explorer tests and build the package


def python_of(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def create(venv: Path) -> Path:
    python = python_of(venv)
    stamp = venv / ".colab-like"
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"
    wanted = [torch_pin, *COLAB_PINS, *TOOLS]
    if stamp.exists() and stamp.read_text() == " ".join(wanted):
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *wanted], check=True)
    stamp.write_text(" ".join(wanted))
    return python


if __name__ == "__main__":
    print(create(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".venv-colab"))
