"""The figures of ``notebooks/10_memory_efficient.ipynb``: the online softmax step by step
(:mod:`~attention_lib.plotting.memory_efficient.online_softmax`), the softmax's backward pass
(:mod:`~attention_lib.plotting.memory_efficient.softmax_backward`) and the causal tiles
(:mod:`~attention_lib.plotting.memory_efficient.tiles`)."""

from .online_softmax import online_softmax_steps, plot_online_softmax_block, plot_online_softmax_steps
from .softmax_backward import plot_softmax_backward
from .tiles import plot_causal_tiles

__all__ = ["online_softmax_steps", "plot_causal_tiles", "plot_online_softmax_block", "plot_online_softmax_steps",
           "plot_softmax_backward"]
