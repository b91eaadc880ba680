"""Masks: who may look at whom. A causal mask hides the future; a padding mask hides the padding.

Convention, the same as ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) and everywhere in this
package: a bool mask holds ``True`` where a query **may attend** to a key, ``False`` where it is blocked.

Careful: ``torch.nn.MultiheadAttention`` means the **opposite**. Its ``key_padding_mask`` (and a bool
``attn_mask``) hold ``True`` where attending is **blocked**. Turn one of our masks into its convention with
``~mask`` (and drop the broadcast dimension: ``key_padding_mask = ~padding_mask(lengths, S).squeeze(1)``).

Built step by step in ``notebooks/08_masking.ipynb``.
"""

from __future__ import annotations

from numbers import Integral

import torch


def _check_size(value, name: str, fix: str) -> int:
    """Check that a size is a non-negative Python (or NumPy) integer, and return it as an ``int``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int (a number of positions), but got {type(value).__name__}; {fix}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative number of positions, but {name}={value}; {fix}")
    return int(value)


def causal_mask(L: int, S: int | None = None, device=None) -> torch.Tensor:
    """A causal (look-back-only) mask: query ``i`` may attend to keys ``0..i`` and not to the future.

    Built step by step in ``notebooks/08_masking.ipynb``.

    ``True`` = **may attend** (SDPA's convention). The mask is ``torch.ones(L, S).tril()``, aligned at the
    top-left corner exactly like SDPA's ``is_causal=True``: ``calculate_attention(q, k, v,
    attn_mask=causal_mask(L, S))`` equals ``calculate_attention(q, k, v, is_causal=True)``. When ``L > S``,
    the rows past ``S`` see every key; when ``L < S``, the last keys are hidden from every query.
    ``nn.MultiheadAttention`` wants the opposite (``True`` = blocked): pass it ``~causal_mask(L)``.

    Args:
        L: the number of queries (target length).
        S: the number of keys (source length); defaults to ``L`` (self-attention).
        device: where to create the mask; defaults to the CPU. Use ``query.device``.

    Returns:
        A bool tensor ``(L, S)``, ``True`` on and below the diagonal. It broadcasts against scores
        ``(N, ..., L, S)``.

    Raises:
        TypeError: if ``L`` or ``S`` is not an integer.
        ValueError: if ``L`` or ``S`` is negative.

    Example:
        >>> causal_mask(3)
        tensor([[ True, False, False],
                [ True,  True, False],
                [ True,  True,  True]])
        >>> causal_mask(2, 4).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0]], dtype=torch.int32)
    """
    fix = "pass sizes such as query.size(-2) and key.size(-2)."
    L = _check_size(L, "L", fix)
    S = L if S is None else _check_size(S, "S", fix)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()  # (L, S)


def padding_mask(lengths, S: int, device=None) -> torch.Tensor:
    """A padding mask for a batch of sentences of different lengths: only real tokens may be attended to.

    Built step by step in ``notebooks/08_masking.ipynb``.

    Sentence ``n`` fills positions ``0..lengths[n]-1`` of a padded batch of ``S`` positions; the rest is
    padding. ``True`` = **may attend** (a real token), ``False`` = padding (blocked), as in SDPA. This is the
    **opposite** of ``nn.MultiheadAttention``'s ``key_padding_mask`` (``True`` = padding, blocked): for it,
    use ``~padding_mask(lengths, S).squeeze(1)``, shape ``(N, S)``.

    The mask has shape ``(N, 1, S)``: one row per sentence, shared by all ``L`` queries, so it broadcasts
    against scores ``(N, L, S)``. With heads, scores are ``(N, H, L, S)``: use
    ``padding_mask(lengths, S).unsqueeze(1)``, shape ``(N, 1, 1, S)``. Combine it with a causal mask with
    ``&``: ``causal_mask(L, S) & padding_mask(lengths, S)`` is ``(N, L, S)``.

    Args:
        lengths: ``(N,)``, the number of real tokens of each sentence: a 1-D integer tensor or a list of ints.
        S: the padded length (the number of keys), at least ``max(lengths)``.
        device: where to create the mask; defaults to ``lengths``' device (the CPU for a list).

    Returns:
        A bool tensor ``(N, 1, S)``, ``True`` at real tokens.

    Raises:
        TypeError: if ``lengths`` is not a tensor or list of integers, or ``S`` is not an integer.
        ValueError: if ``lengths`` is not 1-D, has a negative entry or one larger than ``S``, or ``S`` is
            negative.

    Example:
        >>> padding_mask([3, 1], S=4)
        tensor([[[ True,  True,  True, False]],
        <BLANKLINE>
                [[ True, False, False, False]]])
        >>> padding_mask(torch.tensor([3, 1]), S=4).unsqueeze(1).shape  # for (N, H, L, S) scores
        torch.Size([2, 1, 1, 4])
    """
    S = _check_size(S, "S", "pass the padded length, e.g. key.size(-2).")
    if isinstance(lengths, list | tuple):
        try:
            lengths = torch.tensor(lengths, device=device)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"lengths must be a list of ints (numbers of real tokens), but got {lengths!r}; "
                            f"e.g. [len(s) for s in sentences].") from None
        if not lengths.numel():
            lengths = lengths.long()
    if not isinstance(lengths, torch.Tensor):
        raise TypeError(f"lengths must be a 1-D integer tensor or a list of ints, but got "
                        f"{type(lengths).__name__}; e.g. torch.tensor([len(s) for s in sentences]).")
    if lengths.dtype == torch.bool or lengths.is_floating_point() or lengths.is_complex():
        raise TypeError(f"lengths must hold integers (numbers of real tokens), but lengths.dtype={lengths.dtype}; "
                        f"convert it with lengths.long().")
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D, one length per sentence (N,), but lengths.shape="
                         f"{tuple(lengths.shape)}; flatten it with lengths.reshape(-1).")
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be non-negative, but lengths={lengths.tolist()}; "
                         f"each entry counts the real tokens of one sentence.")
    if lengths.numel() and int(lengths.max()) > S:
        raise ValueError(f"every length must be at most the padded length S={S}, but lengths={lengths.tolist()}; "
                         f"pass S=max(lengths) or more (the number of keys, key.size(-2)).")
    if device is not None:
        lengths = lengths.to(device)
    positions = torch.arange(S, device=lengths.device)  # (S,)
    # (1, S) < (N, 1) -> (N, S): position j is real when j < lengths[n]
    allowed = positions.unsqueeze(0) < lengths.unsqueeze(1)
    return allowed.unsqueeze(1)  # (N, S) -> (N, 1, S)
