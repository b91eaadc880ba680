"""Root conftest: tests and doctests draw figures headless (and close them), and doctests see `torch`."""

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["torch"] = torch


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test or doctest drew, so hundreds of figures never pile up in memory."""
    yield
    plt.close("all")
