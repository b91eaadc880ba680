"""Pictures for the lessons, each returned as a matplotlib figure; one module per kind of picture.

matplotlib is imported inside each function, so ``import attention_lib`` stays fast and works without a
display; the functions work headless (the Agg backend) and take tensors on any device. Colours, markers and
log-axis ticks follow :mod:`attention_lib.plotting.style` (Okabe-Ito, viridis, plain numbers).

Every figure has a text alternative (:mod:`attention_lib.plotting.alt`): each helper takes ``alt="..."`` and
otherwise describes what it drew. Importing this package inside IPython installs the display hook of
:mod:`attention_lib.plotting.display`, which gives every matplotlib figure, the lessons' own too, its text in the
output's metadata and a caption under it.
"""

from .alt import alt_text, set_alt
from .basic import plot_bars, plot_heatmap, plot_heatmaps, plot_lines
from .blend import plot_mix
from .diagrams import plot_heads_diagram, plot_matmul_diagram, plot_softmax_diagram
from .display import install_display_hook
from .flex_attention import plot_block_tiles
from .generation import plot_decoding_times, plot_new_token_attention
from .induction_heads import plot_head_maps, plot_phase_change
from .learning_to_attend.attraction import plot_attraction
from .learning_to_attend.blocks import plot_block_diagram
from .learning_to_attend.trained import (
    plot_attention_grid,
    plot_attention_over_training,
    plot_loss_curves,
    plot_shipped_overview,
)
from .masking import plot_mask
from .memory_efficient.online_softmax import online_softmax_steps, plot_online_softmax_block, plot_online_softmax_steps
from .memory_efficient.softmax_backward import plot_softmax_backward
from .memory_efficient.tiles import plot_causal_tiles
from .style import OKABE_ITO, category_style, plain_log_ticks
from .triton_kernel import masked_tiles, plot_programs, program_tiles
from .word_order import plot_position_encoding

install_display_hook()

__all__ = [
    "OKABE_ITO",
    "alt_text",
    "category_style",
    "masked_tiles",
    "online_softmax_steps",
    "plain_log_ticks",
    "plot_attention_grid",
    "plot_attention_over_training",
    "plot_attraction",
    "plot_bars",
    "plot_block_diagram",
    "plot_block_tiles",
    "plot_causal_tiles",
    "plot_decoding_times",
    "plot_head_maps",
    "plot_heatmap",
    "plot_heads_diagram",
    "plot_heatmaps",
    "plot_lines",
    "plot_loss_curves",
    "plot_mask",
    "plot_matmul_diagram",
    "plot_mix",
    "plot_new_token_attention",
    "plot_online_softmax_block",
    "plot_online_softmax_steps",
    "plot_phase_change",
    "plot_position_encoding",
    "plot_programs",
    "plot_shipped_overview",
    "plot_softmax_diagram",
    "plot_softmax_backward",
    "program_tiles",
    "set_alt",
]
