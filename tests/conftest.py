"""Hypothesis profiles: "ci" is thorough but bounded for a 2-core machine, "dev" is quick."""

import os

import matplotlib.pyplot as plt
import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every matplotlib figure a test drew, so hundreds of figures never pile up in memory."""
    yield
    plt.close("all")
