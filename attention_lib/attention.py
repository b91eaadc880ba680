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

from .masks import apply_mask, causal_mask, resolve_causal_bias, rows_with_keys
from .validation import (
    check_bool,
    check_int,
    check_mask,
    check_number,
    check_options,
    check_qkv,
    check_query_key,
    check_tensor,
    check_weights_value,
    scores_shape,
)


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
    check_query_key(query, key)
    # (N, ..., L, E) @ (N, ..., E, S) -> (N, ..., L, S)
    return query @ key.transpose(-2, -1)


def scaler(scores: torch.Tensor, d_k: int, *, scale: float | None = None) -> torch.Tensor:
    """Step 3, the scaler: ``scores / sqrt(d_k)``, so that scores keep a variance near 1 whatever ``d_k``.

    Built step by step in ``notebooks/04_scaler.ipynb``.

    Args:
        scores: ``(N, ..., L, S)``, the raw scores from :func:`matchmaker`.
        d_k: the size ``E`` of the query and key vectors (a positive integer).
        scale: if given, multiply by it instead of dividing by ``sqrt(d_k)`` (SDPA's ``scale`` argument).

    Returns:
        The scaled scores, a new tensor of the same shape as ``scores``.

    Raises:
        TypeError: if ``scores`` is not a floating-point tensor, ``d_k`` is not an integer or ``scale`` is not
            a number.
        ValueError: if ``d_k`` is not positive or ``scale`` is not finite.

    Example:
        >>> scaler(torch.tensor([[4.0, 8.0]]), d_k=16)
        tensor([[1., 2.]])
    """
    check_tensor(scores, "scores", min_dim=1)
    d_k = check_int(d_k, "d_k", minimum=1, fix="use query.size(-1), the size E of each query vector.")
    if scale is not None:
        return scores * check_number(scale, "scale", fix="leave it None for 1/sqrt(d_k).")
    return scores / math.sqrt(d_k)


