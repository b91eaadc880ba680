"""A paged cache: one block table per sequence, the cache interface of :class:`~attention_lib.KVCache` (see
:mod:`attention_lib.paged`)."""

from __future__ import annotations

import torch

from ..validation import check_int, check_is_tensor
from .pool import BlockPool


def _check_read(store, table, length) -> int:
    """``read_blocks``'s arguments: a store of blocks, a 2-D integer table, a length its blocks hold."""
    check_is_tensor(store, "store")
    check_is_tensor(table, "table")
    if store.dim() < 3:
        raise ValueError(f"store must be (num_blocks, B, Hkv, D), the blocks of one layer, but store.shape="
                         f"{tuple(store.shape)}.")
    if table.dim() != 2 or table.dtype.is_floating_point or table.dtype.is_complex or table.dtype == torch.bool:
        raise TypeError(f"table must be a 2-D integer tensor (N, blocks), one block table per sequence, but got "
                        f"table.shape={tuple(table.shape)}, table.dtype={table.dtype}; use "
                        f"torch.tensor(tables, dtype=torch.long).")
    held = table.shape[1] * store.shape[1]
    length = check_int(length, "length", minimum=0, fix="pass the number of positions each sequence holds.")
    if length > held:
        raise ValueError(f"length must be at most the {held} positions the table's {table.shape[1]} blocks of "
                         f"{store.shape[1]} hold, but length={length}; give every sequence a block for each B of its "
                         f"positions.")
    return length


def read_blocks(store: torch.Tensor, table: torch.Tensor, length: int) -> torch.Tensor:
    """Positions ``0 .. length - 1`` of each sequence, read through its block table: ``(N, Hkv, S, D)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. Position ``p`` of sequence ``n`` lives in
    block ``table[n, p // B]`` of ``store (num_blocks, B, Hkv, D)``, at slot ``p % B``: the blocks of a table,
    taken in order and laid end to end, are the positions in order; the last one may be part-full.

    Args:
        store: ``(num_blocks, B, Hkv, D)``, one layer's keys (or values) for the whole pool.
        table: ``(N, blocks)``, an integer tensor: each sequence's blocks, in position order.
        length: ``S``, the positions to read, ``0 <= S <= blocks · B``.

    Returns:
        ``(N, Hkv, S, D)``, a view of the gathered blocks.

    Raises:
        TypeError: if ``store`` or ``table`` is not a tensor, or ``table`` is not a 2-D integer tensor.
        ValueError: if ``length`` is negative or more than the table's blocks hold.

    Example:
        >>> store = torch.arange(8.0).view(4, 2, 1, 1)  # 4 blocks of 2 positions; block b holds 2b, 2b + 1
        >>> read_blocks(store, torch.tensor([[3, 1]]), length=3).flatten().tolist()  # positions 0, 1, 2
        [6.0, 7.0, 2.0]
    """
    length = _check_read(store, table, length)
    blocks = store.index_select(0, table.flatten())  # (N·blocks, B, Hkv, D): the blocks of every table
    positions = blocks.view(table.shape[0], -1, *store.shape[2:])  # (N, blocks·B, Hkv, D), in order
    return positions[:, :length].transpose(1, 2)  # (N, Hkv, S, D), a view


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
        self._tables_tensor: torch.Tensor | None = None
        self._checked = -1  # pool.frees when the tables were last checked: no block can die without a free
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
            TypeError: if ``key`` or ``value`` is not a floating-point tensor, or not of the pool's dtype.
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
        keys, values = self.pool.storage(layer_idx, key, value)  # (blocks, B, Hkv, Dh), (blocks, B, Hkv, Dv)
        self._make_room(start, start + L)  # after the checks of storage: a refused write takes no block
        p = start
        while p < start + L:  # position p goes to block table[p // B], slot p % B; one block at a time
            j, slot = divmod(p, B)
            upto = min(start + L, (j + 1) * B)  # positions p .. upto - 1 fill slots slot .. of block j
            new = slice(p - start, upto - start)
            for n, table in enumerate(self.tables):  # (Hkv, k, Dh) -> (k, Hkv, Dh), as the block holds them
                keys[table[j], slot:slot + upto - p] = key[n, :, new].transpose(0, 1)
                values[table[j], slot:slot + upto - p] = value[n, :, new].transpose(0, 1)
            p = upto
        self._seen[layer_idx] = start + L
        return self.gather(layer_idx)

    def _table(self, device) -> torch.Tensor:
        """The block tables as one ``(N, blocks)`` tensor, made again only when a table changed."""
        if self._tables_tensor is None or self._tables_tensor.device != device:
            self._tables_tensor = torch.tensor(self.tables, dtype=torch.long, device=device)
        return self._tables_tensor

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
        if new or copies:
            self._tables_tensor = None  # a table changes
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
        if self._checked != self.pool.frees:  # a block was freed since the last read: is every one still held?
            for t in self.tables:
                self.pool.check_live(t)
            self._checked = self.pool.frees
        store = self.pool.stores[layer_idx]  # (blocks, B, Hkv, Dh + Dv)
        # read_blocks without its checks (this cache made the table): one copy of the blocks, then views
        blocks = store.index_select(0, self._table(store.device).view(-1))  # (N·blocks, B, Hkv, Dh + Dv)
        both = blocks.view(len(self.tables), -1, *store.shape[2:])[:, :self._seen[layer_idx]].transpose(1, 2)
        Dh = self.pool.keys[layer_idx].shape[-1]
        return both[..., :Dh], both[..., Dh:]  # (N, Hkv, S, Dh), (N, Hkv, S, Dv)

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


class PagedModel:
    """A language model whose caches come from a :class:`BlockPool`: ``generate(PagedModel(model, pool), ...)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. Everything is the model's own (it is called
    as it is) except :meth:`new_cache`, which returns a :class:`PagedCache` of the pool instead of a contiguous
    one (of ``cache_class``, a subclass of it if given), so :func:`~attention_lib.generate` runs on blocks
    unchanged. The last cache made is kept in ``cache`` (free it when the sequences are finished).

    Example:
        >>> from attention_lib import TinyLlama, generate
        >>> _ = torch.manual_seed(0)
        >>> model, pool = TinyLlama(vocab_size=10).eval(), BlockPool(num_positions=64, block_size=4)
        >>> prompt = torch.tensor([[1, 2, 3]])
        >>> torch.equal(generate(PagedModel(model, pool), prompt, 6), generate(model, prompt, 6))
        True
    """

    def __init__(self, model, pool: BlockPool, cache_class: type[PagedCache] | None = None):
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool, but got {type(pool).__name__}.")
        self.model, self.pool, self.cache = model, pool, None
        self.cache_class = PagedCache if cache_class is None else cache_class  # a PagedCache or a subclass

    def __getattr__(self, name):
        return getattr(self.__dict__["model"], name)  # embed_tokens, layers, config: the model's own

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def new_cache(self, max_cache_len: int) -> PagedCache:
        """A new :class:`PagedCache` of the pool (``max_cache_len`` is not needed: blocks come as they are used)."""
        self.cache = self.cache_class(self.pool, len(self.model.layers))
        return self.cache
