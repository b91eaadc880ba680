"""Memory-efficient attention (``notebooks/10_memory_efficient.ipynb``): blocks of keys, an online softmax, and
a backward pass that recomputes its blocks instead of keeping them.

- :mod:`~attention_lib.memory_efficient.forward`: :func:`memory_efficient_attention` and the online softmax
  step :func:`online_softmax_update` that lesson 10 asks for;
- :mod:`~attention_lib.memory_efficient.backward`: the gradients, block by block;
- ``_blocks``: the blocks and their scores, shared by both passes (private);
- :mod:`~attention_lib.memory_efficient.triton_kernel`: lesson 14's FlashAttention kernel in Triton,
  :func:`triton_attention` (triton is imported only when a kernel runs);
- :mod:`~attention_lib.memory_efficient.triton_launch`: where it runs (compiled on CUDA tensors, in Triton's
  interpreter on CPU tensors) and with which blocks, warps and stages on each GPU;
- :mod:`~attention_lib.memory_efficient.triton_targets`: the kernel compiled for a T4, an A100 and an H100 without
  one, every launch the course makes, with its shared memory and ``tl.dot`` instruction.
"""

from .forward import memory_efficient_attention, online_softmax_update
from .triton_kernel import triton_attention
from .triton_launch import interpreted, launch_config

__all__ = ["interpreted", "launch_config", "memory_efficient_attention", "online_softmax_update", "triton_attention"]
