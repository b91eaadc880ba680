"""Paged attention (Kwon et al., 2023; vLLM): many caches of unknown length in fixed-size blocks of one pool.

Built step by step in ``notebooks/17_latent_and_paged.ipynb``. A server does not know how long each answer will
be. A contiguous cache (:class:`~attention_lib.KVCache`) reserves the longest length for every request, and most of
it stays empty. Paged attention cuts the memory into **blocks** of ``B`` positions, as an operating system cuts
memory into pages:

- a :class:`BlockPool` holds every block of keys and values, a **free list**, and a **reference count** per block;
- a :class:`PagedCache` gives each sequence a **block table**: position ``p`` lives in block ``table[p // B]``, at
  slot ``p % B``. A new block is taken from the free list only when the last one is full, so at most ``B - 1``
  positions per sequence are reserved and unused;
- :meth:`PagedCache.fork` shares a prompt's blocks with a second sequence (the reference counts go up, nothing is
  copied); the first one to write into the shared, part-full last block copies it first (**copy-on-write**);
- :func:`paged_attention` reads the keys block by block through the table, with lesson 10's online softmax.

:class:`PagedCache` speaks the cache interface of :class:`~attention_lib.KVCache` (``update(key, value,
layer_idx)``, ``get_seq_length``), so :class:`~attention_lib.TinyLlama` runs on it unchanged.
Shape legend: ``N`` sequences, ``H`` query heads, ``Hkv`` key/value heads, ``S`` positions, ``Dh`` a head's size.
"""

from .attention import paged_attention
from .cache import PagedCache, PagedModel, read_blocks
from .pool import BlockPool

__all__ = ["BlockPool", "PagedCache", "PagedModel", "paged_attention", "read_blocks"]
