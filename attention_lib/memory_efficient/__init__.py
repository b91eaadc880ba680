"""Memory-efficient attention (``notebooks/10_memory_efficient.ipynb``): blocks of keys, an online softmax, and
a backward pass that recomputes its blocks instead of keeping them."""

from .forward import memory_efficient_attention, online_softmax_update

__all__ = ["memory_efficient_attention", "online_softmax_update"]
