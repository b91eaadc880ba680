#!/usr/bin/env python3
"""The project's commands, with nothing but Python 3.10+ needed to start.

    python course.py lab        open the course in JupyterLab (creates .venv on first use)
    python course.py test       run the whole test suite: package tests, doctests, ruff, strict nbval, browser
    python course.py execute    regenerate every notebook's stored outputs (the only way outputs are made)
    python course.py colab      rewrite every notebook's Colab badge and setup cell from pyproject.toml
    python course.py gpu-check  on a CUDA machine: device tests, strict nbval and timings on the GPU
    python course.py book       build the course website from the stored outputs (book/_build/html)

Each command first makes sure ``.venv`` exists and holds the project with its ``dev`` extras (it reinstalls
when ``pyproject.toml`` changes), printing each step with its time. Options for that first install:

    --cpu (or COURSE_TORCH=cpu)   install PyTorch's CPU-only build first, from PyTorch's CPU wheel index
                                  (about 190 MB instead of about 3 GB of CUDA libraries on Linux)
    COURSE_QUIET=1                hide pip's own output (its download progress)
    COURSE_DRY_RUN=1              print what would be installed and run, and do nothing

A torch already in the environment is never replaced. ``python course.py test`` also provides the browser
test's Chromium when none is found (apt as root or with passwordless sudo, else Playwright's download);
``COURSE_SKIP_BROWSER=1`` skips that test. Set ``COURSE_VENV`` to use another environment folder, or
``COURSE_NO_VENV=1`` to use the Python that runs this script as it is (e.g. inside a conda environment made
from ``environment.yml``). ``execute`` and ``test`` run with the same environment variables (threads, seeds),
so the stored outputs are the ones the tests expect.
"""

from __future__ import annotations

import glob
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"


def all_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """Every notebook of the course under ``folder``, lessons and solutions, in file-name order: the one list of
    them, used by ``execute``, ``colab``, ``book`` and the tests."""
    return sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)

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

#: PyTorch's own index of CPU-only wheels (``--cpu``); pip gives up on it within seconds when it is unreachable.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH = "torch>=2.1"  # the bound in pyproject.toml
FAIL_FAST = ["--timeout", "15", "--retries", "0"]
#: Where the browser test looks for Chromium (first match wins; COURSE_CHROMIUM overrides); as tests/browser/lab.py.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SKIP_HINT = "COURSE_SKIP_BROWSER=1 python course.py test"


class Step:
    """One install step: a title for the learner, the command that does it, files written just before it runs."""

    def __init__(self, title: str, argv: list[str], files: dict[Path, str] | None = None):
        self.title, self.argv, self.files = title, argv, files or {}


class StepFailed(RuntimeError):
    pass


def dry_run() -> bool:
    return os.environ.get("COURSE_DRY_RUN") == "1"


def say(message: str) -> None:
    print(f"[course] {message}", flush=True)


def run_steps(steps: list[Step]) -> None:
    """Run the steps in order, each announced with its command and followed by its time."""
    for number, step in enumerate(steps, 1):
        say(f"step {number}/{len(steps)}: {step.title}")
        print(f"         $ {shlex.join(step.argv)}", flush=True)
        if dry_run():
            continue
        for path, text in step.files.items():
            path.write_text(text)
        start = time.monotonic()
        if subprocess.call(step.argv) != 0:
            raise StepFailed(f"step {number}/{len(steps)} failed: {step.title} (see the output above)")
        say(f"step {number}/{len(steps)} done in {time.monotonic() - start:.0f} s")


def installed_version(python: Path, package: str) -> str | None:
    """The version of ``package`` in the environment of ``python``, or None (without importing it)."""
    if not python.exists():
        return None
    code = f"import importlib.metadata as m\ntry: print(m.version({package!r}))\nexcept m.PackageNotFoundError: pass"
    found = subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()
    return found or None


def torch_choice() -> str:
    """``cpu`` (``--cpu`` or ``COURSE_TORCH=cpu``) or ``default`` (whatever pip picks from PyPI)."""
    choice = os.environ.get("COURSE_TORCH", "default").lower()
    if choice not in ("cpu", "default"):
        raise SystemExit(f"COURSE_TORCH={choice!r} is not known: use COURSE_TORCH=cpu (or leave it unset)")
    return choice


