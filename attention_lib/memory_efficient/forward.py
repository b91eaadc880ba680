"""Attention that fits in memory: blocks of keys and an online softmax, never the whole ``(L, S)`` matrix.

The five-step recipe builds every score at once: ``L x S`` numbers per head. At 4096 words that is 64 MiB
per head in float32, and it grows with the *square* of the length. The online softmax visits the keys one
block at a time and keeps, for each query, only three running things: the largest score so far, the sum of
the exponentials so far and the (unnormalised) blend so far. Its memory grows linearly with the length, and
its answer is the same. FlashAttention does this inside one GPU kernel; here it is in plain PyTorch.
Built step by step in ``notebooks/10_memory_efficient.ipynb``, where
:func:`attention_lib.bench.measure.peak_memory` measures the difference. The backward pass, which recomputes the
blocks instead of keeping them, lives in :mod:`attention_lib.memory_efficient.backward`.
"""

from __future__ import annotations

import math

import torch

from ..masks import apply_mask, causal_mask, rows_with_keys
from ..validation import check_mask, check_options, check_qkv, scores_shape

#: Queries and keys per block when ``block_size`` is not given: large enough to keep the matrix products
#: fast, small enough that a block of scores stays a few MiB.
DEFAULT_BLOCK_SIZE = 256

_LOG2_E = math.log2(math.e)


