"""Reading numbers back from the figures the explorers draw (shared by tests/test_widgets.py and
tests/test_explorer_figures.py)."""

import torch


def bar_heights(ax, dtype=torch.float64) -> torch.Tensor:
    """The heights of the bars drawn in ``ax``, in drawing order."""
    return torch.tensor([float(bar.get_height()) for bar in ax.patches], dtype=dtype)
