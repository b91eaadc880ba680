"""Masks: who may look at whom. A causal mask hides the future; a padding mask hides the padding.

Every mask of the package is made here, and this is the one place that says what a mask *means*: :func:`apply_mask`
puts a mask on scores, :func:`rows_with_keys` finds the queries that still have a key, :func:`resolve_causal_bias`
reads SDPA's ``CausalBias`` objects. Convention, as in SDPA: a bool mask holds ``True`` where a query **may
attend** to a key. Careful: ``torch.nn.MultiheadAttention`` means the **opposite** (its ``key_padding_mask`` and
bool ``attn_mask`` hold ``True`` where attending is **blocked**): pass it ``~mask``.

Built step by step in ``notebooks/08_masking.ipynb``.
"""

from __future__ import annotations

import sys

import torch

from .validation import check_int


def causal_mask(L: int, S: int | None = None, device=None) -> torch.Tensor:
    """A causal (look-back-only) mask: query ``i`` may attend to keys ``0..i`` and not to the future.

    Built step by step in ``notebooks/08_masking.ipynb``. ``True`` = **may attend** (SDPA's convention). The mask
    is ``torch.ones(L, S).tril()``, aligned top-left exactly like SDPA's ``is_causal=True``. When ``L > S`` the rows
    past ``S`` see every key; when ``L < S`` the last keys are hidden from every query. ``nn.MultiheadAttention``
    wants the opposite (``True`` = blocked): pass it ``~causal_mask(L)``.

    Args:
        L: the number of queries (target length).
        S: the number of keys (source length); defaults to ``L`` (self-attention).
        device: where to create the mask; defaults to the CPU. Use ``query.device``.

    Returns:
        A bool tensor ``(L, S)``, ``True`` on and below the diagonal; it broadcasts against ``(N, ..., L, S)``.

    Raises:
        TypeError, ValueError: if ``L`` or ``S`` is not an integer, or is negative.

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
    L, S = check_int(L, "L", minimum=0, fix=fix), L if S is None else check_int(S, "S", minimum=0, fix=fix)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()  # (L, S)


def apply_mask(scores: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
    """Put a mask on scores: a blocked score becomes ``-inf``, so the softmax gives it weight 0.

    Part of the masking that ``notebooks/08_masking.ipynb`` teaches. A **bool** mask: ``True`` = **may attend**
    (kept), ``False`` = blocked (``-inf``); a **float** mask is **added** (``0`` keeps, ``-inf`` blocks).

    Args:
        scores: ``(N, ..., L, S)``; attn_mask: ``None`` or a mask broadcastable to ``(N, ..., L, S)``.

    Returns:
        The masked scores ``(N, ..., L, S)``, a new tensor (``scores`` itself when there is no mask).

    Example:
        >>> apply_mask(torch.tensor([[1.0, 2.0]]), torch.tensor([[True, False]]))
        tensor([[1., -inf]])
        >>> apply_mask(torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, -0.5]]))
        tensor([[1.0000, 1.5000]])
    """
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, float("-inf"))
    return scores + attn_mask


def resolve_causal_bias(attn_mask, L: int, S: int, device=None) -> tuple[torch.Tensor | None, bool]:
    """What a ``torch.nn.attention.bias.CausalBias`` stands for: ``(attn_mask, is_causal)``.

    SDPA accepts ``causal_upper_left(L, S)`` and ``causal_lower_right(L, S)`` as ``attn_mask``; their storage holds
    no mask. The top-left variant is ``is_causal=True``; the bottom-right one :func:`causal_mask_lower_right`. Any
    other mask is returned as it is, with ``is_causal=False``. Called once per public entry of the package.

    Raises:
        ValueError: if the bias was made for other lengths than ``L`` queries and ``S`` keys.

    Example:
        >>> from torch.nn.attention.bias import causal_lower_right
        >>> resolve_causal_bias(causal_lower_right(2, 3), 2, 3)
        (tensor([[ True,  True, False],
                [ True,  True,  True]]), False)
    """
    # A CausalBias exists only once its module is imported (by whoever made it). Importing it here would cost
    # seconds (it loads torch._dynamo), so look it up instead; torch before 2.3 has no such module at all.
    bias = sys.modules.get("torch.nn.attention.bias")
    if bias is None or not isinstance(attn_mask, bias.CausalBias):
        return attn_mask, False
    if (attn_mask.seq_len_q, attn_mask.seq_len_kv) != (L, S):
        raise ValueError(f"attn_mask is a CausalBias for {attn_mask.seq_len_q} queries and {attn_mask.seq_len_kv} "
                         f"keys, but the inputs have L={L} queries and S={S} keys; build it with "
                         f"causal_upper_left(L, S) or causal_lower_right(L, S) for these lengths.")
    if attn_mask.variant == bias.CausalVariant.UPPER_LEFT:
        return None, True
    return causal_mask_lower_right(L, S, device=device), False  # (L, S), bottom-right aligned


def rows_with_keys(attn_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Which queries have at least one key they may attend to: ``(..., L, 1)``, or ``None`` if all of them do.

    Part of the masking that ``notebooks/08_masking.ipynb`` teaches. A query whose every key is blocked has nothing to
    average (its softmax would be ``0 / 0 = NaN``): the package gives such a row exact zeros (weights, output,
    gradients), as SDPA does on the CPU. The result is small and broadcasts against the scores or the output.

    Args:
        attn_mask: ``None``, or a bool (``True`` = may attend) or float (``-inf`` = blocked) mask
            ``(..., L, S)``.

    Returns:
        A bool tensor ``(..., L, 1)``, ``True`` where a query has a key, or ``None`` when there is no mask, or when
        the mask is on the CPU and every query has a key (the common case, which then costs nothing more). A mask
        on another device is never read back to the host: asking "does every row have a key?" there would make
        the CPU wait for the GPU on every masked call, so the answer stays a tensor.

    Example:
        >>> rows_with_keys(torch.tensor([[True, False], [False, False]]))
        tensor([[ True],
                [False]])
        >>> rows_with_keys(causal_mask(3)) is None
        True
    """
    if attn_mask is None:
        return None
    allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask > float("-inf")
    has_key = allowed.any(dim=-1, keepdim=True)  # (..., L, S) -> (..., L, 1)
    if has_key.device.type == "cpu" and bool(has_key.all()):  # free on the CPU, a wait for the GPU elsewhere
        return None
    return has_key


