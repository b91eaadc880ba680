#!/usr/bin/env python3
"""The project's commands, with nothing but Python 3.10+ needed to start (``python3`` on Debian and Ubuntu).

    python3 course.py lab        open the course in JupyterLab (creates .venv on first use)
    python3 course.py test       run the whole test suite: package tests, doctests, ruff, strict nbval, browser
                                 (`python3 course.py test -m "not slow"`: the quick part, without notebooks and browser;
                                 `python3 course.py test --lesson 08`: everything of one lesson, see tools/lessons.py)
    python3 course.py remake     regenerate what the tests compare against (weights, bands, studies, targets,
                                 figures): `remake --list` lists each with its command, `remake NAME` runs one
    python3 course.py execute    regenerate every notebook's stored outputs (the only way outputs are made)
    python3 course.py colab      rewrite every notebook's Colab badge and setup cell from pyproject.toml
    python3 course.py reading-time  every lesson's reading time from its content; `--write` states it in the
                                 lesson's title cell, `--check` fails on a missing or stale one (tools/reading_time.py)
    python3 course.py gpu-check  on a CUDA machine: device tests, the Triton kernel, bench --device cuda and strict
                                 nbval of lesson 14, in one report (artifacts/gpu-check.txt)
    python3 course.py book       build the course website from the stored outputs (book/_build/html)
    python3 course.py help       this text (also -h, --help)

Each command first makes sure ``.venv`` exists and holds the project with its ``dev`` extras (it reinstalls
when ``pyproject.toml`` changes), printing each step with its time. Options for that first install:

    --cpu (or COURSE_TORCH=cpu)   PyTorch's CPU-only build, from PyTorch's CPU wheel index, and on Linux Triton for
                                  lesson 14: about 0.65 GB to download, 2.5 GB on disk
    COURSE_TORCH=default          PyPI's torch, what a plain `pip install torch` gives: on Linux the CUDA build,
                                  about 3.2 GB to download, 6.1 GB on disk
    COURSE_QUIET=1                hide pip's own output (its download progress)
    COURSE_DRY_RUN=1              print what would be installed and run, and do nothing

With neither, PyPI's torch is installed; on a Linux PC without an NVIDIA GPU a run at a terminal asks first, once.
A torch (or Triton) already in the environment is never replaced. When a test run includes a browser test and no
Chromium is found, the run provides one before its first test (apt as root or with passwordless sudo, else
Playwright's download); ``COURSE_SKIP_BROWSER=1`` skips those tests. ``test`` runs pytest with ``-v``, so that each
test, notebook cell and page is named as it runs (``-q`` gives pytest's dots). Set ``COURSE_VENV`` to use another
environment folder, or ``COURSE_NO_VENV=1`` to use the Python that runs this script as it is (e.g. inside a conda
environment made from ``environment.yml``). ``execute`` and ``test`` run with the same environment variables
(threads, seeds), so the stored outputs are the ones the tests expect.

The parts live in ``tools/`` (standard library only): ``project.py`` (paths, notebooks, how they run),
``steps.py`` (announced install steps), ``environment.py`` (``.venv``) and ``chromium.py`` (the browser).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # the parts in tools/, from any working directory
    sys.path.insert(0, str(ROOT))

from tools import remake  # noqa: E402
from tools.chromium import is_root  # noqa: E402
from tools.environment import venv_python  # noqa: E402
from tools.lessons import lesson_number  # noqa: E402
from tools.project import NBVAL_ARGS, NOTEBOOKS, RUN_ENV, all_notebooks, run_env  # noqa: E402
from tools.steps import StepFailed, dry_run  # noqa: E402

# What other tools and the tests import from here: the one list of notebooks, and how notebooks run.
__all__ = ["NBVAL_ARGS", "NOTEBOOKS", "ROOT", "RUN_ENV", "all_notebooks", "main"]


def run_tool(script: str, args: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``tools/SCRIPT`` with the environment's Python, from the repository root."""
    python = venv_python()
    return subprocess.call([str(python), str(ROOT / "tools" / script), *args], cwd=ROOT, env=env)


def cmd_lab(args: list[str]) -> int:
    python = venv_python()
    extra = ["--allow-root"] if is_root() else []  # containers, Colab-like VMs
    if os.name == "posix":  # kernels over local sockets: no "Kernel is running over TCP without encryption"
        extra.append("--KernelManager.transport=ipc")
    argv = [str(python), "-m", "jupyter", "lab", f"--notebook-dir={NOTEBOOKS}", *extra, *args]
    if dry_run():
        return print(f"         $ {shlex.join(argv)}") or 0
    return subprocess.call(argv, cwd=ROOT)


def lesson_args(args: list[str]) -> list[str]:
    """``--lesson NN`` (a number or a name) as pytest's ``-m lessonNN`` (see ``tools/lessons.py``).

    Raises:
        SystemExit: for ``--lesson`` without a lesson, a lesson that does not exist, or ``-m`` besides it.
    """
    if "--lesson" not in args:
        return args
    at = args.index("--lesson")
    if at + 1 >= len(args) or "-m" in args:
        raise SystemExit("--lesson takes one lesson, e.g. `python3 course.py test --lesson 08`, and no -m besides.")
    try:
        number = lesson_number(args[at + 1])
    except ValueError as error:
        raise SystemExit(str(error)) from error
    return [*args[:at], "-m", f"lesson{number}", *args[at + 2:]]


def cmd_test(args: list[str]) -> int:
    """pytest with strict nbval, naming each test as it runs (``-v``; ``-q`` brings back pytest's dots)."""
    args = lesson_args(args)
    python = venv_python()
    argv = [str(python), "-m", "pytest", "-v", *NBVAL_ARGS, *args]
    if dry_run():
        return print(f"         $ {shlex.join(argv)}") or 0
    return subprocess.call(argv, cwd=ROOT, env=run_env())


def cmd_remake(args: list[str]) -> int:
    """``remake --list`` (no environment needed) or ``remake NAME ...`` in the environment (``tools/remake.py``)."""
    if not args or args == ["--list"] or any(name not in remake.REMAKES for name in args if name != "all"):
        return remake.main(args)
    return remake.main(args, str(venv_python()), dry=dry_run())


HELP = ("help", "-h", "--help")
COMMANDS = {
    "lab": cmd_lab,
    "test": cmd_test,
    "remake": cmd_remake,
    "execute": lambda args: run_tool("execute_notebooks.py", args, env=run_env()),
    "colab": lambda args: run_tool("colab_sync.py", args),
    "reading-time": lambda args: run_tool("reading_time.py", args),
    "gpu-check": lambda args: run_tool("gpu_check.py", args, env=run_env()),
    "book": lambda args: run_tool("build_book.py", args),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in HELP:
        print(__doc__)
        return 0
    if argv[0] not in COMMANDS:
        print(f"{argv[0]!r} is not a command of course.py; the commands:\n{__doc__}", file=sys.stderr)
        return 2
    if "--cpu" in argv[1:]:  # an install option, not the command's: `python3 course.py lab --cpu`
        argv = [arg for arg in argv if arg != "--cpu"]
        os.environ["COURSE_TORCH"] = "cpu"
    try:
        return COMMANDS[argv[0]](argv[1:])
    except StepFailed as error:
        print(f"\n{error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
