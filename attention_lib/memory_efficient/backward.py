"""Training without the score table: the backward pass of memory-efficient attention recomputes its blocks.

Autograd would keep every block of weights for the backward pass, ``L x S`` numbers per head: the very table
that the forward pass avoided, so training would be quadratic in memory again. FlashAttention's second idea
is to keep only **one number per query**, the log-sum-exp of its scores ``lse = log(sum_j exp(s_j))``, next
to the output. Then any weight can be rebuilt from its score alone, ``p_j = exp(s_j - lse)``, so the backward
pass walks the same blocks as the forward pass, recomputes each block of weights and turns it into its
share of the gradients:

- ``dV += Pᵀ dO`` (each value got weight ``p`` in the blend);
- ``dP = dO Vᵀ`` and, through the softmax, ``dS = P * (dP - D)`` with one more number per query,
  ``D = rowsum(dO * O)`` (``= sum_j p_j dP_j``);
- ``dQ += dS K * scale`` and ``dK += dSᵀ Q * scale``.

Built step by step in ``notebooks/10_memory_efficient.ipynb``; the forward pass is
:func:`attention_lib.memory_efficient.forward.blockwise_forward`.
"""

from __future__ import annotations

import torch

from .forward import _LOG2_E, block_scores, blockwise_forward, key_blocks


class MemoryEfficientAttentionFunction(torch.autograd.Function):
    """Memory-efficient attention with a backward pass that recomputes the weights block by block.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. Call it through
    :func:`attention_lib.memory_efficient_attention`, which checks the inputs:
    ``MemoryEfficientAttentionFunction.apply(query, key, value, attn_mask, is_causal, scale, block)`` with
    ``block = (queries, keys)`` per block.
    The forward pass saves the inputs, the output ``(N, ..., L, Ev)`` and the log-sum-exp ``(N, ..., L)``;
    nothing of size ``L x S``. Double backward is not supported: a backward pass with
    ``create_graph=True`` raises a ``RuntimeError`` that says so.
    """

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, is_causal: bool, scale: float, block: int):
        output, lse = blockwise_forward(query, key, value, attn_mask, is_causal, scale, block)
        ctx.save_for_backward(query, key, value, attn_mask, output, lse)
        ctx.options = is_causal, scale, block
        return output

    @staticmethod
    def backward(ctx, grad_output):
        if torch.is_grad_enabled():  # create_graph=True: the caller wants to differentiate the gradients
            raise RuntimeError("memory_efficient_attention supports one backward pass, not double backward "
                               "(create_graph=True): its gradients are computed block by block without a graph. "
                               "For gradients of gradients use calculate_attention or "
                               "torch.nn.functional.scaled_dot_product_attention.")
        query, key, value, attn_mask, output, lse = ctx.saved_tensors
        grads = blockwise_backward(grad_output, query, key, value, attn_mask, output, lse, *ctx.options)
        return (*(g if need else None for g, need in zip(grads, ctx.needs_input_grad[:3], strict=True)),
                None, None, None, None)


def blockwise_backward(grad_output: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attn_mask: torch.Tensor | None, output: torch.Tensor, lse: torch.Tensor, is_causal: bool,
                       scale: float, block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients ``(dQ, dK, dV)`` of attention, block by block, from the output and the log-sum-exp.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. Walks the blocks of
    :func:`.forward.blockwise_forward` (skipping the same future blocks when ``is_causal``),
    recomputes each block of weights as ``exp2(scores - lse)`` and accumulates its share of the gradients in
    float32. Each gradient has its own input's shape: a batch dimension that an input broadcast over is
    summed.

    Args:
        grad_output: ``(N, ..., L, Ev)``, the gradient of the loss with respect to the output.
        query, key, value: ``(N, ..., L, E)``, ``(N, ..., S, E)``, ``(N, ..., S, Ev)``, as in the forward pass.
        attn_mask: ``None`` or the forward pass's mask (``True`` = may attend; float: added).
        output: ``(N, ..., L, Ev)``, the forward pass's output.
        lse: ``(N, ..., L)``, its log-sum-exp in base 2 (``+inf`` for a query without any key).
        is_causal, scale, block: as in the forward pass (``scale`` a float, ``block`` = ``(queries, keys)``).

    Returns:
        ``(dQ, dK, dV)``, shaped like ``query``, ``key`` and ``value``.
    """
    L, S = query.shape[-2], key.shape[-2]
    batch = output.shape[:-2]
    q_block_size, k_block_size = block
    if attn_mask is not None:
        attn_mask = attn_mask.expand(*batch, L, S)  # (N, ..., L, S), a view: no new memory
    grad_output = grad_output.to(output.dtype)
    lse = lse.unsqueeze(-1)  # (N, ..., L, 1)
    row_term = (grad_output * output).sum(dim=-1, keepdim=True)  # D = rowsum(dO * O): (N, ..., L, 1)
    grad_query = query.new_empty(*batch, L, query.shape[-1])
    grad_key = key.new_zeros(*batch, S, key.shape[-1])
    grad_value = value.new_zeros(*batch, S, value.shape[-1])
    for q_start in range(0, L, q_block_size):
        q_stop = min(q_start + q_block_size, L)
        q_block = query[..., q_start:q_stop, :]  # (N, ..., Bq, E)
        q_scaled = q_block * (scale * _LOG2_E)  # the same base-2 scores as the forward pass
        dout = grad_output[..., q_start:q_stop, :]  # (N, ..., Bq, Ev)
        dq = grad_query[..., q_start:q_stop, :].zero_()  # (N, ..., Bq, E), accumulated block by block
        for k_start, k_stop in key_blocks(q_start, q_stop, S, k_block_size, is_causal):
            scores = block_scores(q_scaled, key, attn_mask, is_causal, q_start, q_stop, k_start, k_stop)
            weights = scores.sub_(lse[..., q_start:q_stop, :]).exp2_()  # P = exp(s - lse): (N, ..., Bq, Bk)
            # (N, ..., Bk, Bq) @ (N, ..., Bq, Ev) -> (N, ..., Bk, Ev)
            grad_value[..., k_start:k_stop, :] += weights.transpose(-2, -1) @ dout
            # dP = dO Vᵀ: (N, ..., Bq, Ev) @ (N, ..., Ev, Bk) -> (N, ..., Bq, Bk)
            grad_scores = dout @ value[..., k_start:k_stop, :].transpose(-2, -1)
            grad_scores.sub_(row_term[..., q_start:q_stop, :]).mul_(weights)  # dS = P * (dP - D), before scale
            dq += grad_scores @ key[..., k_start:k_stop, :]  # (N, ..., Bq, Bk) @ (N, ..., Bk, E) -> (N, ..., Bq, E)
            # (N, ..., Bk, Bq) @ (N, ..., Bq, E) -> (N, ..., Bk, E)
            grad_key[..., k_start:k_stop, :] += grad_scores.transpose(-2, -1) @ q_block
    grad_query.mul_(scale)
    grad_key.mul_(scale)
    return grad_query.sum_to_size(query.shape), grad_key.sum_to_size(key.shape), grad_value.sum_to_size(value.shape)
