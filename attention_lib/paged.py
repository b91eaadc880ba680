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

from __future__ import annotations

import math
from collections import deque

import torch

from .grouped_query import group_heads, ungroup_heads
from .memory_efficient import online_softmax_update
from .validation import check_int, check_is_tensor


class BlockPool:
    """Blocks of ``block_size`` positions, ``num_positions`` in all, with a free list and reference counts.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. The keys and values of layer ``l`` live in
    ``keys[l] (num_blocks, Hkv, B, Dh)`` and ``values[l] (num_blocks, Hkv, B, Dv)``, allocated at the first write
    (then the heads, sizes and dtype are known). A block is shared by the layers: block ``b`` of a sequence holds
    the same positions in every layer.

    Args:
        num_positions: how many positions the pool holds, a multiple of ``block_size``.
        block_size: ``B``, positions per block: a power of two (as vLLM's, so that ``p // B`` is a shift).

    Raises:
        TypeError: if a size is not an int.
        ValueError: if ``block_size`` is not a power of two or does not divide ``num_positions``.

    Example:
        >>> pool = BlockPool(num_positions=64, block_size=16)
        >>> a, b = pool.allocate(), pool.allocate()
        >>> pool.num_blocks, pool.num_free, pool.refs[a]
        (4, 2, 1)
        >>> pool.release(a); pool.num_free
        3
    """

    def __init__(self, num_positions: int, block_size: int):
        block_size = check_int(block_size, "block_size", minimum=1, fix="vLLM uses blocks of 16 positions.")
        if block_size & (block_size - 1):
            raise ValueError(f"block_size must be a power of two, but block_size={block_size}; use "
                             f"{1 << block_size.bit_length() - 1} or {1 << block_size.bit_length()}.")
        num_positions = check_int(num_positions, "num_positions", minimum=1, fix="pass the positions the pool holds.")
        if num_positions % block_size:
            raise ValueError(f"block_size must divide num_positions, but num_positions={num_positions} and "
                             f"block_size={block_size}; use num_positions={block_size * -(-num_positions // block_size)}.")
        self.block_size, self.num_blocks = block_size, num_positions // block_size
        self.free: deque[int] = deque(range(self.num_blocks))  # the free list: the next block to hand out first
        self.refs = [0] * self.num_blocks  # how many block tables hold each block
        self.keys: dict[int, torch.Tensor] = {}  # layer -> (num_blocks, Hkv, B, Dh)
        self.values: dict[int, torch.Tensor] = {}

    def __repr__(self) -> str:
        return f"BlockPool(num_blocks={self.num_blocks}, block_size={self.block_size}, free={self.num_free})"

    @property
    def num_free(self) -> int:
        """How many blocks the free list holds."""
        return len(self.free)

    def allocate(self) -> int:
        """Take a block from the free list (reference count 1). Raises ``ValueError`` when none is left."""
        if not self.free:
            raise ValueError(f"the pool is out of blocks: all {self.num_blocks} blocks of {self.block_size} positions "
                             f"are in use; free a finished sequence (cache.free()) or build a larger BlockPool.")
        block = self.free.popleft()
        self.refs[block] = 1
        return block

    def share(self, block: int) -> int:
        """One more block table holds ``block``: its reference count goes up; nothing is copied."""
        self.check_live([block])
        self.refs[block] += 1
        return block

    def release(self, block: int) -> None:
        """One block table lets ``block`` go; at reference count 0 it returns to the free list."""
        self.check_live([block])
        self.refs[block] -= 1
        if self.refs[block] == 0:
            self.free.append(block)

    def check_live(self, blocks) -> None:
        """Raise ``ValueError`` if a block of ``blocks`` is free: read again, it may hold another sequence's keys."""
        dead = [b for b in blocks if not 0 <= b < self.num_blocks or self.refs[b] == 0]
        if dead:
            raise ValueError(f"block {dead[0]} was freed (reference count 0) and may now hold another sequence's "
                             f"keys; a block table must not point to it: was this cache freed, or a block released "
                             f"twice?")

    def storage(self, layer_idx: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer_idx``'s blocks, allocated like ``key (N, Hkv, L, Dh)`` and ``value`` at the first write."""
        if layer_idx not in self.keys:
            shape = (self.num_blocks, key.shape[1], self.block_size)
            self.keys[layer_idx] = key.new_zeros(*shape, key.shape[-1])
            self.values[layer_idx] = value.new_zeros(*shape, value.shape[-1])
        held = self.keys[layer_idx]
        if (key.shape[1], key.shape[-1], key.dtype) != (held.shape[1], held.shape[-1], held.dtype):
            raise ValueError(f"layer {layer_idx} of the pool holds keys of (Hkv, Dh) = {(held.shape[1], held.shape[-1])}"
                             f" ({held.dtype}), but got key.shape={tuple(key.shape)} ({key.dtype}); one pool serves "
                             f"one model.")
        return held, self.values[layer_idx]

    def copy_block(self, source: int, target: int) -> None:
        """Copy block ``source`` into ``target`` in every layer (copy-on-write)."""
        for store in (*self.keys.values(), *self.values.values()):
            store[target] = store[source]


class PagedCache:
    """The cache of ``N`` sequences in blocks of a :class:`BlockPool`: one block table per sequence.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. The interface of
    :class:`~attention_lib.KVCache`: :meth:`update` writes the new keys into the blocks (taking new ones from the
    pool, and copying a shared block before writing into it) and returns that layer's keys and values so far,
    gathered through the table, ``(N, Hkv, S, Dh)``.

    Args:
        pool: the :class:`BlockPool` the blocks come from.
        num_layers: how many attention layers write into it.

    Example:
        >>> pool = BlockPool(num_positions=64, block_size=4)
        >>> cache = PagedCache(pool, num_layers=1)
        >>> keys, _ = cache.update(torch.ones(1, 2, 6, 8), torch.zeros(1, 2, 6, 8), layer_idx=0)  # 6 tokens
        >>> tuple(keys.shape), cache.tables, pool.num_free  # 2 blocks of 4 hold 6 positions
        ((1, 2, 6, 8), [[0, 1]], 14)
    """

    def __init__(self, pool: BlockPool, num_layers: int):
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, but got {type(pool).__name__}; build BlockPool(num_positions, "
                            f"block_size) first.")
        self.pool, self.num_layers = pool, check_int(num_layers, "num_layers", minimum=1)
        self.tables: list[list[int]] | None = None  # one block table per sequence, made at the first update
        self._seen = [0] * self.num_layers
        self.finished = False

    def __repr__(self) -> str:
        return f"PagedCache(num_layers={self.num_layers}, seq_length={self.get_seq_length()}, tables={self.tables})"

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """How many tokens layer ``layer_idx`` has seen: the position the next token will have."""
        return self._seen[check_int(layer_idx, "layer_idx", minimum=0)]

    def _alive(self, doing: str) -> None:
        if self.finished:
            raise ValueError(f"cannot {doing}: this sequence is finished and its blocks were freed (cache.free()); "
                             f"fork or continue a sequence before freeing it.")

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``key (N, Hkv, L, Dh)`` and ``value (N, Hkv, L, Dv)`` after the tokens so far; return
        ``(keys (N, Hkv, S, Dh), values (N, Hkv, S, Dv))`` of layer ``layer_idx``.

        Raises:
            TypeError: if ``key`` or ``value`` is not a tensor.
            ValueError: if the shapes disagree, the layer is out of range, the sequence is finished, or the pool
                has too few free blocks (then nothing is changed: every sequence keeps its keys).
        """
        self._alive("update")
        check_is_tensor(key, "key")
        check_is_tensor(value, "value")
        layer_idx = check_int(layer_idx, "layer_idx", minimum=0, fix="pass the attention layer's index.")
        if layer_idx >= self.num_layers:
            raise ValueError(f"layer_idx must be below num_layers={self.num_layers}, but layer_idx={layer_idx}.")
        if key.dim() != 4 or value.dim() != 4 or key.shape[:3] != value.shape[:3]:
            raise ValueError(f"key and value must be (N, Hkv, L, Dh) with the same N, Hkv and L, but key.shape="
                             f"{tuple(key.shape)} and value.shape={tuple(value.shape)}.")
        if self.tables is None:
            self.tables = [[] for _ in range(key.shape[0])]
        if key.shape[0] != len(self.tables):
            raise ValueError(f"this cache holds {len(self.tables)} sequences, but key.shape={tuple(key.shape)}.")
        B, start, L = self.pool.block_size, self._seen[layer_idx], key.shape[2]
        self._make_room(start, start + L)
        store_k, store_v = self.pool.storage(layer_idx, key, value)
        position = torch.arange(start, start + L)
        table = torch.tensor(self.tables, dtype=torch.long)  # (N, blocks)
        blocks = table[:, position // B]  # (N, L): the block of every new position
        store_k[blocks, :, position % B] = key.transpose(1, 2)  # (N, L, Hkv, Dh) into (blocks, Hkv, slot, Dh)
        store_v[blocks, :, position % B] = value.transpose(1, 2)
        self._seen[layer_idx] = start + L
        return self.gather(layer_idx)

    def _make_room(self, start: int, end: int) -> None:
        """Blocks for positions ``start .. end - 1`` in every table: new ones from the pool, and a private copy of a
        shared block about to be written (copy-on-write). Counted first, so a pool too small changes nothing."""
        B = self.pool.block_size
        written = range(start // B, -(-end // B)) if end > start else range(0)
        copies = [(s, j) for s, t in enumerate(self.tables) for j in written if j < len(t) and self.pool.refs[t[j]] > 1]
        new = sum(max(0, -(-end // B) - len(t)) for t in self.tables)
        if new + len(copies) > self.pool.num_free:
            raise ValueError(f"the pool is out of blocks: {new + len(copies)} more are needed for positions {start}.."
                             f"{end - 1} but {self.pool.num_free} of {self.pool.num_blocks} are free; nothing was "
                             f"written. Free a finished sequence (cache.free()) or build a larger BlockPool.")
        for s, j in copies:  # copy-on-write: this sequence gets its own copy, the others keep theirs
            old = self.tables[s][j]
            self.tables[s][j] = self.pool.allocate()
            self.pool.copy_block(old, self.tables[s][j])
            self.pool.release(old)
        for t in self.tables:
            while len(t) * B < end:
                t.append(self.pool.allocate())

    def gather(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer_idx``'s keys and values so far, read through the block tables: ``(N, Hkv, S, D)`` each."""
        self._alive("read the cache")
        for t in self.tables:
            self.pool.check_live(t)
        S, table = self._seen[layer_idx], torch.tensor(self.tables, dtype=torch.long)  # (N, blocks)
        out = []
        for store in (self.pool.keys[layer_idx], self.pool.values[layer_idx]):
            blocks = store[table]  # (N, blocks, Hkv, B, D)
            N, nb, H, B, D = blocks.shape
            out.append(blocks.transpose(1, 2).reshape(N, H, nb * B, D)[:, :, :S])  # (N, Hkv, S, D)
        return out[0], out[1]

    def fork(self, index: int = 0) -> PagedCache:
        """A new one-sequence cache that continues sequence ``index``: it shares every block (no copy).

        Raises:
            ValueError: if this sequence is finished (freed) or ``index`` is out of range.
        """
        self._alive("fork")
        if self.tables is None or not 0 <= check_int(index, "index", minimum=0) < len(self.tables):
            raise ValueError(f"index must name one of the {len(self.tables or [])} sequences, but index={index}.")
        child = PagedCache(self.pool, self.num_layers)
        child.tables, child._seen = [[self.pool.share(b) for b in self.tables[index]]], list(self._seen)
        return child

    def free(self) -> None:
        """The sequences are finished: every block goes back to the pool (or loses one holder, if shared)."""
        self._alive("free it again")
        for t in self.tables or []:
            for b in t:
                self.pool.release(b)
        self.finished = True


def paged_attention(query: torch.Tensor, cache: PagedCache, layer_idx: int, *, scale: float | None = None
                    ) -> torch.Tensor:
    """Attention of the newest ``L`` queries over a paged cache, read block by block through the block tables.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. For block ``j`` of every table the keys and
    values are read from the pool and folded into the running max, sum and output with
    :func:`~attention_lib.online_softmax_update` (lesson 10): no ``(N, H, S, Dh)`` copy of the keys is made. The
    queries are the last ``L`` of ``S`` positions, causal aligned to the end; with ``Hkv < H`` they read their
    group's key/value head (:func:`~attention_lib.group_heads`).

    Args:
        query: ``(N, H, L, Dh)``, rotated already (as the keys in the cache are), ``H`` a multiple of ``Hkv``.
        cache: the :class:`PagedCache` holding ``S >= L`` positions of layer ``layer_idx``, the queries' own last.
        scale: the scores' factor (default ``1 / sqrt(Dh)``).

    Returns:
        ``(N, H, L, Dv)``, the same as SDPA on the gathered keys and values with the causal mask aligned to the end.

    Raises:
        TypeError: if ``query`` is not a tensor.
        ValueError: if its shape does not fit the cache, or a block in a table was freed.

    Example:
        >>> pool, cache = BlockPool(64, 4), None
        >>> cache = PagedCache(pool, num_layers=1)
        >>> k, v = torch.randn(1, 1, 7, 8), torch.randn(1, 1, 7, 8)
        >>> keys, values = cache.update(k, v, layer_idx=0)
        >>> q = torch.randn(1, 2, 1, 8)  # 2 query heads, one key/value head
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        >>> torch.allclose(paged_attention(q, cache, 0), ref, atol=1e-6)
        True
    """
    check_is_tensor(query, "query")
    cache._alive("read the cache")
    S = cache.get_seq_length(layer_idx)
    if cache.tables is None or layer_idx not in cache.pool.keys or S == 0:
        raise ValueError(f"layer {layer_idx} of this cache holds no keys yet: update it first.")
    store_k, store_v = cache.pool.keys[layer_idx], cache.pool.values[layer_idx]
    N, Hkv, B, Dh = len(cache.tables), store_k.shape[1], cache.pool.block_size, store_k.shape[-1]
    if query.dim() != 4 or query.shape[0] != N or query.shape[1] % Hkv or query.shape[-1] != Dh \
            or not 1 <= query.shape[2] <= S:
        raise ValueError(f"query must be (N, H, L, Dh) = ({N}, a multiple of Hkv={Hkv}, L <= S={S}, {Dh}) for this "
                         f"cache, but query.shape={tuple(query.shape)}.")
    for t in cache.tables:
        cache.pool.check_live(t)
    L, table = query.shape[2], torch.tensor(cache.tables, dtype=torch.long)  # (N, blocks)
    scale = 1.0 / math.sqrt(Dh) if scale is None else scale
    q = group_heads(query, Hkv) * scale  # (N, Hkv, G, L, Dh)
    G = q.shape[2]
    newest = torch.arange(S - L, S, device=query.device)[:, None]  # (L, 1): the queries' positions
    state = (q.new_full((N, Hkv, G, L, 1), float("-inf")), q.new_zeros(N, Hkv, G, L, 1),
             q.new_zeros(N, Hkv, G, L, store_v.shape[-1]))
    for j in range(-(-S // B)):  # block j of every table: positions j·B .. j·B + B - 1
        k = store_k[table[:, j]].unsqueeze(2)  # (N, Hkv, 1, B, Dh), broadcast over the G heads of a group
        v = store_v[table[:, j]].unsqueeze(2).expand(-1, -1, G, -1, -1)  # (N, Hkv, G, B, Dv)
        scores = q @ k.transpose(-2, -1)  # (N, Hkv, G, L, Dh) @ (N, Hkv, 1, Dh, B) -> (N, Hkv, G, L, B)
        seen = j * B + torch.arange(B, device=query.device) <= newest  # (L, B): causal, and nothing past S
        state = online_softmax_update(*state, scores.masked_fill(~seen, float("-inf")), v)
    return ungroup_heads(state[2] / state[1])  # (N, Hkv, G, L, Dv) -> (N, H, L, Dv)
