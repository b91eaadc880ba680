"""Root conftest: tests and doctests draw figures headless (and close them), doctests see `torch`, and the slow
tests carry the ``slow`` marker (``pytest -m "not slow"`` leaves them out; ``python course.py test`` runs them all).
"""

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent

#: What is slow, in one place: whole test files, or single tests (``file::name``, every parametrization of it).
#: Notebooks under nbval (``--nbval``) are slow too. Measured on a busy 2-core machine.
SLOW = {
    "tests/test_browser.py": "every lesson run in JupyterLab in Chromium (minutes)",
    "tests/test_book.py": "builds the website and opens every page in Chromium (about 1 min)",
}


def pytest_collection_modifyitems(items):
    for item in items:
        path = Path(str(item.path)).resolve()
        name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        if path.suffix == ".ipynb" or name in SLOW or f"{name}::{getattr(item, 'originalname', item.name)}" in SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["torch"] = torch


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test or doctest drew, so hundreds of figures never pile up in memory."""
    yield
    plt.close("all")
