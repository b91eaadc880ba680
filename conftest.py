"""Root conftest: tests and doctests draw figures headless (and close them), doctests see `torch`, the slow tests
carry the ``slow`` marker (``pytest -m "not slow"`` leaves them out; ``python3 course.py test`` runs them all),
the notebooks that train carry the ``trains`` marker (``tools/project.py``'s ``TRAINING_NOTEBOOKS``), and every test
carries the ``lessonNN`` marker of each lesson it belongs to (``tools/lessons.py``; ``python3 course.py test
--lesson 08`` is ``pytest -m lesson08``).
"""

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

from tools.lessons import lessons, lessons_of
from tools.project import TRAINING_NOTEBOOKS

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent

#: What is slow, in one place: whole test files, or single tests (``file::name``, every parametrization of it), each
#: with why. Notebooks under nbval (``--nbval``) are slow too, and so are the tests marked ``@pytest.mark.slow``.
#: The single tests took 35-95 s each on a busy 2-core machine (load average 12-17), where the others took under 30 s.
SLOW = {
    "tests/test_browser.py": "every lesson run in JupyterLab in Chromium",
    "tests/test_book.py": "builds the website and opens every page in Chromium",
    "tests/test_bench.py::test_quick_command_prints_every_section": "runs the benchmark",
    "tests/test_bench.py::test_main_returns_the_measurements": "runs the benchmark",
    "tests/test_memory.py::test_gpu_check_compares_the_backward_pass": "runs the GPU check's comparison",
    "tests/test_devices.py::test_gpu_check_without_cuda_says_so_and_succeeds": "runs tools/gpu_check.py",
    "tests/test_training.py::test_recipe_reproduces_the_agreement_model": "trains a model",
    "tests/test_training.py::test_recipe_reproduces_the_reversal_model": "trains a model",
    "tests/test_training.py::test_without_positions_reversal_fails": "trains a model",
}


def slow_key(item) -> tuple[str, str]:
    """``(file, file::test)`` of a collected item, relative to the repository, as :data:`SLOW` names them."""
    path = Path(str(item.path)).resolve()
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return name, f"{name}::{getattr(item, 'originalname', item.name)}"


def pytest_configure(config):
    for slug, number in lessons().items():
        config.addinivalue_line("markers", f"lesson{number}: a test of lesson {number}, {slug} (test --lesson)")


def pytest_collection_modifyitems(items):
    for item in items:
        dtest = getattr(item, "dtest", None)
        for number in sorted(lessons_of(Path(str(item.path)), item.name, function=getattr(item, "function", None),
                                        params=getattr(getattr(item, "callspec", None), "params", None),
                                        docstring=getattr(dtest, "docstring", None) or "")):
            item.add_marker(getattr(pytest.mark, f"lesson{number}"))
        path = Path(str(item.path))
        if path.suffix == ".ipynb" or any(key in SLOW for key in slow_key(item)):
            item.add_marker(pytest.mark.slow)
        if path.suffix == ".ipynb" and path.stem in TRAINING_NOTEBOOKS:
            item.add_marker(pytest.mark.trains)


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["torch"] = torch


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test or doctest drew, so hundreds of figures never pile up in memory."""
    yield
    plt.close("all")
