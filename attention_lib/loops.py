"""Attention one word at a time, with Python loops: the slow version that lesson 07 measures against.

It computes exactly what :func:`attention_lib.calculate_attention` computes (no mask, no dropout), but asks
each query about each key in turn, the way you would by hand.
"""

from __future__ import annotations

import math

import torch

from .validation import check_number, check_qkv


def loop_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                   scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with a Python loop over queries and keys (slow on purpose).

    Built in ``notebooks/07_no_loops.ipynb``. Batch dimensions are handled by tensor operations; the loops
    run over the ``L`` queries and, twice for each query, over the ``S`` keys (one score, then one blend step per
    pair), so the work takes ``2 * L * S`` Python steps.

    Args:
        query: ``(N, ..., L, E)``.
        key: ``(N, ..., S, E)``.
        value: ``(N, ..., S, Ev)``.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.

    Returns:
        ``(output, weights)``: ``(N, ..., L, Ev)`` and ``(N, ..., L, S)``.

    Raises:
        TypeError, ValueError: as :func:`attention_lib.calculate_attention` for bad inputs (and ``scale``), ``E = 0``
            included: SDPA would return the mean of the values, the course refuses vectors of no features.

    Example:
        >>> from attention_lib import calculate_attention
        >>> q, k, v = torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 2)
        >>> out, weights = loop_attention(q, k, v)
        >>> torch.allclose(out, calculate_attention(q, k, v)[0], atol=1e-6)
        True
    """
    check_qkv(query, key, value)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else check_number(scale, "scale")
    L, S = query.shape[-2], key.shape[-2]
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    weights = query.new_zeros(*batch, L, S)
    output = query.new_zeros(*batch, L, value.shape[-1])
    if S == 0:  # no keys at all: nothing to blend, so zeros (as calculate_attention and SDPA give)
        return output, weights
    for i in range(L):
        # The matchmaker and the scaler, one key at a time: a dot product of two E-vectors.
        scores = [(query[..., i, :] * key[..., j, :]).sum(-1) * scale for j in range(S)]
        row = torch.softmax(torch.stack(scores, dim=-1), dim=-1)  # (N, ..., S)
        weights[..., i, :] = row
        # The blend, one value at a time.
        for j in range(S):
            output[..., i, :] += row[..., j, None] * value[..., j, :]
    return output, weights
