"""Root conftest: doctests in attention_lib draw figures headless, and see `torch` as a global."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["torch"] = torch
