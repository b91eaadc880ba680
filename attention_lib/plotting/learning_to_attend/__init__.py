"""The figures of ``notebooks/12_learning_to_attend.ipynb``: what the trained models attend to
(:mod:`~attention_lib.plotting.learning_to_attend.trained`) and the block diagram
(:mod:`~attention_lib.plotting.learning_to_attend.blocks`)."""

from .blocks import plot_block_diagram
from .trained import plot_attention_grid, plot_attention_over_training, plot_loss_curves, plot_shipped_overview

__all__ = ["plot_attention_grid", "plot_attention_over_training", "plot_block_diagram", "plot_loss_curves",
           "plot_shipped_overview"]