def padding_mask(lengths, S: int, device=None) -> torch.Tensor:
    """A padding mask for a batch of sentences of different lengths: only real tokens may be attended to.

    Built step by step in ``notebooks/08_masking.ipynb``.

    Sentence ``n`` fills positions ``0..lengths[n]-1`` of ``S``; the rest is padding. ``True`` = **may attend** (a
    real token), as in SDPA: the **opposite** of ``nn.MultiheadAttention``'s ``key_padding_mask``, for which use
    ``~padding_mask(lengths, S).squeeze(1)``, ``(N, S)``. The ``(N, 1, S)`` mask broadcasts against scores
    ``(N, L, S)``; with heads use ``.unsqueeze(1)``, ``(N, 1, 1, S)``; ``causal_mask(L, S) & padding_mask(lengths,
    S)`` is ``(N, L, S)``.

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
    S = check_int(S, "S", minimum=0, fix="pass the padded length, e.g. key.size(-2).")
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


def causal_mask_lower_right(L: int, S: int | None = None, device=None) -> torch.Tensor:
    """A causal mask aligned to the **end** of the keys: query ``i`` of ``L`` may attend to keys ``0..S - L + i``.

    Built step by step in ``notebooks/15_generation.ipynb``. ``True`` = **may attend**. While generating, the keys
    are every token so far and the queries the newest ``L``: query ``i`` sits at position ``S - L + i``. This is
    ``torch.ones(L, S).tril(S - L)``, SDPA's ``causal_lower_right(L, S)``, and the package's one construction of it.

    :func:`causal_mask` (``is_causal=True``) is aligned **top-left**; the two agree when ``L == S`` only: one new
    query over ``S`` cached keys would see key 0 alone (pytorch/pytorch#103082) and write fluent nonsense.

    Args:
        L, S, device: the newest tokens (queries), every token so far (keys; default ``L``), where (the CPU).

    Returns:
        A bool tensor ``(L, S)`` (when ``L > S`` the first ``L - S`` rows see no key at all).

    Raises:
        TypeError, ValueError: if ``L`` or ``S`` is not an integer, or is negative.

    Example:
        >>> causal_mask_lower_right(2, 4).int()  # 2 new tokens after 2 cached ones
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    fix = "pass the number of new tokens L and the number of keys S (cached + new)."
    L, S = check_int(L, "L", minimum=0, fix=fix), L if S is None else check_int(S, "S", minimum=0, fix=fix)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)  # (L, S), aligned to the end