def has_nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def download_notice(choice: str) -> str:
    """What the first install downloads, said before it starts."""
    common = "JupyterLab, pytest, nbval, Playwright's Python package and their dependencies (about 200 MB)"
    if choice == "cpu":
        return (f"Downloading PyTorch's CPU-only build (about 190 MB, from {CPU_INDEX}), then {common}; "
                "the environment takes about 1.5 GB on disk.")
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
        advice = ("No NVIDIA GPU was found here: to skip the CUDA libraries, press Ctrl+C now and run "
                  "`python course.py lab --cpu` (or `python course.py test --cpu`) instead."
                  if not has_nvidia_gpu() else "An NVIDIA GPU was found: the lessons will use it.")
        return (f"Downloading PyTorch from PyPI: on Linux this is the CUDA build, about 3 GB of downloads "
                f"(torch and NVIDIA's libraries), then {common}; the environment takes about 6 GB on disk. {advice}")
    return f"Downloading PyTorch from PyPI (a few hundred MB), then {common}."


def cpu_index_problem() -> str | None:
    """Why PyTorch's CPU index cannot be reached (one quick try), or None when it answers."""
    try:
        with urllib.request.urlopen(f"{CPU_INDEX}/torch/", timeout=10):
            return None
    except OSError as error:
        return str(getattr(error, "reason", error))


def install_plan(venv: Path, choice: str) -> tuple[list[Step], list[str]]:
    """The steps that make ``venv`` hold the project with its ``dev`` extras, and notes for the learner.

    No steps when the environment is ready (installed from the current ``pyproject.toml``).
    """
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
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
        notes.append(f"torch {torch} is already installed: it is kept (the project is installed around it).")
        if choice == "cpu":
            notes.append("The CPU option only applies to a new environment: to switch, delete the environment "
                         "folder and run the command again.")
        pin = venv / ".course-constraints.txt"
        steps.append(Step("install the course and its tools", [*project, "--constraint", str(pin)],
                          files={pin: f"torch=={torch}\n"}))
    else:
        notes.append(download_notice(choice))
        if choice == "cpu":
            steps.append(Step("install PyTorch's CPU-only build",
                              [*pip, *FAIL_FAST, "--index-url", CPU_INDEX, TORCH]))
        steps.append(Step("install the course and its tools", project))
    return steps, notes


def pyproject_digest() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def venv_python() -> Path:
    """The Python of the project's environment, creating and installing it when needed."""
    if os.environ.get("COURSE_NO_VENV"):
        return Path(sys.executable)
    venv = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    steps, notes = install_plan(venv, torch_choice())
    if not steps:
        return python
    if any(CPU_INDEX in step.argv for step in steps) and not dry_run():
        problem = cpu_index_problem()  # one quick try, before anything is created
        if problem:
            raise StepFailed(f"PyTorch's CPU index ({CPU_INDEX}) cannot be reached: {problem}. Check the "
                             "connection, or leave out --cpu (and COURSE_TORCH) to install PyTorch from PyPI.")
    for note in notes:
        say(note)
    start = time.monotonic()
    run_steps(steps)
    if not dry_run():
        (venv / ".course-installed").write_text(pyproject_digest())
        say(f"environment ready in {time.monotonic() - start:.0f} s")
    return python


