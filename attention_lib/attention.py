"""Scaled dot-product attention in five steps: d_k, the matchmaker, the scaler, the percentages, the blend.

Shape legend, used in every docstring of the package (the same as PyTorch's
``torch.nn.functional.scaled_dot_product_attention``):

- ``N, ...``: any number of batch dimensions (zero or more), for example batch and heads;
- ``L``: the number of queries (target length), ``S``: the number of keys and values (source length);
- ``E``: the size of each query and key vector (``d_k``), ``Ev``: the size of each value vector.

Mask convention, everywhere in this package: a **bool** mask holds ``True`` where a query **may attend** to a
key (as in SDPA); a **float** mask is **added** to the scores (``0`` keeps a score, ``-inf`` removes it).
``torch.nn.MultiheadAttention``'s ``key_padding_mask`` and bool ``attn_mask`` mean the opposite
(``True`` = blocked): invert them with ``~mask`` before passing them here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .checks import check_mask, check_options, check_qkv, check_tensor, scores_shape


def matchmaker(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Step 2, the matchmaker: raw scores ``query @ key.transpose(-2, -1)``.

    Built step by step in ``notebooks/03_matchmaker.ipynb``.

    Args:
        query: ``(N, ..., L, E)``, what each word is looking for.
        key: ``(N, ..., S, E)``, what each word offers.

    Returns:
        The raw scores ``(N, ..., L, S)``: entry ``[i, j]`` says how well key ``j`` answers query ``i``.

    Raises:
        TypeError: if an input is not a floating-point tensor.
        ValueError: if an input has fewer than 2 dimensions, or ``query`` and ``key`` differ in ``E``.

    Example:
        >>> q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
        >>> k = torch.tensor([[1.0, 1.0], [3.0, 0.0], [0.0, 1.0]])
        >>> matchmaker(q, k)
        tensor([[1., 3., 0.],
                [2., 0., 2.]])
    """
    check_qkv(query, key, key)
    # (N, ..., L, E) @ (N, ..., E, S) -> (N, ..., L, S)
    return query @ key.transpose(-2, -1)


