"""The project's environment (``.venv``): what the first run installs, and installing it, step by step.

Standard library only: ``course.py`` uses it to create the environment it then runs everything in. The plan is
the project with its ``dev`` extras. PyTorch is chosen once, when the environment gets its first torch: PyPI's default
(``COURSE_TORCH=default``; on Linux the CUDA build) or PyTorch's CPU-only build (``--cpu``, ``COURSE_TORCH=cpu``, with
the Triton that lesson 14's kernels need, which the default Linux torch brings itself). On a Linux PC without an
NVIDIA GPU, where the two differ most, a run at a terminal that was told neither asks, saying what each costs. A
torch or Triton already in the environment is never replaced. The environment is reinstalled when
``pyproject.toml`` changes.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .project import ROOT, pin
from .steps import Step, StepFailed, dry_run, run_steps, say

#: PyTorch's own index of CPU-only wheels (``--cpu``); pip gives up on it within seconds when it is unreachable.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH = "torch>=2.1"  # the bound in pyproject.toml
#: The Triton release that the pinned torch's default Linux wheel requires (PINS in tools/project.py): ``--cpu``
#: installs it, as the CPU-only build brings none. Triton has wheels for Linux only.
TRITON = pin("triton")
FAIL_FAST = ["--timeout", "15", "--retries", "0"]


def python_in(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def installed_version(python: Path, package: str) -> str | None:
    """The version of ``package`` in the environment of ``python``, or None (without importing it)."""
    if not python.exists():
        return None
    code = f"import importlib.metadata as m\ntry: print(m.version({package!r}))\nexcept m.PackageNotFoundError: pass"
    found = subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()
    return found or None


#: What each choice downloads and takes on disk on Linux x86-64 (the whole ``.venv``), measured on a fresh clone:
#: PyPI's torch 2.14.1 (CUDA 13) with its NVIDIA libraries and Triton 3.8.0, and torch 2.13.0+cpu with Triton 3.8.0.
#: The README's table says the same (tests/test_course.py compares them).
COSTS = {"default": ("3.2 GB", "6.1 GB"), "cpu": ("0.65 GB", "2.5 GB")}
CHOICES = ("default", "cpu")
#: The command a learner types (Debian and Ubuntu have no ``python``, only ``python3``).
COURSE = "python course.py" if os.name == "nt" else "python3 course.py"


def torch_choice() -> str | None:
    """``cpu`` (``--cpu`` or ``COURSE_TORCH=cpu``), ``default`` (``COURSE_TORCH=default``: whatever pip picks from
    PyPI), or None when the learner said neither."""
    choice = os.environ.get("COURSE_TORCH", "").lower() or None
    if choice not in (None, *CHOICES):
        raise SystemExit(f"COURSE_TORCH={choice!r} is not known: use COURSE_TORCH=cpu or COURSE_TORCH=default "
                         "(or leave it unset)")
    return choice


def has_nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def triton_has_wheels() -> bool:
    """Triton publishes wheels for Linux only; elsewhere lesson 14 runs on Colab."""
    return platform.system() == "Linux"


def cuda_by_default() -> bool:
    """PyPI's torch is the CUDA build here (Linux x86-64); elsewhere it is the small one."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def cost(choice: str) -> str:
    download, disk = COSTS[choice]
    return f"about {download} to download, {disk} on disk"


def choice_question() -> str:
    """What a learner on a Linux PC without an NVIDIA GPU is asked, once, before the environment gets its torch."""
    return (f"No NVIDIA GPU was found: PyTorch will run on the CPU. Which PyTorch should the environment get?\n"
            f"  1. PyTorch's CPU-only build, from {CPU_INDEX} ({cost('cpu')})\n"
            f"  2. PyPI's default, the CUDA build ({cost('default')}; its CUDA libraries go unused on this machine)\n"
            f"Both run every lesson. The choice is made once: the environment keeps its torch. Choose 1 or 2 [1]: ")


def ask_choice() -> str | None:
    """The learner's answer to :func:`choice_question` (``cpu`` or ``default``), or None when nobody can answer
    (no terminal, or a dry run)."""
    if dry_run() or not sys.stdin.isatty():
        return None
    while True:
        try:
            answer = input(f"[course] {choice_question()}").strip()
        except EOFError:
            return None
        if answer in ("", "1", "2"):
            return "default" if answer == "2" else "cpu"
        print("[course] Please answer 1 or 2.")