def sliding_window_mask(L: int, S: int | None = None, *, window: int, align: str, device=None) -> torch.Tensor:
    """A causal mask that sees only the last ``window`` keys (its own included), aligned as ``align`` says.

    Built step by step in ``notebooks/15_generation.ipynb`` (``align="lower_right"``); lesson 08's window exercise
    is checked against it with ``align="upper_left"``. ``True`` = **may attend**. Query ``i`` of ``L``
    sits at position ``p`` and may attend to keys ``p - window + 1 .. p``: the sliding window of Mistral (Jiang et
    al., 2023) and of transformers' ``sliding_window``. The two alignments are SDPA's two causal variants:

``"upper_left"``: ``p = i``, as :func:`causal_mask` (``is_causal=True``); ``"lower_right"``: ``p = S - L + i``,
    as :func:`causal_mask_lower_right` (the newest ``L`` of ``S`` positions, while decoding). They agree when
    ``L == S`` only (``window=3, L=4, S=7`` gives two different masks).

    Args:
        L, S, device: as for :func:`causal_mask`.
        window: how many keys each query sees at most, its own included (a positive int).
        align: ``"upper_left"`` or ``"lower_right"``; required, because the two differ whenever ``L != S``.

    Returns:
        A bool tensor ``(L, S)``.

    Raises:
        TypeError, ValueError: for a size that is not a non-negative int, a window not positive, an unknown align.

    Example:
        >>> sliding_window_mask(2, 4, window=2, align="upper_left").int()  # query i's window ends at key i
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0]], dtype=torch.int32)
        >>> sliding_window_mask(2, 4, window=2, align="lower_right").int()  # ... at key S - L + i
        tensor([[0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    if not isinstance(align, str):
        raise TypeError(f"align must be a string, 'upper_left' or 'lower_right', but got {type(align).__name__}.")
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {list(ALIGNMENTS)}, but align={align!r}; 'upper_left' is is_causal's "
                         f"alignment (query i ends at key i), 'lower_right' the decoding one (at key S - L + i).")
    causal = ALIGNMENTS[align](L, S, device=device)  # (L, S)
    window = check_int(window, "window", minimum=1, fix="pass how many keys a query may see, its own included.")
    L, S = causal.shape
    shift = 0 if align == "upper_left" else S - L  # query i sits at position i + shift
    return causal & ~torch.ones(L, S, dtype=torch.bool, device=device).tril(shift - window)  # drop the far past


ALIGNMENTS = {"upper_left": causal_mask, "lower_right": causal_mask_lower_right}


def decoding_mask(L: int, S: int, window: int | None = None, device=None) -> torch.Tensor | None:
    """The mask of the newest ``L`` queries over ``S`` keys (cached + new): ``None`` when it would allow everything.

    Built step by step in ``notebooks/15_generation.ipynb``. :func:`causal_mask_lower_right`, or
    :func:`sliding_window_mask` with ``align="lower_right"`` and a ``window``; one new token at the end (``L == 1``)
    may attend to every key (within its window), so it needs no mask at all, and none is made.

    Example:
        >>> decoding_mask(1, 5) is None, decoding_mask(1, 5, window=3).int().tolist()
        (True, [[0, 0, 1, 1, 1]])
        >>> decoding_mask(2, 3).int().tolist()
        [[1, 1, 0], [1, 1, 1]]
    """
    if L == 1 and (window is None or S <= window):
        return None  # one query at the end sees every key
    if window is None:
        return causal_mask_lower_right(L, S, device=device)  # (L, S)
    return sliding_window_mask(L, S, window=window, align="lower_right", device=device)  # (L, S)
