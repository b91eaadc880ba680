"""Lesson 04's experiment: attention weights with and without the scaler, for random vectors of any size."""

from __future__ import annotations

import torch

from ..attention import matchmaker, percentages, scaler
from ..validation import check_int


def scaler_weights(d_k: int, scaled: bool = True, *, queries: int = 200, keys: int = 8,
                   seed: int = 0) -> torch.Tensor:
    """Attention weights ``(queries, keys)`` for random unit-variance queries and keys of size ``d_k``.

    Built step by step in ``notebooks/04_scaler.ipynb``.

    Args:
        d_k: the size ``E`` of each query and key vector (a positive integer).
        scaled: divide the scores by ``√d_k`` (the scaler) before the softmax.
        queries, keys: how many random queries ``L`` and keys ``S`` to draw.
        seed: the seed of the CPU generator, so the same ``d_k`` always gives the same weights.

    Returns:
        The weights ``(L, S)``, each row summing to 1.

    Raises:
        TypeError: if ``d_k``, ``queries`` or ``keys`` is not an integer.
        ValueError: if one of them is not positive.

    Example:
        >>> w = scaler_weights(16, queries=3, keys=5)
        >>> tuple(w.shape), torch.allclose(w.sum(-1), torch.ones(3))
        ((3, 5), True)
    """
    for name, size in (("d_k", d_k), ("queries", queries), ("keys", keys)):
        check_int(size, name, minimum=1, fix=f"try {name}=64.")
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(queries, d_k, generator=g)  # (L, E)
    key = torch.randn(keys, d_k, generator=g)  # (S, E)
    scores = matchmaker(query, key)  # (L, E) @ (E, S) -> (L, S)
    if scaled:
        scores = scaler(scores, d_k)
    return percentages(scores)