def online_softmax_update(running_max: torch.Tensor, running_sum: torch.Tensor, running_output: torch.Tensor,
                          scores: torch.Tensor, value: torch.Tensor, *, in_place: bool = False,
                          base2: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of the online softmax: fold a block of keys into the running max, sum and blend.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. After every block,
    ``running_output / running_sum`` is the attention output over all the keys seen so far. When a block
    brings a larger score, everything accumulated so far was measured against a smaller maximum: it is
    multiplied by ``exp(old max - new max)`` to bring it to the new one. A row that has seen only masked
    keys (max ``-inf``) keeps a zero sum and a zero blend, never NaN.

    Args:
        running_max: ``(N, ..., L, 1)``, the largest score seen so far (``-inf`` before the first block).
        running_sum: ``(N, ..., L, 1)``, the sum of ``exp(score - running_max)`` so far (``0`` at first).
        running_output: ``(N, ..., L, Ev)``, the sum of ``exp(score - running_max) * value`` so far.
        scores: ``(N, ..., L, B)``, the scaled (and masked) scores of this block of ``B`` keys.
        value: ``(N, ..., B, Ev)``, the values of this block of keys.
        in_place: if ``True``, turn ``scores`` itself into the block's weights and update ``running_sum``
            and ``running_output`` in place instead of making new tensors: faster and one block lighter, for
            tensors that nothing else uses (the forward pass of :func:`memory_efficient_attention`).
        base2: if ``True``, the scores were multiplied by ``log2(e)`` and powers of 2 replace powers of e:
            ``2 ** (s * log2(e)) = e ** s``, so the result is the same, but ``torch.exp2`` is several times
            faster than ``torch.exp`` on many CPUs (FlashAttention uses the same trick).

    Returns:
        The new ``(running_max, running_sum, running_output)``, with the same shapes.

    Example:
        >>> scores, value = torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.arange(8.0).reshape(4, 2)
        >>> state = torch.tensor([[float("-inf")]]), torch.zeros(1, 1), torch.zeros(1, 2)
        >>> state = online_softmax_update(*state, scores[:, :2], value[:2])  # keys 0 and 1
        >>> state = online_softmax_update(*state, scores[:, 2:], value[2:])  # keys 2 and 3
        >>> running_max, running_sum, running_output = state
        >>> torch.allclose(running_output / running_sum, torch.softmax(scores, dim=-1) @ value)
        True
    """
    # The maximum only keeps exp() from overflowing; the answer does not depend on it, so no gradient
    # needs to flow through it.
    new_max = torch.maximum(running_max, scores.detach().amax(dim=-1, keepdim=True))  # (N, ..., L, 1)
    # Rows that have seen only masked keys still have max -inf, and -inf - (-inf) is NaN: shift them by the
    # lowest finite number instead (one operation; a finite max is left as it is), so exp() gives 0, not NaN.
    shift = new_max.clamp(min=torch.finfo(new_max.dtype).min)
    correction = (torch.exp2 if base2 else torch.exp)(running_max - shift)  # how much the old sum, blend shrink
    weights = scores.sub_(shift) if in_place else scores - shift
    weights = weights.exp2_() if base2 else weights.exp_()  # (N, ..., L, B): this block's weights, not normalised
    if in_place:  # the running tensors too: no new memory for them
        running_sum.mul_(correction).add_(weights.sum(dim=-1, keepdim=True))
        running_output.mul_(correction).add_(weights @ value)  # (..., L, B) @ (..., B, Ev) -> (..., L, Ev)
        return new_max, running_sum, running_output
    running_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
    running_output = running_output * correction + weights @ value  # (..., L, B) @ (..., B, Ev) -> (..., L, Ev)
    return new_max, running_sum, running_output


def memory_efficient_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                               attn_mask: torch.Tensor | None = None, is_causal: bool = False, *,
                               scale: float | None = None,
                               block_size: int | tuple[int, int] | None = None) -> torch.Tensor:
    """Scaled dot-product attention computed block by block, without the full ``(L, S)`` score matrix.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. Same results and conventions as
    :func:`attention_lib.calculate_attention` (and ``torch.nn.functional.scaled_dot_product_attention``), but
    it returns only the output: the weights are exactly what it avoids storing. Queries are cut into blocks
    of ``block_size``; for each, the keys are visited ``block_size`` at a time (a pair sets the two sizes
    apart) and merged with
    :func:`online_softmax_update` (in base 2, which is faster and gives the same result). The forward pass
    keeps one block of scores and a few ``(N, ..., B, Ev)`` tensors at a time, so its extra memory grows
    linearly with the length. So does training: the forward pass keeps only the output and one
    log-sum-exp per query, and the backward pass (:mod:`attention_lib.memory_efficient.backward`) recomputes every
    block of weights from them, as FlashAttention does. It supports one backward pass (not double backward).
    float16/bfloat16 inputs are computed in float32 and returned in their own dtype.

    Args:
        query: ``(N, ..., L, E)``.
        key: ``(N, ..., S, E)``.
        value: ``(N, ..., S, Ev)``.
        attn_mask: optional, broadcastable to ``(N, ..., L, S)``. Bool: ``True`` = may attend. Float: added
            to the scores (``-inf`` blocks); no gradient flows into it. Note that ``nn.MultiheadAttention``
            uses ``True`` = blocked.
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only (top-left aligned, like SDPA);
            blocks entirely in the future are skipped. Cannot be combined with ``attn_mask``.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        block_size: queries and keys per block (a positive int), or a pair ``(queries, keys)`` per block;
            defaults to :data:`DEFAULT_BLOCK_SIZE`.

    Returns:
        The output ``(N, ..., L, Ev)``. A query whose every key is masked gets exact zeros (and zero
        gradients), never NaN.

    Raises:
        TypeError: if an input is not a tensor, not floating point, a mask has an unusable dtype, or
            ``block_size`` is not an int or a pair of ints.
        ValueError: if shapes, devices, dtypes or the mask do not fit together (as in
            :func:`attention_lib.calculate_attention`), ``attn_mask`` is combined with ``is_causal``, or
            ``block_size < 1``.

    Example:
        >>> from attention_lib import calculate_attention
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(2, 10, 8), torch.randn(2, 12, 8), torch.randn(2, 12, 3)
        >>> out = memory_efficient_attention(q, k, v, block_size=4)  # 3 x 3 blocks of scores
        >>> torch.allclose(out, calculate_attention(q, k, v)[0], atol=1e-6)
        True
    """
    from .backward import MemoryEfficientAttentionFunction

    check_qkv(query, key, value)
    check_options(attn_mask, 0.0, is_causal, scale)
    if attn_mask is not None:
        check_mask(attn_mask, scores_shape(query, key), query)
    block = _check_block_size(block_size)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dtype = query.dtype
    if dtype in (torch.float16, torch.bfloat16):  # sums of many exponentials need more than 8-11 bits
        query, key, value = query.float(), key.float(), value.float()
        attn_mask = attn_mask.float() if attn_mask is not None and attn_mask.is_floating_point() else attn_mask
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.detach()  # a float mask is a constant here: no gradient flows into it
    output = MemoryEfficientAttentionFunction.apply(query, key, value, attn_mask, is_causal, scale, block)
    return output.to(dtype)


def blockwise_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None,
                      is_causal: bool, scale: float, block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward pass, block by block: the output ``(N, ..., L, Ev)`` and the log-sum-exp ``(N, ..., L)``.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. The log-sum-exp of a query's scores,
    ``lse = max + log2(sum)`` (in base 2, like the scores here), is the one number per row that the backward
    pass needs: ``exp2(score - lse)`` is that query's weight for any key, so any block of weights can be
    recomputed from its scores. A query without any key gets output 0 and ``lse = +inf`` (so every
    recomputed weight is ``exp2(-inf) = 0``). ``block`` is ``(queries, keys)`` per block. Inputs are checked
    by :func:`memory_efficient_attention`.
    """
    q_block_size, k_block_size = block
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    has_key = _rows_with_keys(attn_mask, L)  # (..., L, 1), or None when every query has a key
    if attn_mask is not None:
        attn_mask = attn_mask.expand(*batch, L, S)  # (N, ..., L, S), a view: no new memory
    output = query.new_empty(*batch, L, Ev)
    lse = query.new_empty(*batch, L, 1)
    for q_start in range(0, L, q_block_size):
        q_stop = min(q_start + q_block_size, L)
        # Scale the queries, not the scores, and count in powers of 2 (see online_softmax_update's base2).
        q_block = query[..., q_start:q_stop, :] * (scale * _LOG2_E)  # (N, ..., Bq, E)
        running_max = query.new_full((*batch, q_stop - q_start, 1), float("-inf"))
        running_sum = query.new_zeros(*batch, q_stop - q_start, 1)
        running_output = query.new_zeros(*batch, q_stop - q_start, Ev)
        for k_start, k_stop in key_blocks(q_start, q_stop, S, k_block_size, is_causal):
            scores = block_scores(q_block, key, attn_mask, is_causal, q_start, q_stop, k_start, k_stop)
            running_max, running_sum, running_output = online_softmax_update(
                running_max, running_sum, running_output, scores, value[..., k_start:k_stop, :], in_place=True,
                base2=True)
        output[..., q_start:q_stop, :] = running_output / running_sum  # (N, ..., Bq, Ev)
        lse[..., q_start:q_stop, :] = running_max + running_sum.log2()  # (N, ..., Bq, 1)
        if has_key is not None:  # 0 / 0 = NaN in rows without a key: they get 0, and weights 0 backward
            rows = ~has_key[..., q_start:q_stop, :]  # (..., Bq, 1)
            output[..., q_start:q_stop, :].masked_fill_(rows, 0.0)
            lse[..., q_start:q_stop, :].masked_fill_(rows, float("inf"))
    return output, lse.squeeze(-1)


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


def block_scores(q_block: torch.Tensor, key: torch.Tensor, attn_mask: torch.Tensor | None, is_causal: bool,
                 q_start: int, q_stop: int, k_start: int, k_stop: int) -> torch.Tensor:
    """One block of masked scores ``(N, ..., Bq, Bk)``, from already scaled queries, in base 2.

    Used by the forward and the backward pass alike, so both see exactly the same scores.
    """
    # A contiguous copy of the key block (small) makes the matrix product about twice as fast.
    k_block = key[..., k_start:k_stop, :].contiguous()  # (N, ..., Bk, E)
    scores = q_block @ k_block.transpose(-2, -1)  # (N, ..., Bq, E) @ (N, ..., E, Bk) -> (N, ..., Bq, Bk)
    if is_causal and k_stop - 1 > q_start:  # some key of this block lies after some query of it
        block_mask = causal_mask(q_stop - q_start, k_stop - k_start, scores.device, query_start=q_start,
                                 key_start=k_start)  # (Bq, Bk)
        apply_mask(scores, block_mask, inplace=True)
    elif attn_mask is not None:
        apply_mask(scores, attn_mask[..., q_start:q_stop, k_start:k_stop], inplace=True, float_scale=_LOG2_E)
    return scores


def _rows_with_keys(attn_mask: torch.Tensor | None, L: int) -> torch.Tensor | None:
    """:func:`attention_lib.masks.rows_with_keys`, stretched to ``L`` rows (a mask may broadcast over them)."""
    has_key = rows_with_keys(attn_mask)
    return None if has_key is None else has_key.expand(*has_key.shape[:-2], L, 1)


def _check_block_size(block_size) -> tuple[int, int]:
    """``(queries, keys)`` per block, from ``None``, an int or a pair of ints."""
    if block_size is None:
        block_size = DEFAULT_BLOCK_SIZE
    pair = tuple(block_size) if isinstance(block_size, tuple | list) and len(block_size) == 2 else (block_size,) * 2
    for size in pair:
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"block_size must be an int (queries and keys per block), a pair of ints (queries, keys) "
                            f"or None, but got {block_size!r} ({type(size).__name__}); try block_size=256.")
        if size < 1:
            raise ValueError(f"block_size must be at least 1, but block_size={block_size}; try block_size=256, "
                             f"or None for the default ({DEFAULT_BLOCK_SIZE}).")
    return pair
