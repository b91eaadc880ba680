"""Training without the score table: the backward pass of memory-efficient attention recomputes its blocks.

Autograd would keep every block of weights for the backward pass, ``L x S`` numbers per head: the very table
that the forward pass avoided, so training would be quadratic in memory again. FlashAttention's second idea
is to keep only **a number or two per query** next to the output: here its largest score ``m`` and its sum
``l = sum_j exp(s_j - m)``. Then any weight can be rebuilt from its score alone, ``p_j = exp(s_j - m) / l``,
so the backward
pass walks the same blocks as the forward pass, recomputes each block of weights and turns it into its
share of the gradients:

- ``dV += Pᵀ dO`` (each value got weight ``p`` in the blend);
- ``dP = dO Vᵀ`` and, through the softmax, ``dS = P * (dP - D)`` with one more number per query,
  ``D = rowsum(dO * O)`` (``= sum_j p_j dP_j``);
- ``dQ += dS K * scale`` and ``dK += dSᵀ Q * scale``.

Built step by step in ``notebooks/10_memory_efficient.ipynb``; the forward pass that saves the output and
each row's max and sum is :mod:`attention_lib.memory_efficient.forward`.
"""

from __future__ import annotations

import torch

from ._blocks import LOG2_E, block_scores, full_mask, key_blocks


def blockwise_backward(grad_output: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attn_mask: torch.Tensor | None, output: torch.Tensor, row_max: torch.Tensor,
                       row_sum: torch.Tensor, is_causal: bool, scale: float, block: tuple[int, int],
                       needs: tuple[bool, bool, bool] = (True, True, True)) -> tuple[torch.Tensor | None, ...]:
    """The gradients ``(dQ, dK, dV)`` of attention, block by block, from the output and each row's max and sum.

    The backward pass that ``notebooks/10_memory_efficient.ipynb`` explains. Walks the blocks of the forward pass
    (skipping the same future blocks when ``is_causal``) and recomputes each block of weights as
    ``2 ** (scores - max) / sum`` (the scores in base 2, as in the forward pass). Each gradient is accumulated
    block by block straight into its own input's shape: when an input is shared across a batch dimension (keys
    and values shared by every head, say), each block's share is summed over that dimension at once, so no
    gradient of the broadcast size is ever allocated.
    Only the gradients asked for in ``needs`` are computed; ``dV`` alone skips ``dP`` and ``dS``.

    Args:
        grad_output: ``(N, ..., L, Ev)``, the gradient of the loss with respect to the output.
        query, key, value: ``(N, ..., L, E)``, ``(N, ..., S, E)``, ``(N, ..., S, Ev)``, as in the forward pass.
        attn_mask: ``None`` or the forward pass's mask (``True`` = may attend; float: added).
        output: ``(N, ..., L, Ev)``, the forward pass's output.
        row_max, row_sum: ``(N, ..., L, 1)``, each query's largest score and its sum of ``exp(score - max)``
            (``+inf`` and ``1`` for a query without any key, so all its weights are 0).
        is_causal, scale, block: as in the forward pass (``scale`` a float, ``block`` = ``(queries, keys)``).
        needs: which of ``(dQ, dK, dV)`` to compute (autograd's ``ctx.needs_input_grad``).

    Returns:
        ``(dQ, dK, dV)``, shaped like ``query``, ``key`` and ``value``; ``None`` for a gradient not needed.
    """
    need_q, need_k, need_v = needs
    L, S = query.shape[-2], key.shape[-2]
    q_block_size, k_block_size = block
    attn_mask = full_mask(attn_mask, L, S)
    grad_output = grad_output.to(output.dtype)
    grad_query = torch.zeros_like(query) if need_q else None
    grad_key = torch.zeros_like(key) if need_k else None
    grad_value = torch.zeros_like(value) if need_v else None
    if need_q or need_k:
        row_term = (grad_output * output).sum(dim=-1, keepdim=True)  # D = rowsum(dO * O): (N, ..., L, 1)
    for q_start in range(0, L, q_block_size):
        q_stop = min(q_start + q_block_size, L)
        q_scaled = query[..., q_start:q_stop, :] * (scale * LOG2_E)  # the forward pass's base-2 scores
        dout = grad_output[..., q_start:q_stop, :]  # (N, ..., Bq, Ev)
        for k_start, k_stop in key_blocks(q_start, q_stop, S, k_block_size, is_causal):
            scores = block_scores(q_scaled, key, attn_mask, is_causal, q_start, q_stop, k_start, k_stop)
            # P = 2 ** (s - max) / sum, in base 2 like the forward pass: (N, ..., Bq, Bk)
            weights = scores.sub_(row_max[..., q_start:q_stop, :]).exp2_().div_(row_sum[..., q_start:q_stop, :])
            if need_v:
                # (N, ..., Bk, Bq) @ (N, ..., Bq, Ev) -> (N, ..., Bk, Ev), summed to value's batch shape
                dv = grad_value[..., k_start:k_stop, :]
                dv += (weights.transpose(-2, -1) @ dout).sum_to_size(dv.shape)
            if not (need_q or need_k):
                continue
            # dP = dO Vᵀ: (N, ..., Bq, Ev) @ (N, ..., Ev, Bk) -> (N, ..., Bq, Bk)
            grad_scores = dout @ value[..., k_start:k_stop, :].transpose(-2, -1)
            grad_scores = grad_scores.sub_(row_term[..., q_start:q_stop, :]).mul_(weights)  # dS = P * (dP - D)
            if need_q:
                # (N, ..., Bq, Bk) @ (N, ..., Bk, E) -> (N, ..., Bq, E); times scale at the end
                dq = grad_query[..., q_start:q_stop, :]
                dq += (grad_scores @ key[..., k_start:k_stop, :]).sum_to_size(dq.shape)
            if need_k:
                # dSᵀ (scale Q) = dSᵀ q_scaled / log2(e): (N, ..., Bk, Bq) @ (N, ..., Bq, E) -> (N, ..., Bk, E)
                dk = grad_key[..., k_start:k_stop, :]
                dk += (grad_scores.transpose(-2, -1) @ q_scaled).sum_to_size(dk.shape)
    if need_q:
        grad_query.mul_(scale)
    if need_k:
        grad_key.div_(LOG2_E)
    return grad_query, grad_key, grad_value
