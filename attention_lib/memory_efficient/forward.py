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
from torch.autograd.function import once_differentiable

from ..masks import resolve_causal_bias
from ..validation import check_mask, check_options, check_qkv, check_same_device_and_dtype, check_tensor, scores_shape
from ._blocks import (
    DEFAULT_BLOCK_SIZE,
    LOG2_E,
    block_scores,
    check_block_size,
    forward_blocks,
    full_mask,
    key_blocks,
)
from ._fused import fused_applies, fused_forward
from .backward import blockwise_backward

__all__ = ["DEFAULT_BLOCK_SIZE", "key_blocks", "memory_efficient_attention", "online_softmax_update"]


def online_softmax_update(running_max: torch.Tensor, running_sum: torch.Tensor, running_output: torch.Tensor,
                          scores: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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

    Returns:
        The new ``(running_max, running_sum, running_output)``, with the same shapes.

    Raises:
        TypeError: if an argument is not a floating-point tensor, or the dtypes differ.
        ValueError: if the shapes do not fit together (``L``, ``B`` or ``Ev``), or the devices differ.

    Example:
        >>> scores, value = torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.arange(8.0).reshape(4, 2)
        >>> state = torch.tensor([[float("-inf")]]), torch.zeros(1, 1), torch.zeros(1, 2)
        >>> state = online_softmax_update(*state, scores[:, :2], value[:2])  # keys 0 and 1
        >>> state = online_softmax_update(*state, scores[:, 2:], value[2:])  # keys 2 and 3
        >>> running_max, running_sum, running_output = state
        >>> torch.allclose(running_output / running_sum, torch.softmax(scores, dim=-1) @ value)
        True
    """
    _check_step(running_max, running_sum, running_output, scores, value)
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (N, ..., L, 1)
    # A row that has seen only masked keys still has max -inf, and -inf - (-inf) is NaN: measure it from the
    # lowest finite number instead, so that exp() gives 0 (a finite max is left as it is).
    shift = new_max.clamp(min=torch.finfo(new_max.dtype).min)
    correction = torch.exp(running_max - shift)  # how much the old sum and blend shrink: (N, ..., L, 1)
    weights = torch.exp(scores - shift)  # (N, ..., L, B): this block's weights, not yet normalised
    running_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
    running_output = running_output * correction + weights @ value  # (..., L, B) @ (..., B, Ev) -> (..., L, Ev)
    return new_max, running_sum, running_output


def _check_step(running_max, running_sum, running_output, scores, value) -> None:
    """The arguments of :func:`online_softmax_update`, checked (with the shared helpers of ``validation``)."""
    tensors = {"running_max": running_max, "running_sum": running_sum, "running_output": running_output,
               "scores": scores, "value": value}
    for name, t in tensors.items():
        check_tensor(t, name)
    check_same_device_and_dtype(**tensors)
    shapes = ", ".join(f"{name}.shape={tuple(t.shape)}" for name, t in tensors.items())
    if running_max.shape[-1] != 1 or running_sum.shape != running_max.shape:
        raise ValueError(f"running_max and running_sum must both be (..., L, 1), one number per query, but {shapes}; "
                         f"start from torch.full((..., L, 1), float('-inf')) and torch.zeros(..., L, 1).")
    if not running_max.shape[-2] == running_output.shape[-2] == scores.shape[-2]:
        raise ValueError(f"running_max, running_output and scores must have the same number of queries L "
                         f"(dimension -2), but {shapes}.")
    if scores.shape[-1] != value.shape[-2]:
        raise ValueError(f"scores (..., L, B) must have one column per key of the block, value (..., B, Ev) one row, "
                         f"but {shapes}; slice both with the same block of keys.")
    if running_output.shape[-1] != value.shape[-1]:
        raise ValueError(f"running_output (..., L, Ev) and value (..., B, Ev) must share Ev, but {shapes}.")


def memory_efficient_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                               attn_mask: torch.Tensor | None = None, is_causal: bool = False, *,
                               scale: float | None = None,
                               block_size: int | tuple[int, int] | None = None) -> torch.Tensor:
    """Scaled dot-product attention computed block by block, without the full ``(L, S)`` score matrix.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. Same results and conventions as
    :func:`attention_lib.calculate_attention` (and ``torch.nn.functional.scaled_dot_product_attention``), but
    it returns only the output: the weights are exactly what it avoids storing. Queries are cut into blocks
    of ``block_size``; for each, the keys are visited ``block_size`` at a time (a pair sets the two sizes
    apart) and merged with the online softmax of :func:`online_softmax_update` (a faster in-place copy of
    it). The forward pass keeps one block of scores and a few ``(N, ..., B, Ev)`` tensors at a time, so its
    extra memory grows linearly with the length. So does training: the forward pass keeps only the output and
    two numbers per query (its largest score and its sum), and the backward pass
    (:mod:`attention_lib.memory_efficient.backward`) recomputes every block of weights from them, as
    FlashAttention does. It supports one backward pass (not double backward). float16/bfloat16 inputs are
    computed in float32 and returned in their own dtype.

    Args:
        query: ``(N, ..., L, E)``.
        key: ``(N, ..., S, E)``.
        value: ``(N, ..., S, Ev)``.
        attn_mask: optional, broadcastable to ``(N, ..., L, S)``. Bool: ``True`` = may attend. Float: added
            to the scores (``-inf`` blocks); no gradient flows into it. A
            ``torch.nn.attention.bias.CausalBias`` works as in SDPA. Note that ``nn.MultiheadAttention`` uses
            ``True`` = blocked.
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only (top-left aligned, like SDPA);
            blocks entirely in the future are skipped. Cannot be combined with ``attn_mask``.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        block_size: queries and keys per block (a positive int), or a pair ``(queries, keys)`` per block;
            by default :data:`DEFAULT_BLOCK_SIZE`, with fewer keys (and queries) per block in the forward pass
            where a block of scores of every batch and head would not fit half of the CPU's L2 cache
            (:func:`~attention_lib.memory_efficient._blocks.forward_blocks`).

    Returns:
        The output ``(N, ..., L, Ev)``. A query whose every key is masked, or that has no key at all
        (``S = 0``), gets exact zeros (and zero gradients), never NaN.

    Raises:
        TypeError: if an input is not a tensor, not floating point, a mask has an unusable dtype, or
            ``block_size`` is not an int or a pair of ints.
        ValueError: if shapes, devices, dtypes or the mask do not fit together (as in
            :func:`attention_lib.calculate_attention`, ``E = 0`` included: SDPA would return the mean of the
            values, the course refuses vectors of no features), ``attn_mask`` is combined with ``is_causal``, or
            ``block_size < 1``.

    Example:
        >>> from attention_lib import calculate_attention
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(2, 10, 8), torch.randn(2, 12, 8), torch.randn(2, 12, 3)
        >>> out = memory_efficient_attention(q, k, v, block_size=4)  # 3 x 3 blocks of scores
        >>> torch.allclose(out, calculate_attention(q, k, v)[0], atol=1e-6)
        True
    """
    check_qkv(query, key, value)
    check_options(attn_mask, 0.0, is_causal, scale)
    attn_mask, from_bias = resolve_causal_bias(attn_mask, query.size(-2), key.size(-2), query.device)
    is_causal = is_causal or from_bias
    if attn_mask is not None:
        check_mask(attn_mask, scores_shape(query, key), query)
    block = check_block_size(block_size)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dtype = query.dtype
    if dtype in (torch.float16, torch.bfloat16):  # sums of many exponentials need more than 8-11 bits
        query, key, value = query.float(), key.float(), value.float()
        attn_mask = attn_mask.float() if attn_mask is not None and attn_mask.is_floating_point() else attn_mask
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.detach()  # a float mask is a constant here: no gradient flows into it
    output = _MemoryEfficientAttention.apply(query, key, value, attn_mask, is_causal, scale, block,
                                             block_size is None)
    return output.to(dtype)


class _MemoryEfficientAttention(torch.autograd.Function):
    """The forward pass block by block, saving the output and two numbers per query for the backward pass.

    Nothing of size ``L x S`` is saved. The backward pass (:func:`.backward.blockwise_backward`) recomputes
    the weights block by block without a graph, hence ``once_differentiable``: differentiating its gradients
    again raises an error instead of giving wrong second derivatives.
    """

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, is_causal: bool, scale: float, block: tuple[int, int],
                by_cache: bool = False):
        if fused_applies(query, key, value, attn_mask, by_cache):  # on a CPU: its fused kernel, block by block
            output, row_max, row_sum = fused_forward(query, key, value, is_causal, scale)
        else:
            forward_block = block
            if by_cache:  # block_size not given: blocks of scores that stay in the L2 cache (the backward: its own)
                batch = math.prod(torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
                forward_block = forward_blocks(batch, query.element_size())
            output, row_max, row_sum = _blockwise_forward(query, key, value, attn_mask, is_causal, scale,
                                                          forward_block)
        ctx.save_for_backward(query, key, value, attn_mask, output, row_max, row_sum)
        ctx.options = is_causal, scale, block
        return output

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        query, key, value, attn_mask, output, row_max, row_sum = ctx.saved_tensors
        grads = blockwise_backward(grad_output, query, key, value, attn_mask, output, row_max, row_sum,
                                   *ctx.options, needs=ctx.needs_input_grad[:3])
        return (*grads, None, None, None, None, None)


def _blockwise_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None,
                       is_causal: bool, scale: float,
                       block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The forward pass, block by block: the output ``(N, ..., L, Ev)``, each row's max and sum ``(N, ..., L, 1)``.

    The largest score of a query and the sum of its ``2 ** (score - max)`` (scores in base 2) are what the
    backward pass needs: ``2 ** (score - max) / sum`` is that query's weight for any key, so any block of
    weights can be recomputed from its scores. (FlashAttention keeps one number, ``max + log(sum)``; two keep
    the weights exact when a mask blocks with ``torch.finfo(dtype).min``, where ``max + log(sum)`` rounds back
    to ``max``.) A query without any key (its sum stays 0) gets output 0, max ``+inf`` and sum 1 (so every
    recomputed weight is ``2 ** -inf = 0``). The max and sum have the scores' batch shape (query's and key's),
    the output the batch shape of all three inputs.
    """
    q_block_size, k_block_size = block
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    score_batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    batch = torch.broadcast_shapes(score_batch, value.shape[:-2])
    attn_mask = full_mask(attn_mask, L, S)
    output = query.new_empty(*batch, L, Ev)
    row_max = query.new_empty(*score_batch, L, 1)
    row_sum = query.new_empty(*score_batch, L, 1)
    for q_start in range(0, L, q_block_size):
        q_stop = min(q_start + q_block_size, L)
        # Scale the queries, not the scores, and count in powers of 2 (see _blocks.LOG2_E): (N, ..., Bq, E)
        q_scaled = query[..., q_start:q_stop, :] * (scale * LOG2_E)
        running_max = query.new_full((*score_batch, q_stop - q_start, 1), float("-inf"))
        running_sum = query.new_zeros(*score_batch, q_stop - q_start, 1)
        running_output = query.new_zeros(*batch, q_stop - q_start, Ev)
        for k_start, k_stop in key_blocks(q_start, q_stop, S, k_block_size, is_causal):
            scores = block_scores(q_scaled, key, attn_mask, is_causal, q_start, q_stop, k_start, k_stop)
            running_max = _fold_block_(running_max, running_sum, running_output, scores,
                                       value[..., k_start:k_stop, :])
        no_key = running_sum == 0  # (N, ..., Bq, 1): every key masked, or none at all
        output[..., q_start:q_stop, :] = (running_output / running_sum).masked_fill_(no_key, 0.0)
        row_max[..., q_start:q_stop, :] = running_max.masked_fill(no_key, float("inf"))
        row_sum[..., q_start:q_stop, :] = running_sum.masked_fill_(no_key, 1.0)
    return output, row_max, row_sum


def _fold_block_(running_max: torch.Tensor, running_sum: torch.Tensor, running_output: torch.Tensor,
                 scores: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """:func:`online_softmax_update` in place and in base 2 (scores in powers of 2, ``exp2`` for ``exp``):
    ``scores`` become the block's weights, and ``running_sum`` and ``running_output`` are updated where they
    are (no new memory for them). Returns the new running max."""
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (N, ..., Bq, 1)
    shift = new_max.clamp(min=torch.finfo(new_max.dtype).min)  # see online_softmax_update
    correction = torch.exp2(running_max - shift)
    weights = scores.sub_(shift).exp2_()  # (N, ..., Bq, Bk)
    running_sum.mul_(correction).add_(weights.sum(dim=-1, keepdim=True))
    running_output.mul_(correction)
    if weights.shape[:-2] == value.shape[:-2] == running_output.shape[:-2] and running_output.is_contiguous():
        # the same batch everywhere: the product is added where it lands, inside the matrix product (beta = 1)
        flat = running_output.view(-1, *running_output.shape[-2:])
        flat.baddbmm_(weights.reshape(-1, *weights.shape[-2:]), value.reshape(-1, *value.shape[-2:]))
    else:
        running_output.add_(weights @ value)  # (..., Bq, Bk) @ (..., Bk, Ev) -> (..., Bq, Ev)
    return new_max
