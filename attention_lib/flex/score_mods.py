"""Biases on the scores as functions of positions: ``score_mod(score, b, h, q_idx, kv_idx) -> new score``.

FlexAttention's second hook: it runs on each scaled score, after the scaler and before the mask and the softmax,
and returns the score to use instead. An additive bias (ALiBi, a relative-position table) adds to it; soft-capping
squashes it. Built step by step in ``notebooks/20_flex_attention.ipynb``.
"""

from __future__ import annotations

import torch

from ..validation import check_int, check_number


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi's slope of each head: ``2 ** (-8 (h + 1) / heads)`` for ``h = 0 .. heads - 1`` (Press et al., 2022).

    Built step by step in ``notebooks/20_flex_attention.ipynb``. The geometric sequence of the paper for a number of
    heads that is a power of two (for 8 heads: 1/2, 1/4, ..., 1/256); any positive number of heads is accepted.

    Raises:
        TypeError, ValueError: if ``heads`` is not a positive int.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    heads = check_int(heads, "heads", minimum=1, fix="pass the number of attention heads H.")
    return 2.0 ** (-8.0 * torch.arange(1, heads + 1, dtype=torch.float32) / heads)  # (H,)


def alibi_mod(heads: int):
    """ALiBi as a score_mod: head ``h`` subtracts ``slope[h]`` times the distance from the query back to the key.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``score + slope[h] * (kv_idx - q_idx)``: a key
    ``d`` positions back loses ``slope[h] * d``, so each head fades the past at its own rate (Press et al., 2022,
    "Train Short, Test Long"). Usually combined with the causal mask.

    Args:
        heads: the number of heads ``H`` (the slopes come from :func:`alibi_slopes`).

    Returns:
        A score_mod ``(score, b, h, q_idx, kv_idx) -> score``.

    Raises:
        TypeError, ValueError: if ``heads`` is not a positive int.

    Example:
        >>> alibi_mod(2)(torch.zeros(3), 0, torch.tensor(0), torch.tensor(2), torch.arange(3))
        tensor([-0.1250, -0.0625,  0.0000])
    """
    slopes = alibi_slopes(heads)

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h].to(score.dtype) * (kv_idx - q_idx)

    return alibi


def soft_cap_mod(cap: float):
    """Soft-capping as a score_mod: ``cap * tanh(score / cap)`` keeps every score inside ``(-cap, cap)``.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. Small scores pass almost unchanged, large ones
    are squashed smoothly towards ``±cap``: no score grows past the cap, so two keys' weights differ by at most a
    factor ``exp(2 * cap)`` (Gemma 2 caps its attention scores at 50, Gemma Team, 2024, which keeps them from running
    away; only a small cap leaves the other keys a visible share).

    Args:
        cap: the bound, a positive number.

    Returns:
        A score_mod ``(score, b, h, q_idx, kv_idx) -> score``.

    Raises:
        TypeError, ValueError: if ``cap`` is not a positive finite number.

    Example:
        >>> soft_cap_mod(5.0)(torch.tensor([0.5, 5.0, 50.0]), 0, 0, 0, 0)
        tensor([0.4983, 3.8080, 5.0000])
    """
    cap = check_number(cap, "cap", positive=True, fix="pass the bound of the scores, e.g. 50.0.")

    def soft_cap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return soft_cap