def scaler(scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Step 3, the scaler: ``scores / sqrt(d_k)``, so that scores keep a variance near 1 whatever ``d_k``.

    Built step by step in ``notebooks/04_scaler.ipynb``.

    Args:
        scores: ``(N, ..., L, S)``, the raw scores from :func:`matchmaker`.
        d_k: the size ``E`` of the query and key vectors (a positive integer).

    Returns:
        The scaled scores, same shape as ``scores``.

    Raises:
        TypeError: if ``scores`` is not a floating-point tensor or ``d_k`` is not an integer.
        ValueError: if ``d_k`` is not positive.

    Example:
        >>> scaler(torch.tensor([[4.0, 8.0]]), d_k=16)
        tensor([[1., 2.]])
    """
    check_tensor(scores, "scores", min_dim=1)
    if isinstance(d_k, bool) or not isinstance(d_k, int):
        raise TypeError(f"d_k must be an int (the size E of each query vector), but got {type(d_k).__name__}; "
                        f"use query.size(-1).")
    if d_k <= 0:
        raise ValueError(f"d_k must be positive, but d_k={d_k}; use query.size(-1).")
    return scores / math.sqrt(d_k)


def percentages(scores: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Step 4, the percentages: a softmax over the keys (last dimension), so each row sums to 1.

    Built step by step in ``notebooks/05_percentages.ipynb`` (masks in ``notebooks/08_masking.ipynb``).

    A row whose every key is masked has nothing to attend to: its weights are exact zeros (not NaN, not a
    uniform spread), and its gradients are zeros too. This is what
    ``torch.nn.functional.scaled_dot_product_attention`` does on CPU since torch 2.5.

    Args:
        scores: ``(N, ..., L, S)``, scaled scores.
        attn_mask: optional, broadcastable to ``(N, ..., L, S)``. Bool: ``True`` = may attend. Float: added
            to the scores (``-inf`` blocks).

    Returns:
        The attention weights ``(N, ..., L, S)``: non-negative, each row sums to 1 (or is all zeros when
        fully masked).

    Raises:
        TypeError: if ``scores`` or ``attn_mask`` has an unusable type or dtype.
        ValueError: if ``attn_mask`` does not broadcast to ``scores.shape``.

    Example:
        >>> percentages(torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
        tensor([[0.5000, 0.5000],
                [0.5000, 0.5000]])
        >>> percentages(torch.tensor([[2.0, 1.0]]), attn_mask=torch.tensor([[False, True]]))
        tensor([[0., 1.]])
    """
    check_tensor(scores, "scores", min_dim=1)
    if attn_mask is None:
        return torch.softmax(scores, dim=-1)
    check_mask(attn_mask, tuple(scores.shape), scores)
    if attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    else:
        scores = scores + attn_mask
    # A row that is -inf everywhere would give 0/0 = NaN. Give it zeros before the softmax (finite, with
    # finite gradients) and zero its weights afterwards.
    has_key = scores.amax(dim=-1, keepdim=True) > float("-inf")  # (N, ..., L, 1)
    weights = torch.softmax(scores.masked_fill(~has_key, 0.0), dim=-1)
    return weights.masked_fill(~has_key, 0.0)


def blend(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Step 5, the blend: ``weights @ value``, each output a weighted average of the value vectors.

    Built step by step in ``notebooks/06_blend.ipynb``.

    Args:
        weights: ``(N, ..., L, S)``, attention weights from :func:`percentages`.
        value: ``(N, ..., S, Ev)``, what each word hands over.

    Returns:
        The output ``(N, ..., L, Ev)``.

    Raises:
        TypeError: if an input is not a floating-point tensor.
        ValueError: if the number of keys ``S`` differs between ``weights`` and ``value``.

    Example:
        >>> blend(torch.tensor([[0.25, 0.75]]), torch.tensor([[4.0, 0.0], [0.0, 4.0]]))
        tensor([[1., 3.]])
    """
    check_tensor(weights, "weights")
    check_tensor(value, "value")
    if weights.shape[-1] != value.shape[-2]:
        raise ValueError(
            f"weights must have one column per value row (S), but weights.shape={tuple(weights.shape)} and "
            f"value.shape={tuple(value.shape)}; weights come from percentages(matchmaker(query, key)) with "
            f"the same key sequence as value."
        )
    # (N, ..., L, S) @ (N, ..., S, Ev) -> (N, ..., L, Ev)
    return weights @ value


def calculate_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    need_weights: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled dot-product attention, ``softmax(Q Kᵀ · scale + mask) V``, returning the output and the weights.

    The five steps of the recipe, built one per lesson in ``notebooks/03_matchmaker.ipynb`` to
    ``notebooks/06_blend.ipynb``. Arguments and results follow
    ``torch.nn.functional.scaled_dot_product_attention`` (SDPA), which also returns no weights.

    Args:
        query: ``(N, ..., L, E)``.
        key: ``(N, ..., S, E)``.
        value: ``(N, ..., S, Ev)``.
        attn_mask: optional, broadcastable to ``(N, ..., L, S)``. Bool: ``True`` = may attend. Float:
            added to the scores (``-inf`` blocks). Note that ``nn.MultiheadAttention`` uses ``True`` = blocked.
        dropout_p: probability of zeroing a weight (applied whenever ``dropout_p > 0``, as in SDPA).
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only: the mask ``tril(ones(L, S))``,
            aligned top-left like SDPA's. Cannot be combined with ``attn_mask``.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        need_weights: if ``False``, return ``(output, None)`` and take the fastest path (SDPA itself).
            With weights and no gradient needed, the scores, the masking and the softmax share a single
            ``(N, ..., L, S)`` buffer, which becomes the returned weights.

    Returns:
        ``(output, weights)``: output ``(N, ..., L, Ev)`` and weights ``(N, ..., L, S)`` (after dropout, so
        that ``output == weights @ value``), or ``None`` when ``need_weights=False``. A query whose every key
        is masked gets exact zeros in both (and zero gradients), never NaN.

    Raises:
        TypeError: if an input is not a tensor, not floating point, or a mask has an unusable dtype.
        ValueError: if a tensor has fewer than 2 dimensions, ``query``/``key`` differ in ``E``,
            ``key``/``value`` differ in ``S``, batch dimensions or the mask do not broadcast, devices or
            dtypes differ, ``attn_mask`` is combined with ``is_causal``, or ``dropout_p`` is outside [0, 1).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
        >>> out, weights = calculate_attention(q, k, v)
        >>> out.shape, weights.shape
        (torch.Size([2, 4, 3]), torch.Size([2, 4, 6]))
        >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-6)
        True
    """
    check_qkv(query, key, value)
    check_options(attn_mask, dropout_p, is_causal, scale)
    L, S = query.shape[-2], key.shape[-2]
    if attn_mask is not None:
        check_mask(attn_mask, scores_shape(query, key), query)
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # (L, S)

    if not need_weights:
        return _fast_path(query, key, value, attn_mask, dropout_p, scale), None

    # Step 1: the scaling factor (1/sqrt(d_k) unless a custom scale is given).
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # Steps 2 and 3: the matchmaker and the scaler. Scaling the queries first gives the same scores,
    # (q * scale) @ kᵀ = (q @ kᵀ) * scale, but multiplies L x E numbers instead of L x S.
    scores = (query * scale) @ key.transpose(-2, -1)  # (N, ..., L, E) @ (N, ..., E, S) -> (N, ..., L, S)
    # Step 4: the percentages, written into the score buffer itself whenever that is safe.
    weights = _percentages_in_place(scores, attn_mask)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, inplace=not weights.requires_grad)
    # Step 5: the blend.
    output = weights @ value  # (N, ..., L, S) @ (N, ..., S, Ev) -> (N, ..., L, Ev)
    return output, weights


def _percentages_in_place(scores: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
    """Step 4 on a fresh score buffer: the weights of :func:`percentages`, with as few ``(L, S)`` buffers.

    ``scores`` must be a new tensor that nothing else uses (the matmul's result). Masking always writes into
    it: autograd allows that, because the matmul that made it does not need its result for the backward
    pass. The softmax writes into it only when no gradient is needed, because softmax's backward pass needs
    its own output intact; so without gradients a single ``(N, ..., L, S)`` buffer ever exists.
    """
    has_key = None  # (..., L, 1): which queries have at least one key; None when all of them do
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores.masked_fill_(~attn_mask, float("-inf"))
            allowed = attn_mask
        else:
            scores.add_(attn_mask)
            allowed = attn_mask > float("-inf")
        has_key = allowed.any(dim=-1, keepdim=True)  # small: it has the mask's shape, not the scores'
        if bool(has_key.all()):
            has_key = None
        else:  # a row of -inf would give 0/0 = NaN: give it zeros now (finite gradients), zero weights later
            scores.masked_fill_(~has_key, 0.0)
    if scores.requires_grad:
        weights = torch.softmax(scores, dim=-1)
        return weights if has_key is None else weights.masked_fill(~has_key, 0.0)
    weights = torch.softmax(scores, dim=-1, out=scores)
    return weights if has_key is None else weights.masked_fill_(~has_key, 0.0)


def _fast_path(query, key, value, attn_mask, dropout_p, scale) -> torch.Tensor:
    """SDPA, with fully masked rows forced to zeros (older torch and some GPU kernels give NaN there)."""
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                            scale=scale)
    if attn_mask is None:
        return output
    allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask > float("-inf")
    has_key = allowed.any(dim=-1, keepdim=True)  # (..., L, 1)
    if bool(has_key.all()):
        return output
    return output.masked_fill(~has_key, 0.0)
