"""Hard and soft lookups: a dictionary takes the one value whose key matches; attention mixes them all.

A Python ``dict`` is a *hard* lookup: an exact key gives exactly one value, anything else gives nothing.
With vectors, the hard lookup takes the value of the best-matching key (the largest dot product), which is
attention whose weights are one-hot. The *soft* lookup is :func:`attention_lib.calculate_attention`: every
key matches a little, and the answer is a weighted mix of all the values. Raising the scale (the sharpness)
of a soft lookup moves it towards the hard one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .validation import check_qkv


def hard_lookup(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The hard lookup: each query takes the one value whose key has the largest dot product with it.

    Built step by step in ``notebooks/02_library_search.ipynb``, as the contrast to the soft lookup
    :func:`attention_lib.calculate_attention`. Its weights are one-hot: ``1`` on the best key, ``0`` elsewhere
    (on a tie, the first of the best keys wins, as with ``torch.argmax``). No mask, no scale: scaling the
    scores by a positive number does not change which key is best.

    Args:
        query: ``(N, ..., L, E)``, what each word is looking for.
        key: ``(N, ..., S, E)``, what each word can be found by.
        value: ``(N, ..., S, Ev)``, what each word hands over.

    Returns:
        ``(output, weights)``: output ``(N, ..., L, Ev)``, a copy of one value row per query, and the one-hot
        weights ``(N, ..., L, S)`` (same dtype as ``query``). With no keys (``S = 0``) the output is zeros, as in
        :func:`~attention_lib.calculate_attention`.

    Raises:
        TypeError: if an input is not a floating-point tensor.
        ValueError: if an input has fewer than 2 dimensions, ``query``/``key`` differ in ``E``, ``key``/``value``
            differ in ``S``, or the batch dimensions do not broadcast.

    Example:
        >>> key = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
        >>> value = torch.tensor([[10.0], [20.0], [30.0]])
        >>> output, weights = hard_lookup(torch.tensor([[0.2, 0.9]]), key, value)
        >>> weights, output
        (tensor([[0., 1., 0.]]), tensor([[20.]]))
    """
    check_qkv(query, key, value)
    # (N, ..., L, E) @ (N, ..., E, S) -> (N, ..., L, S)
    scores = query @ key.transpose(-2, -1)
    if key.shape[-2] == 0:  # no key to find: nothing is copied, as calculate_attention gives zeros for S = 0
        return scores.new_zeros(*scores.shape[:-1], value.shape[-1]), scores
    best = scores.argmax(dim=-1)  # (N, ..., L): the index of the best key for each query
    weights = F.one_hot(best, num_classes=key.shape[-2]).to(query.dtype)  # (N, ..., L, S)
    # (N, ..., L, S) @ (N, ..., S, Ev) -> (N, ..., L, Ev)
    return weights @ value, weights