# -- the browser test's Chromium ----------------------------------------------------------------------------
def find_chromium() -> str | None:
    """Chromium as tests/browser/lab.py finds it: COURSE_CHROMIUM, then PATH, then Playwright's own download."""
    explicit = os.environ.get("COURSE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        if shutil.which(name):
            return shutil.which(name)
    cache = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright"
    found = sorted(glob.glob(str(Path(cache) / "chromium-*" / "chrome-linux*" / "chrome")))
    return found[-1] if found else None


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def has_sudo() -> bool:
    """Passwordless sudo works (``sudo -n true`` never asks for a password)."""
    if not shutil.which("sudo"):
        return False
    return subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0


def browser_plan(python: Path) -> list[Step]:
    """The ways to get Chromium here, in order of preference; the first that works is enough."""
    apt = ["-o", "DPkg::Lock::Timeout=300", "-q"]
    plans = []
    if shutil.which("apt-get") and (is_root() or has_sudo()):
        sudo = [] if is_root() else ["sudo", "-n"]
        plans.append([Step("update apt's package lists", [*sudo, "apt-get", *apt, "update"]),
                      Step("install Debian's Chromium with apt",
                           [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", *apt, "install", "-y",
                            "--no-install-recommends", "chromium", "fonts-dejavu-core"])])
    plans.append([Step("download Playwright's Chromium", [str(python), "-m", "playwright", "install", "chromium"])])
    return plans


def browser_needed(args: list[str]) -> bool:
    """Whether this test run collects tests/test_browser.py (all tests, or a path that holds it)."""
    if os.environ.get("COURSE_SKIP_BROWSER") == "1":
        return False
    paths = [Path(arg.split("::")[0]) for arg in args if not arg.startswith("-")]
    paths = [path.resolve() for path in paths if (ROOT / path).exists() or path.exists()]
    browser_test = ROOT / "tests" / "test_browser.py"
    return not paths or any(path == browser_test or path in browser_test.parents for path in paths)


def ensure_browser(python: Path) -> bool:
    """Find or install Chromium for the browser test; False (after one message) when none can be had."""
    if find_chromium():
        return True
    if os.environ.get("COURSE_CHROMIUM"):
        print(f"COURSE_CHROMIUM={os.environ['COURSE_CHROMIUM']} is not a file: point it at a Chrome or Chromium, "
              f"or leave it unset to have one found or installed, or skip the browser test: `{SKIP_HINT}`.")
        return False
    say("The browser test needs Chromium and none was found: installing it.")
    tried = []
    for plan in browser_plan(python):
        try:
            run_steps(plan)
        except StepFailed as error:
            tried.append(f"{plan[-1].title}: {error}")
            continue
        if dry_run() or find_chromium():
            return True
        tried.append(f"{plan[-1].title}: done, but no Chromium was found afterwards")
    if not (is_root() or has_sudo()):
        tried.insert(0, "apt: not run (needs root or passwordless sudo)")
    print("\nThe browser test (tests/test_browser.py) needs Chromium: none was found, and none could be "
          "installed:\n" + "".join(f"  - {line}\n" for line in tried) + "Choose one:\n"
          "  - install it as root (Debian/Ubuntu: `sudo apt-get install chromium`), then `python course.py test`;\n"
          "  - with internet access, `python course.py test` downloads Playwright's Chromium;\n"
          "  - use a Chrome or Chromium you have: `COURSE_CHROMIUM=/path/to/chrome python course.py test`;\n"
          f"  - skip the browser test: `{SKIP_HINT}`.", flush=True)
    return False


def run_env() -> dict[str, str]:
    return {**os.environ, **RUN_ENV}


def cmd_lab(args: list[str]) -> int:
    python = venv_python()
    extra = ["--allow-root"] if is_root() else []  # containers, Colab-like VMs
    if os.name == "posix":  # kernels over local sockets: no "Kernel is running over TCP without encryption"
        extra.append("--KernelManager.transport=ipc")
    argv = [str(python), "-m", "jupyter", "lab", f"--notebook-dir={NOTEBOOKS}", *extra, *args]
    if dry_run():
        return print(f"         $ {shlex.join(argv)}") or 0
    return subprocess.call(argv, cwd=ROOT)


def cmd_test(args: list[str]) -> int:
    python = venv_python()
    if browser_needed(args) and not ensure_browser(python):
        return 1
    argv = [str(python), "-m", "pytest", *NBVAL_ARGS, *args]
    if dry_run():
        return print(f"         $ {shlex.join(argv)}") or 0
    return subprocess.call(argv, cwd=ROOT, env=run_env())


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


COMMANDS = {"lab": cmd_lab, "test": cmd_test, "execute": cmd_execute, "colab": cmd_colab, "gpu-check": cmd_gpu_check,
            "book": cmd_book}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        return 0 if argv[:1] in ([], ["-h"], ["--help"]) else 2
    if "--cpu" in argv[1:]:  # an install option, not the command's: `python course.py lab --cpu`
        argv = [arg for arg in argv if arg != "--cpu"]
        os.environ["COURSE_TORCH"] = "cpu"
    try:
        return COMMANDS[argv[0]](argv[1:])
    except StepFailed as error:
        print(f"\n{error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
