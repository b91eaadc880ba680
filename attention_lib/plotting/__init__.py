"""Pictures for the lessons, each returned as a matplotlib figure; one module per kind of picture.

matplotlib is imported inside each function, so ``import attention_lib`` stays fast and works without a
display; the functions work headless (the Agg backend) and take tensors on any device.
"""

from .basic import plot_bars, plot_heatmap, plot_heatmaps, plot_lines
from .tiles import online_softmax_steps, plot_causal_tiles, plot_online_softmax_steps

__all__ = ["online_softmax_steps", "plot_bars", "plot_causal_tiles", "plot_heatmap", "plot_heatmaps", "plot_lines",
           "plot_online_softmax_steps"]
