"""What the forward and the backward pass of memory-efficient attention share: the blocks and their scores.

Both passes walk the same blocks and must see exactly the same scores, so both take them from here. The
forward pass (:mod:`.forward`) imports this module and :mod:`.backward`; the backward pass imports only this
one: no import cycle.
"""

from __future__ import annotations

import math

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

