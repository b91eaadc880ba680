#!/usr/bin/env python3
"""The project's commands, with nothing but Python 3.10+ needed to start.

    python course.py lab        open the course in JupyterLab (creates .venv on first use)
    python course.py test       run the whole test suite: package tests, doctests, ruff, strict nbval
    python course.py execute    regenerate every notebook's stored outputs (the only way outputs are made)
    python course.py colab      rewrite every notebook's Colab badge and setup cell from pyproject.toml
    python course.py gpu-check  on a CUDA machine: device tests, strict nbval and timings on the GPU
    python course.py book       build the course website from the stored outputs (book/_build/html)

Each command first makes sure ``.venv`` exists and holds the project with its ``dev`` extras (it reinstalls
when ``pyproject.toml`` changes). Set ``COURSE_VENV`` to use another environment folder, or
``COURSE_NO_VENV=1`` to use the Python that runs this script as it is (e.g. inside a conda environment made
from ``environment.yml``). ``execute`` and ``test`` run with the same environment variables (threads, seeds),
so the stored outputs are the ones the tests expect.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"

#: The environment shared by `execute` and `test`: the stored outputs are made and checked under it.
RUN_ENV = {
    "OMP_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
    "PYTHONHASHSEED": "0",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    "JUPYTER_PLATFORM_DIRS": "1",
}

#: strict nbval: outputs are compared (not --nbval-lax), in this environment's kernel.
NBVAL_ARGS = [
    "--nbval",
    "--nbval-current-env",
    "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
    "--nbval-cell-timeout", "600",
]


def venv_python() -> Path:
    """The Python of the project's environment, creating and installing it when needed."""
    if os.environ.get("COURSE_NO_VENV"):
        return Path(sys.executable)
    venv = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        print(f"Creating the environment in {venv} (first use only) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    stamp = venv / ".course-installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        print("Installing the course and its tools into the environment ...", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"], check=True)
        stamp.write_text(digest)
    return python


def run_env() -> dict[str, str]:
    return {**os.environ, **RUN_ENV}


def cmd_lab(args: list[str]) -> int:
    python = venv_python()
    extra = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # containers, Colab-like VMs
    return subprocess.call([str(python), "-m", "jupyter", "lab", f"--notebook-dir={NOTEBOOKS}", *extra, *args],
                           cwd=ROOT)


def cmd_test(args: list[str]) -> int:
    python = venv_python()
    return subprocess.call([str(python), "-m", "pytest", *NBVAL_ARGS, *args], cwd=ROOT, env=run_env())


def cmd_execute(args: list[str]) -> int:
    python = venv_python()
    return subprocess.call([str(python), str(ROOT / "tools" / "execute_notebooks.py"), *args], cwd=ROOT,
                           env=run_env())


def cmd_colab(args: list[str]) -> int:
    python = venv_python()
    return subprocess.call([str(python), str(ROOT / "tools" / "colab_sync.py"), *args], cwd=ROOT)


def cmd_gpu_check(args: list[str]) -> int:
    python = venv_python()
    return subprocess.call([str(python), str(ROOT / "tools" / "gpu_check.py"), *args], cwd=ROOT, env=run_env())


def cmd_book(args: list[str]) -> int:
    python = venv_python()
    return subprocess.call([str(python), str(ROOT / "tools" / "build_book.py"), *args], cwd=ROOT)


COMMANDS = {"lab": cmd_lab, "test": cmd_test, "execute": cmd_execute, "colab": cmd_colab, "gpu-check": cmd_gpu_check}
COMMANDS["book"] = cmd_book


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        return 0 if argv[:1] in ([], ["-h"], ["--help"]) else 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