def download_notice(choice: str, chosen: bool = True) -> str:
    """What the first install downloads, said before it starts; ``chosen`` is False when the learner chose
    nothing and nobody could be asked (the notice then says how to choose the other build)."""
    common = "JupyterLab, pytest, nbval, Playwright's Python package and their dependencies (about 200 MB)"
    if choice == "cpu":
        if not triton_has_wheels():
            return (f"Downloading PyTorch's CPU-only build (about 190 MB, from {CPU_INDEX}), then {common}. Triton "
                    "has no wheel for this system: lesson 14 (the Triton kernel) runs on Colab instead.")
        return (f"Downloading PyTorch's CPU-only build from {CPU_INDEX}, Triton for lesson 14, then {common}: "
                f"{cost('cpu')}.")
    if cuda_by_default():
        advice = "An NVIDIA GPU was found: the lessons will use it."
        if not has_nvidia_gpu():
            advice = "No NVIDIA GPU was found: the CUDA libraries will go unused here."
            if not chosen:
                advice += (f" To install PyTorch's CPU-only build instead ({cost('cpu')}), press Ctrl+C now and run "
                           f"the command again with --cpu, e.g. `{COURSE} lab --cpu`.")
        return (f"Downloading PyTorch from PyPI, the CUDA build (torch, NVIDIA's libraries and Triton), then "
                f"{common}: {cost('default')}. {advice}")
    return (f"Downloading PyTorch from PyPI (a few hundred MB), then {common}. Triton has no wheel for this system: "
            "lesson 14 (the Triton kernel) runs on Colab instead.")


def cpu_index_problem() -> str | None:
    """Why PyTorch's CPU index cannot be reached (one quick try), or None when it answers."""
    try:
        with urllib.request.urlopen(f"{CPU_INDEX}/torch/", timeout=10):
            return None
    except OSError as error:
        return str(getattr(error, "reason", error))


def pyproject_digest() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def install_plan(venv: Path, choice: str | None) -> tuple[list[Step], list[str]]:
    """The steps that make ``venv`` hold the project with its ``dev`` extras, and notes for the learner.

    ``choice`` is the learner's PyTorch (``cpu`` or ``default``), or None when they said neither: PyPI's default,
    with a note on the other choice where it matters. No steps when the environment is ready (installed from the
    current ``pyproject.toml``).
    """
    python = python_in(venv)
    pip = [str(python), "-m", "pip", "install", *(["--quiet"] if os.environ.get("COURSE_QUIET") == "1" else [])]
    steps, notes = [], []
    if not python.exists():
        steps.append(Step(f"create the environment in {venv}", [sys.executable, "-m", "venv", str(venv)]))
        steps.append(Step("update pip", [*pip, "--upgrade", "pip"]))
    stamp = venv / ".course-installed"
    if stamp.exists() and stamp.read_text() == pyproject_digest():
        return steps, notes
    torch = installed_version(python, "torch")
    project = [*pip, "-e", f"{ROOT}[dev]"]
    if torch:
        kept = {"torch": torch, "triton": installed_version(python, "triton")}
        kept = {name: version for name, version in kept.items() if version}
        names = " and ".join(f"{name} {version}" for name, version in kept.items())
        notes.append(f"{names} {'is' if len(kept) == 1 else 'are'} already installed: "
                     f"{'it is' if len(kept) == 1 else 'they are'} kept (the project is installed around them).")
        if choice == "cpu":
            notes.append("The CPU option only applies to a new environment: to switch, delete the environment "
                         "folder and run the command again.")
        pin = venv / ".course-constraints.txt"
        steps.append(Step("install the course and its tools", [*project, "--constraint", str(pin)],
                          files={pin: "".join(f"{name}=={version}\n" for name, version in kept.items())}))
        return steps, notes
    notes.append(download_notice(choice or "default", chosen=choice is not None))
    if choice == "cpu":
        steps.append(Step("install PyTorch's CPU-only build", [*pip, *FAIL_FAST, "--index-url", CPU_INDEX, TORCH]))
        if triton_has_wheels():
            steps.append(Step("install Triton (lesson 14's kernels; on the CPU, its interpreter runs them)",
                              [*pip, TRITON]))
    steps.append(Step("install the course and its tools", project))
    return steps, notes


def venv_python() -> Path:
    """The Python of the project's environment, creating and installing it when needed.

    ``COURSE_NO_VENV=1``: the Python that runs this, as it is. ``COURSE_VENV``: another environment folder.
    """
    if os.environ.get("COURSE_NO_VENV"):
        return Path(sys.executable)
    venv = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
    choice = torch_choice()
    steps, notes = install_plan(venv, choice)
    if not steps:
        return python_in(venv)
    new_torch = not installed_version(python_in(venv), "torch")
    if choice is None and new_torch and cuda_by_default() and not has_nvidia_gpu():
        choice = ask_choice()  # None: nobody to ask, PyPI's default (and the notice says how to choose)
        if choice is not None:
            steps, notes = install_plan(venv, choice)
    if any(CPU_INDEX in step.argv for step in steps) and not dry_run():
        problem = cpu_index_problem()  # one quick try, before anything is created
        if problem:
            raise StepFailed(f"PyTorch's CPU index ({CPU_INDEX}) cannot be reached: {problem}. Nothing was "
                             "installed. Check the connection and run the command again; or take PyPI's default "
                             f"build, which needs no other index ({cost('default')}): `COURSE_TORCH=default "
                             f"{COURSE} lab`.")
    for note in notes:
        say(note)
    start = time.monotonic()
    run_steps(steps)
    if not dry_run():
        (venv / ".course-installed").write_text(pyproject_digest())
        say(f"environment ready in {time.monotonic() - start:.0f} s")
    return python_in(venv)