def percentages(scores: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Step 4, the percentages: a softmax over the keys (last dimension), so each row sums to 1.

    Built step by step in ``notebooks/05_percentages.ipynb`` (masks in ``notebooks/08_masking.ipynb``).

    A row whose every key is masked has nothing to attend to: its weights are exact zeros (not NaN, not a
    uniform spread), and its gradients are zeros too. This is what
    ``torch.nn.functional.scaled_dot_product_attention`` does on CPU since torch 2.5. (A float mask that
    blocks with a large finite number, such as ``torch.finfo(dtype).min``, leaves every key a finite score:
    such a row gets the uniform average, as in SDPA.)

    Args:
        scores: ``(N, ..., L, S)``, scaled scores.
        attn_mask: optional, broadcastable to ``(N, ..., L, S)``. Bool: ``True`` = may attend. Float: added
            to the scores (``-inf`` blocks). A ``torch.nn.attention.bias.CausalBias`` works as in SDPA.

    Returns:
        The attention weights ``(N, ..., L, S)``, a new tensor: non-negative, each row sums to 1 (or is all
        zeros when fully masked).

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
    L, S = (scores.shape[-2] if scores.dim() > 1 else 1), scores.shape[-1]
    attn_mask, is_causal = resolve_causal_bias(attn_mask, L, S, scores.device)
    attn_mask = causal_mask(L, S, device=scores.device) if is_causal else attn_mask
    check_mask(attn_mask, tuple(scores.shape), scores)
    has_key = rows_with_keys(attn_mask)  # (N, ..., L, 1), or None when every row has a key
    scores = apply_mask(scores, attn_mask)
    if has_key is None:
        return torch.softmax(scores, dim=-1)
    # A row with no key left is -inf everywhere: its softmax would be 0/0 = NaN. Give it zeros before the
    # softmax (finite, with finite gradients) and zero its weights afterwards.
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
        TypeError: if an input is not a floating-point tensor, or their dtypes differ.
        ValueError: if the number of keys ``S`` differs between ``weights`` and ``value``, their batch dimensions
            do not broadcast, or they are on different devices.

    Example:
        >>> blend(torch.tensor([[0.25, 0.75]]), torch.tensor([[4.0, 0.0], [0.0, 4.0]]))
        tensor([[1., 3.]])
    """
    check_weights_value(weights, value)
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
    ``notebooks/06_blend.ipynb``: d_k, the matchmaker, the scaler, the percentages, the blend. The body reads as
    those five calls, like the reference implementation in SDPA's docstring. Arguments and results follow
    ``torch.nn.functional.scaled_dot_product_attention`` (SDPA); with ``need_weights=False`` it *is* SDPA (the
    fast path beside the recipe), since a fused kernel that returns no weights never builds the ``(L, S)``
    matrix.

    Args:
        query: ``(N, ..., L, E)``.
        key: ``(N, ..., S, E)``.
        value: ``(N, ..., S, Ev)``.
        attn_mask: optional, broadcastable to ``(N, ..., L, S)``. Bool: ``True`` = may attend. Float:
            added to the scores (``-inf`` blocks). Note that ``nn.MultiheadAttention`` uses ``True`` = blocked.
            A ``torch.nn.attention.bias.CausalBias`` (``causal_upper_left``, ``causal_lower_right``) works as
            in SDPA.
        dropout_p: probability of zeroing a weight (applied whenever ``dropout_p > 0``, as in SDPA).
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only: the mask ``tril(ones(L, S))``,
            aligned top-left like SDPA's. Cannot be combined with ``attn_mask``.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        need_weights: if ``False``, return ``(output, None)`` and take the fastest path (SDPA itself, with
            ``is_causal`` passed on as it is). With weights, each step makes a new ``(N, ..., L, S)`` tensor
            from the previous one, so at most two of them exist at once without a mask.

    Returns:
        ``(output, weights)``: output ``(N, ..., L, Ev)`` and weights ``(N, ..., L, S)`` (after dropout, so
        that ``output == weights @ value``), or ``None`` when ``need_weights=False``. A query whose every key
        is masked gets exact zeros in both (and zero gradients), never NaN. A query that holds a NaN gets NaN in
        its output row, on both paths (NaN in, NaN out).

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
    attn_mask, is_causal = _prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)
    if not need_weights:
        return _sdpa_fast_path(query, key, value, attn_mask, dropout_p, is_causal, scale), None
    # 1. d_k: the size of each query (and key) vector.
    d_k = query.size(-1)
    # 2. The matchmaker: (N, ..., L, E) @ (N, ..., E, S) -> (N, ..., L, S)
    scores = matchmaker(query, key)
    # 3. The scaler: / sqrt(d_k), or * scale.
    scores = scaler(scores, d_k, scale=scale)
    # 4. The percentages: mask, then softmax over the keys (a row without any key gets zeros).
    weights = percentages(scores, attn_mask)  # (N, ..., L, S)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    # 5. The blend: (N, ..., L, S) @ (N, ..., S, Ev) -> (N, ..., L, Ev)
    output = blend(weights, value)
    return output, weights


def _prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    """Every check of a call, once, and the mask it means: ``(attn_mask, is_causal)``.

    Checks ``query``, ``key``, ``value`` and the options and reads SDPA's ``CausalBias`` objects. For the recipe
    (``need_weights=True``) ``is_causal`` becomes the mask :func:`~attention_lib.causal_mask` builds, which step 4
    checks with the scores, as it checks any mask; the fast path gets its mask checked here and ``is_causal`` as it
    is, so that SDPA can skip the future instead of reading a dense mask.
    """
    if not _common_inputs(query, key, value):  # a few attribute reads pass the common case
        check_qkv(query, key, value)
    check_options(attn_mask, dropout_p, is_causal, scale)
    check_bool(need_weights, "need_weights")
    L, S = query.size(-2), key.size(-2)
    attn_mask, from_bias = resolve_causal_bias(attn_mask, L, S, query.device)
    is_causal = is_causal or from_bias
    if need_weights:  # step 4, the percentages, checks the mask against the scores
        return (causal_mask(L, S, device=query.device) if is_causal else attn_mask), False  # True = may attend
    if attn_mask is not None:
        check_mask(attn_mask, scores_shape(query, key), query)
    return attn_mask, is_causal


def _common_inputs(query, key, value) -> bool:
    """Whether ``check_qkv`` would pass these plain tensors, read in about a microsecond (the full checks cost
    several times a decoding step's SDPA); ``False`` only means "check in full", which names any mistake."""
    if not type(query) is type(key) is type(value) is torch.Tensor:
        return False
    q, k, v = query.shape, key.shape, value.shape
    return (query.dtype == key.dtype == value.dtype and query.is_floating_point() and len(q) == len(k) == len(v) >= 2
            and query.device == key.device == value.device and q[:-2] == k[:-2] == v[:-2] and q[-1] == k[-1] >= 1
            and k[-2] == v[-2])


def _sdpa_fast_path(query, key, value, attn_mask, dropout_p, is_causal, scale, *, enable_gqa: bool = False
                    ) -> torch.Tensor:
    """The five steps in PyTorch's fused kernel, with the recipe's edges: NaN query -> NaN, no key -> zeros.

    ``is_causal`` reaches SDPA as it is, so SDPA can skip the future instead of reading a dense mask (and, on
    CUDA, pick its flash kernel), except with a scale that is not positive, where torch 2.13's fused CPU kernel
    returns NaN for ``is_causal=True``: that case gets the dense causal mask. The fused CPU kernel gives a query
    holding a NaN a row of zeros (the recipe: NaN): on the CPU one sum of the query says whether any NaN is there
    (no wait to read it), and only then do the rows whose max is NaN become NaN, in a new tensor (SDPA's saved
    output stays intact for its backward); a GPU always takes that path. Fully masked rows get zeros (as SDPA's
    since torch 2.5, pytorch/pytorch#133882; the package accepts torch 2.1) only where a mask leaves a row keyless.
    ``enable_gqa`` (torch 2.5+; :class:`~attention_lib.GroupedQueryAttention`): ``H`` query heads read ``Hkv``.
    """
    if is_causal and scale is not None and scale <= 0:
        attn_mask, is_causal = causal_mask(query.size(-2), key.size(-2), device=query.device), False
    gqa = {"enable_gqa": True} if enable_gqa else {}  # only where asked: torch before 2.5 has no such argument
    some_nan = query.device.type != "cpu" or math.isnan(query.detach().sum())  # before SDPA, which finds q cached
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                            is_causal=is_causal, scale=scale, **gqa)
    if some_nan:  # a row's max is NaN exactly when the row holds a NaN (amax propagates NaN): (N, ..., L, 1)
        output = torch.where(query.amax(dim=-1, keepdim=True).isnan(), float("nan"), output)
    has_key = rows_with_keys(attn_mask)  # (N, ..., L, 1), or None when every row has a key (or no mask at all)
    return output if has_key is None else output.masked_fill(~has_key, 0.0)
