"""What the forward and the backward pass of memory-efficient attention share: the blocks and their scores.

Both passes walk the same blocks and must see exactly the same scores, so both take them from here. The
forward pass (:mod:`.forward`) imports this module and :mod:`.backward`; the backward pass imports only this
one: no import cycle.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import torch

from ..validation import check_int

#: Queries and keys per block when ``block_size`` is not given: large enough to keep the matrix products
#: fast, small enough that a block of scores stays a few MiB.
DEFAULT_BLOCK_SIZE = 256

#: Both passes count in powers of 2, ``exp(s) = 2 ** (s * log2(e))``, as FlashAttention and lesson 14's kernel do
#: (on an NVIDIA GPU ``exp2`` is one instruction, ``ex2.approx``, and ``exp`` is that after a multiply). Here it is
#: free: the queries are scaled by ``scale * LOG2_E`` anyway, so the scores come out in base 2 at no cost (a float
#: mask is scaled with them). Whether ``torch.exp2`` is faster than ``torch.exp`` on a CPU depends on the machine
#: (0.55 and 1.37 times as long, measured on two; the benchmark prints it); the exponentials take about a seventh of
#: the forward pass's time on a CPU (torch.profiler, one thread, n = 1024), so either way it moves little.
LOG2_E = math.log2(math.e)


#: What a block of scores (every batch and head at once) may take when ``block_size`` is not given: half of one
#: core's L2 cache, so that the passes over it (max, exponentials, sums, the product with the values) read it from
#: there; 1 MiB where the system does not say (the L2 of many x86 cores is 1-2 MiB).
TILE_SHARE_OF_L2 = 0.5


@lru_cache(maxsize=1)
def cache_sizes() -> dict[str, int]:
    """This CPU's data caches per core, as Linux lists them for CPU 0: ``{"L1d": bytes, "L2": ..., "L3": ...}``.

    Empty where the system does not say (not Linux). The L3 is shared between cores; L1d and L2 are one core's on
    the x86 CPUs this was checked on.

    Example:
        >>> all(isinstance(v, int) and v > 0 for v in cache_sizes().values())
        True
    """
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    sizes = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind, size = ((index / f).read_text().strip() for f in ("level", "type", "size"))
            size = int(size[:-1]) * units[size[-1]] if size[-1:] in units else int(size)
        except (OSError, ValueError, IndexError):
            continue
        if kind != "Instruction":
            sizes[f"L{level}{'d' if kind == 'Data' else ''}"] = size
    return sizes


def forward_blocks(batch: int, element_size: int, l2: int | None = None) -> tuple[int, int]:
    """The ``(queries, keys)`` per block the forward pass takes when ``block_size`` is not given.

    From ``(256, 256)``, the keys and then the queries per block are halved (to 128 at least) until a block of
    scores of every batch and head, ``batch * Bq * Bk * element_size`` bytes, fits :data:`TILE_SHARE_OF_L2` of the
    L2 cache (``l2``, default: this CPU's, from :func:`cache_sizes`). Larger blocks make fewer, larger matrix
    products; a block that spills out of the L2 makes every pass over it read from farther away (measured on an
    Intel Xeon with 2 MiB of L2 per core, 2x4 heads, one thread: 256 x 128 took 0.84 of 256 x 256's time at
    n = 1024, 0.94 at n = 2048). The backward pass keeps :data:`DEFAULT_BLOCK_SIZE`: any partition gives it the
    same weights.

    Example:
        >>> forward_blocks(1, 4, l2=2 * 2**20), forward_blocks(8, 4, l2=2 * 2**20), forward_blocks(8, 4, l2=2**20)
        ((256, 256), (256, 128), (128, 128))
    """
    budget = TILE_SHARE_OF_L2 * (l2 or cache_sizes().get("L2", 2**20))
    q_block = k_block = DEFAULT_BLOCK_SIZE
    while batch * q_block * k_block * element_size > budget and k_block > 128:
        k_block //= 2
    while batch * q_block * k_block * element_size > budget and q_block > 128:
        q_block //= 2
    return q_block, k_block


def check_block_size(block_size) -> tuple[int, int]:
    """``(queries, keys)`` per block, from ``None``, an int or a pair of ints.

    Raises:
        TypeError: if ``block_size`` is not ``None``, an int or a pair of ints.
        ValueError: if a size is below 1.
    """
    if block_size is None:
        return DEFAULT_BLOCK_SIZE, DEFAULT_BLOCK_SIZE
    pair = tuple(block_size) if isinstance(block_size, tuple | list) and len(block_size) == 2 else (block_size,) * 2
    fix = (f"block_size={block_size!r}; pass an int, a pair of ints (queries, keys) or None for the default "
           f"({DEFAULT_BLOCK_SIZE}).")
    return tuple(check_int(size, "block_size", minimum=1, fix=fix) for size in pair)


def key_blocks(q_start: int, q_stop: int, S: int, block: int, is_causal: bool):
    """The ``(k_start, k_stop)`` of every block of keys that queries ``q_start..q_stop-1`` may see.

    With ``is_causal``, keys after the block's last query are in every query's future: those blocks are
    skipped, not computed and masked.

    Example:
        >>> list(key_blocks(4, 8, S=12, block=4, is_causal=True))
        [(0, 4), (4, 8)]
    """
    last_key = min(S, q_stop) if is_causal else S
    return ((k, min(k + block, last_key)) for k in range(0, last_key, block))


def causal_block(q_start: int, q_stop: int, k_start: int, k_stop: int, device) -> torch.Tensor:
    """The block ``[q_start:q_stop, k_start:k_stop]`` of the top-left causal mask (``True`` = may attend).

    Example:
        >>> from attention_lib import causal_mask
        >>> torch.equal(causal_block(4, 6, 3, 6, "cpu"), causal_mask(6, 6)[4:6, 3:6])
        True
    """
    queries = torch.arange(q_start, q_stop, device=device)  # (Bq,)
    keys = torch.arange(k_start, k_stop, device=device)  # (Bk,)
    return keys.unsqueeze(0) <= queries.unsqueeze(1)  # (1, Bk) <= (Bq, 1) -> (Bq, Bk): key j is not after query i


def full_mask(attn_mask: torch.Tensor | None, L: int, S: int) -> torch.Tensor | None:
    """The mask stretched to ``(..., L, S)`` (a view), so that any block of it can be sliced out."""
    return None if attn_mask is None else attn_mask.expand(*attn_mask.shape[:-2], L, S)


def block_scores(q_scaled: torch.Tensor, key: torch.Tensor, attn_mask: torch.Tensor | None, is_causal: bool,
                 q_start: int, q_stop: int, k_start: int, k_stop: int) -> torch.Tensor:
    """One block of masked scores ``(N, ..., Bq, Bk)``, in base 2, from queries scaled by ``scale * LOG2_E``.

    ``attn_mask`` is ``None`` or stretched by :func:`full_mask`. The result is a new tensor that nobody else
    holds, so the callers may turn it into weights in place.
    """
    # A contiguous copy of the key block (small) makes the matrix product about twice as fast.
    k_block = key[..., k_start:k_stop, :].contiguous()  # (N, ..., Bk, E)
    scores = q_scaled @ k_block.transpose(-2, -1)  # (N, ..., Bq, E) @ (N, ..., E, Bk) -> (N, ..., Bq, Bk)
    if is_causal and k_stop - 1 > q_start:  # some key of this block lies after some query of it
        return scores.masked_fill_(~causal_block(q_start, q_stop, k_start, k_stop, scores.device), float("-inf"))
    if attn_mask is not None:
        block_mask = attn_mask[..., q_start:q_stop, k_start:k_stop]  # (..., Bq, Bk)
        if block_mask.dtype == torch.bool:
            return scores.masked_fill_(~block_mask, float("-inf"))
        # In base 2 too. A mask that blocks with torch.finfo(dtype).min would overflow to -inf, so that a row
        # blocked everywhere had no key left: keep such entries at the lowest finite number, as they were.
        scaled = block_mask * LOG2_E
        overflowed = scaled.isneginf() & block_mask.isfinite()
        return scores.add_(scaled.masked_fill_(overflowed, torch.finfo(scaled.dtype).min))
    return scores

