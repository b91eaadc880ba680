"""Pictures for the lessons, each returned as a matplotlib figure; one module per kind of picture.

matplotlib is imported inside each function, so ``import attention_lib`` stays fast and works without a
display; the functions work headless (the Agg backend) and take tensors on any device. Colours, markers and
log-axis ticks follow :mod:`attention_lib.plotting.style` (Okabe-Ito, viridis, plain numbers).
"""

from .basic import plot_bars, plot_heatmap, plot_heatmaps, plot_lines
from .masks import plot_mask
from .mix import plot_mix
from .style import OKABE_ITO, category_style, plain_log_ticks

__all__ = ["OKABE_ITO", "category_style", "plain_log_ticks", "plot_bars", "plot_heatmap", "plot_heatmaps",
           "plot_lines", "plot_mask", "plot_mix"]
