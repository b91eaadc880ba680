"""The pool of blocks: every block of keys and values, a free list and a reference count per block (see
:mod:`attention_lib.paged`)."""

from __future__ import annotations

from collections import deque

import torch

from ..validation import check_int, check_same_device_and_dtype, check_tensor


class BlockPool:
    """Blocks of ``block_size`` positions, ``num_positions`` in all, with a free list and reference counts.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. The keys and values of layer ``l`` live in
    ``keys[l] (num_blocks, B, Hkv, Dh)`` and ``values[l] (num_blocks, B, Hkv, Dv)`` (as in vLLM, the blocks of a
    table, gathered, are the positions in order), two views of one store ``stores[l] (num_blocks, B, Hkv, Dh +
    Dv)`` that holds each slot's key and then its value, so that a step writes and reads once; allocated at the
    first write
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
            rounded = block_size * -(-num_positions // block_size)
            raise ValueError(f"block_size must divide num_positions, but num_positions={num_positions} and "
                             f"block_size={block_size}; use num_positions={rounded}.")
        self.block_size, self.num_blocks = block_size, num_positions // block_size
        self.free: deque[int] = deque(range(self.num_blocks))  # the free list: the next block to hand out first
        self.refs = [0] * self.num_blocks  # how many block tables hold each block
        self.frees = 0  # how many times a block went back to the free list: a table read since then is checked
        self.stores: dict[int, torch.Tensor] = {}  # layer -> (num_blocks, B, Hkv, Dh + Dv): key, then value
        self.keys: dict[int, torch.Tensor] = {}  # layer -> (num_blocks, B, Hkv, Dh), a view of its store
        self.values: dict[int, torch.Tensor] = {}  # layer -> (num_blocks, B, Hkv, Dv), a view of its store

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
            self.frees += 1

    def check_live(self, blocks) -> None:
        """Raise ``ValueError`` if a block of ``blocks`` is free: read again, it may hold another sequence's keys."""
        dead = [b for b in blocks if not 0 <= b < self.num_blocks or self.refs[b] == 0]
        if dead:
            raise ValueError(f"block {dead[0]} was freed (reference count 0) and may now hold another sequence's "
                             f"keys; a block table must not point to it: was this cache freed, or a block released "
                             f"twice?")

    def storage(self, layer_idx: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer_idx``'s keys ``(num_blocks, B, Hkv, Dh)`` and values ``(num_blocks, B, Hkv, Dv)``, two views
        of one store (:attr:`stores`), allocated like ``key (N, Hkv, L, Dh)`` and ``value`` at the first write.

        Raises:
            TypeError: if ``key`` or ``value`` is not floating point, or their dtype is not the one the layer holds.
            ValueError: if their heads or sizes are not the ones the layer holds.
        """
        check_tensor(key, "key")
        check_tensor(value, "value")
        check_same_device_and_dtype(key=key, value=value)
        if layer_idx not in self.keys:
            store = key.new_zeros(self.num_blocks, self.block_size, key.shape[1], key.shape[-1] + value.shape[-1])
            self.stores[layer_idx] = store
            Dh = key.shape[-1]
            self.keys[layer_idx], self.values[layer_idx] = store[..., :Dh], store[..., Dh:]  # views, written in place
        held_k, held_v = self.keys[layer_idx], self.values[layer_idx]
        if key.dtype != held_k.dtype:
            raise TypeError(f"layer {layer_idx} of the pool holds {held_k.dtype} keys and values, but got "
                            f"key.dtype={key.dtype}; one pool serves one model: convert with .to({held_k.dtype}) "
                            f"or build another BlockPool.")
        if (key.shape[1], key.shape[-1], value.shape[-1], key.dtype, key.device) != (
                held_k.shape[2], held_k.shape[-1], held_v.shape[-1], held_k.dtype, held_k.device):
            raise ValueError(f"layer {layer_idx} of the pool holds keys and values of (Hkv, Dh, Dv) = "
                             f"{(held_k.shape[2], held_k.shape[-1], held_v.shape[-1])} ({held_k.dtype}, "
                             f"{held_k.device}), but got key.shape={tuple(key.shape)}, value.shape="
                             f"{tuple(value.shape)} ({key.dtype}, {key.device}); one pool serves one model.")
        return held_k, held_v

    def copy_block(self, source: int, target: int) -> None:
        """Copy block ``source`` into ``target`` in every layer (copy-on-write)."""
        for store in self.stores.values():
            store[target] = store[source]
