"""Lesson 08's experiment: the masks of a padded batch, as its explorer draws them."""

from __future__ import annotations

import torch

from ..masks import causal_mask, padding_mask

#: The masks of lesson 08's explorer.
MASK_KINDS: tuple[str, ...] = ("none", "causal", "padding", "causal + padding")


def batch_mask(kind: str, lengths: torch.Tensor, S: int) -> torch.Tensor:
    """The bool mask ``(N, S, S)`` of one of :data:`MASK_KINDS` for a padded batch (``True`` = may attend).

    Drawn by the explorer of ``notebooks/08_masking.ipynb``.

    Args:
        kind: one of ``"none"``, ``"causal"``, ``"padding"``, ``"causal + padding"``.
        lengths: ``(N,)``, the number of real tokens of each sentence.
        S: the padded length.

    Returns:
        A bool tensor ``(N, S, S)``: ``[n, i, j]`` says whether word ``i`` of sentence ``n`` may attend to
        word ``j``.

    Raises:
        ValueError: if ``kind`` is not one of :data:`MASK_KINDS`.

    Example:
        >>> batch_mask("causal + padding", torch.tensor([2]), 3).int()
        tensor([[[1, 0, 0],
                 [1, 1, 0],
                 [1, 1, 0]]], dtype=torch.int32)
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, but kind={kind!r}.")
    N = lengths.shape[0]
    mask = torch.ones(N, S, S, dtype=torch.bool, device=lengths.device)  # (N, L, S) with L = S: self-attention
    if "causal" in kind:
        mask = mask & causal_mask(S, S, device=lengths.device)  # (N, L, S) & (L, S) -> (N, L, S)
    if "padding" in kind:
        mask = mask & padding_mask(lengths, S)  # (N, L, S) & (N, 1, S) -> (N, L, S)
    return mask
