"""Where the project's files are, the one list of notebooks, and the settings under which notebooks run.

Standard library only: ``course.py`` imports it before anything is installed.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def all_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """Every notebook of the course under ``folder``, lessons and solutions, in file-name order: the one list of
    them, used by ``execute``, ``colab``, ``book`` and the tests."""
    return sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


#: The pins, each written here once: the torch CI installs for its pinned part (PyTorch's CPU build; .ci/run reads it
#: with ``python3 tools/project.py --pin torch``), and the Triton that torch's default Linux wheel requires, which
#: ``--cpu`` installs (tools/environment.py) and CI installs with its torch.
PINS = {"torch": "2.13.0", "triton": "3.8.0"}


def pin(name: str) -> str:
    """``"torch==2.13.0"``: the pip requirement of one of :data:`PINS`."""
    return f"{name}=={PINS[name]}"


#: The lessons that train a model, by file name without ``.ipynb``: the one list of them. What training prints
#: differs in the last digits from one CPU or torch release to the next, so they check trained numbers against
#: measured bands, and CI runs them under the newest torch and under other CPUs' kernels (``ATEN_CPU_CAPABILITY``);
#: ``pytest -m trains`` selects them. A new lesson that trains joins here (tests/test_notebooks.py checks that
#: every lesson calling a training function is listed).
TRAINING_NOTEBOOKS = ("12_learning_to_attend", "13_induction_heads", "15_generation", "16_ring_attention")


def training_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks of :data:`TRAINING_NOTEBOOKS` under ``folder``."""
    return [path for path in all_notebooks(folder) if path.stem in TRAINING_NOTEBOOKS]


#: The environment shared by `execute` and `test`: the stored outputs are made and checked under it.
RUN_ENV = {
    "OMP_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
    "PYTHONHASHSEED": "0",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    "JUPYTER_PLATFORM_DIRS": "1",
}

#: strict nbval: outputs are compared (not --nbval-lax), in this environment's kernel; a cell that runs longer than
#: the timeout fails with nbval's message instead of waiting for ever.
NBVAL_ARGS = [
    "--nbval",
    "--nbval-current-env",
    "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
    "--nbval-cell-timeout", "600",
]


def run_env() -> dict[str, str]:
    """This process's environment with :data:`RUN_ENV` on top."""
    return {**os.environ, **RUN_ENV}


if __name__ == "__main__":  # `python3 tools/project.py --pin torch` prints 2.13.0, for .ci/run
    import sys

    if sys.argv[1:2] == ["--pin"] and len(sys.argv) == 3 and sys.argv[2] in PINS:
        print(PINS[sys.argv[2]])
    else:
        sys.exit(f"usage: python3 tools/project.py --pin {{{','.join(PINS)}}}")
