"""Grouped-query attention: query heads in groups, each group sharing one key/value head, without copying a key.

Built step by step in ``notebooks/15_generation.ipynb``. With ``H`` query heads and ``Hkv`` key/value heads
(``Hkv`` divides ``H``; Ainslie et al., 2023), query head ``h`` reads key/value head ``h // G``, ``G = H / Hkv``:

- ``Hkv = H``: multi-head attention (MHA), every head its own keys;
- ``Hkv = 1``: multi-query attention (MQA, Shazeer 2019), one set of keys for all heads;
- in between: grouped-query attention (GQA: Llama 2-70B, Llama 3, Mistral, Qwen).

The cache then holds ``Hkv`` heads instead of ``H``. **The group is folded into the query rows**: the ``G`` query
heads of a group become ``G * L`` rows of one matrix, ``(N, H, L, Dh) -> (N, Hkv, G * L, Dh)``, against that
group's keys ``(N, Hkv, S, Dh)``: one plain batched product, the same pairing as transformers' ``repeat_kv`` and
SDPA's ``enable_gqa=True``. Neither keys nor values are expanded or copied. (Broadcasting a group dimension
instead, ``(N, Hkv, G, L, Dh)`` against ``(N, Hkv, 1, S, Dh)``, makes ``matmul`` expand and copy the keys ``G``
times at every step: a cache ``G`` times the size, read and written, the one cost GQA exists to save.)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.torch_version import TorchVersion

from .attention import _sdpa_fast_path, calculate_attention
from .cache import KVCache
from .masks import causal_mask, decoding_mask, resolve_causal_bias
from .multihead import merge_heads, split_heads
from .positions import RotaryPositions
from .validation import (
    check_bool,
    check_int,
    check_is_tensor,
    check_mask,
    check_multihead_inputs,
    check_probability,
    check_rotary,
)

#: Whether the installed torch's SDPA takes ``enable_gqa`` (added in torch 2.5): read once, at import.
SDPA_HAS_GQA = TorchVersion(torch.__version__) >= (2, 5)


def _check_divides(num_heads: int, num_kv_heads: int) -> None:
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads must be divisible by num_kv_heads (each key/value head serves a group of "
                         f"num_heads // num_kv_heads query heads), but num_heads={num_heads} and num_kv_heads="
                         f"{num_kv_heads}; pick num_kv_heads among "
                         f"{[h for h in range(1, num_heads + 1) if num_heads % h == 0]}.")


def group_heads(x: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """Fold the query heads of each group into its rows: ``(N, H, L, D) -> (N, Hkv, G * L, D)``, ``G = H / Hkv``.

    Built step by step in ``notebooks/15_generation.ipynb``. Heads ``g·G .. g·G + G - 1`` form group ``g`` (as in
    transformers' ``repeat_kv`` and SDPA's ``enable_gqa``); row ``j·L + i`` of group ``g`` is query ``i`` of head
    ``g·G + j``. The result meets key/value head ``g``, ``(N, Hkv, S, D)``, in one plain product.

    Args:
        x: ``(N, H, L, D)``: the queries after :func:`~attention_lib.split_heads`, or a per-head mask ``(N, H, L, S)``.
        num_kv_heads: ``Hkv``, which must divide ``H``.

    Returns:
        ``(N, Hkv, G * L, D)`` (a view when ``x`` is contiguous; a small copy of the queries otherwise).

    Raises:
        TypeError: if ``x`` is not a tensor or ``num_kv_heads`` not an int.
        ValueError: if ``x`` is not 4-D or ``num_kv_heads`` does not divide ``H``.

    Example:
        >>> q = torch.arange(4.0).reshape(1, 4, 1, 1)  # 4 query heads of one query, each holding its number
        >>> group_heads(q, 2).flatten(2).tolist()  # 2 groups: heads 0, 1 read kv head 0; heads 2, 3 kv head 1
        [[[0.0, 1.0], [2.0, 3.0]]]
    """
    check_is_tensor(x, "x")
    num_kv_heads = check_int(num_kv_heads, "num_kv_heads", minimum=1, fix="pass Hkv, a divisor of H.")
    if x.dim() != 4:
        raise ValueError(f"group_heads expects x of shape (N, H, L, D), but x.shape={tuple(x.shape)}; split the "
                         f"queries into heads first (split_heads).")
    N, H, L, D = x.shape
    _check_divides(H, num_kv_heads)
    return x.reshape(N, num_kv_heads, H // num_kv_heads * L, D)  # (N, H, L, D) -> (N, Hkv, G·L, D)


def ungroup_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo :func:`group_heads`: ``(N, Hkv, G * L, D) -> (N, H, L, D)`` with ``H = num_heads``, heads in order.

    Built step by step in ``notebooks/15_generation.ipynb``.

    Raises:
        TypeError: if ``x`` is not a tensor or ``num_heads`` not an int.
        ValueError: if ``x`` is not 4-D or its rows do not split into ``num_heads / Hkv`` groups.

    Example:
        >>> x = torch.randn(2, 4, 3, 5)
        >>> torch.equal(ungroup_heads(group_heads(x, 2), 4), x)
        True
    """
    check_is_tensor(x, "x")
    num_heads = check_int(num_heads, "num_heads", minimum=1, fix="pass H, the number of query heads.")
    if x.dim() != 4 or num_heads % x.shape[1] or x.shape[2] % (num_heads // x.shape[1]):
        raise ValueError(f"ungroup_heads expects x of shape (N, Hkv, G * L, D) with G = num_heads / Hkv, but "
                         f"x.shape={tuple(x.shape)} and num_heads={num_heads}; it undoes group_heads.")
    N, Hkv, rows, D = x.shape
    return x.reshape(N, num_heads, rows // (num_heads // Hkv), D)  # (N, Hkv, G·L, D) -> (N, H, L, D)


def group_mask(attn_mask: torch.Tensor | None, num_heads: int, num_kv_heads: int) -> torch.Tensor | None:
    """A mask for folded scores ``(N, Hkv, G * L, S)``: ``(L, S)`` tiled to ``(G * L, S)`` (small), per head folded.

    A mask with one row for every query, ``(..., 1, S)`` (padding), broadcasts over the folded rows as it is.

    Args:
        attn_mask: ``None``, ``(L, S)``, or ``(N or 1, H or 1, L or 1, S)``.
        num_heads, num_kv_heads: ``H`` and ``Hkv``.

    Returns:
        ``None``, ``(G * L, S)``, ``(N or 1, 1, G * L, S)`` or ``(N, Hkv, G * L, S)`` (or the mask as it is).

    Raises:
        ValueError: if a 4-D mask has neither 1 nor ``num_heads`` heads.

    Example:
        >>> group_mask(torch.ones(1, 4, 2, 3, dtype=torch.bool), 4, 2).shape
        torch.Size([1, 2, 4, 3])
        >>> group_mask(torch.tensor([[True, False]]), 4, 2).shape  # one row for every query: as it is
        torch.Size([1, 2])
    """
    G = num_heads // num_kv_heads
    if attn_mask is None or G == 1:
        return attn_mask
    if attn_mask.dim() == 4 and attn_mask.shape[1] not in (1, num_heads):
        raise ValueError(f"attn_mask must be (N or 1, H or 1, L, S) with H={num_heads} query heads, but "
                         f"attn_mask.shape={tuple(attn_mask.shape)}; give every query head its row, or use 1 to "
                         f"share it.")
    if attn_mask.dim() == 4 and attn_mask.shape[1] == num_heads:
        return group_heads(attn_mask, num_kv_heads)  # (N, H, L, S) -> (N, Hkv, G·L, S)
    if attn_mask.shape[-2] == 1:
        return attn_mask  # (..., 1, S): the same row for every query, folded or not
    return attn_mask.repeat(*[1] * (attn_mask.dim() - 2), G, 1)  # (..., L, S) -> (..., G·L, S): small


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``num_kv_heads`` key/value heads, rotary positions, a window and a cache.

    Built step by step in ``notebooks/15_generation.ipynb``; the attention of :class:`~attention_lib.TinyLlama`
    (transformers' ``LlamaAttention``, LLMs-from-scratch's ``GroupedQueryAttention``). Made of the course's parts:
    :func:`~attention_lib.split_heads`, the recipe :func:`~attention_lib.calculate_attention` on the folded groups
    (:func:`group_heads`), :func:`~attention_lib.merge_heads`. Without weights (``need_weights=False``) SDPA runs
    the fold (the recipe's fast path), except for a causal pass over its own keys (a prefill without a cache), where
    it gets ``enable_gqa=True`` and ``is_causal`` (torch 2.5+) so that it can skip the future, and a pass with a mask
    (several new tokens over a cache, as in a chunked prefill or speculative decoding's verify call), where it gets
    the mask itself, checked once, instead of the recipe's second round of checks and a folded copy; all keep the
    package's edge rules (a query with a NaN gets NaN, a query with no key gets zeros). A decoding step is the fold,
    the ``G`` queries of a group as rows of one matrix against its keys (on the CPU, with torch 2.13, it measured
    faster than ``enable_gqa`` for one new token over thousands of keys).

    Args:
        embed_dim: ``E``; ``num_heads``: ``H`` query heads, dividing ``E``; ``num_kv_heads``: ``Hkv``, dividing ``H``.
        bias: a bias in the four projections (Llama has none).
        dropout: probability of zeroing an attention weight, in training mode only.
        rotary: a :class:`~attention_lib.RotaryPositions` of size ``Dh``, turning queries and keys before the cache.
        window: a query sees only itself and the ``window - 1`` keys before it; ``None``: every earlier key.
        layer_idx: the layer's index in a model, its slot in a cache (as in transformers).

    Raises:
        TypeError: if a size is not an int, ``dropout`` not a number or ``rotary`` not a RotaryPositions.
        ValueError: if a size is not positive, ``H`` does not divide ``E``, ``Hkv`` does not divide ``H``,
            ``rotary`` is not of size ``Dh`` or ``dropout`` is not in [0, 1).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> gqa = GroupedQueryAttention(embed_dim=16, num_heads=4, num_kv_heads=2)  # 2 query heads per kv head
        >>> out, weights = gqa(torch.randn(3, 5, 16), need_weights=True)  # causal: (N, L, E), (N, H, L, S)
        >>> tuple(gqa.k_proj.weight.shape), tuple(out.shape), tuple(weights.shape)
        ((8, 16), (3, 5, 16), (3, 4, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int, *, bias: bool = False,
                 dropout: float = 0.0, rotary: RotaryPositions | None = None, window: int | None = None,
                 layer_idx: int = 0):
        super().__init__()
        for name, size in (("embed_dim", embed_dim), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
            check_int(size, name, minimum=1)
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim must be divisible by num_heads (each head gets embed_dim // num_heads "
                             f"features), but embed_dim={embed_dim} and num_heads={num_heads}; pick num_heads among "
                             f"{[h for h in range(1, embed_dim + 1) if embed_dim % h == 0]} or change embed_dim.")
        _check_divides(num_heads, num_kv_heads)
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim, self.dropout = embed_dim // num_heads, check_probability(dropout, "dropout")
        self.window = None if window is None else check_int(window, "window", minimum=1)
        self.layer_idx = check_int(layer_idx, "layer_idx", minimum=0)
        self.rotary = check_rotary(rotary, self.head_dim)
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=check_bool(bias, "bias"))
        self.k_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, kv_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def extra_repr(self) -> str:
        window = "" if self.window is None else f", window={self.window}"
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
                f"head_dim={self.head_dim}{window}")

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool | None = None,
                need_weights: bool = False, *, cache: KVCache | None = None,
                offset: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from every token of ``x`` to the tokens before it (and, with a cache, to every cached token).

        Args:
            x: ``(N, L, E)``: the whole text, or with a cache only the new tokens.
            attn_mask: optional ``(L, S)`` or ``(N or 1, H or 1, L, S)`` instead of the causal mask, ``True`` = may
                attend (``S`` counts the cached keys too); or SDPA's ``causal_lower_right(L, S)``.
            is_causal: ``None`` (default): causal unless ``attn_mask`` is given. Causal means aligned to the end
                (:func:`~attention_lib.causal_mask_lower_right`): the queries are the newest ``L`` of ``S``.
            need_weights: also return the weights; ``False`` takes the fast path (SDPA).
            cache: a :class:`~attention_lib.KVCache`: the new keys and values join its slot ``layer_idx`` and the
                queries attend over everything it holds.
            offset: the position of the first token, for ``rotary`` (default: the tokens in the cache, or 0).

        Returns:
            ``(output (N, L, E), weights (N, H, L, S) or None)``.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor of the module's dtype, or a flag is not a bool.
            ValueError: if ``x`` is not ``(N, L, E)``, a mask has the wrong shape or comes with
                ``is_causal=True``, or a window is used with ``is_causal=False`` and no mask.
        """
        check_multihead_inputs(x, x, x, sizes=dict.fromkeys(("query", "key", "value"), self.embed_dim),
                               dtype=self.q_proj.weight.dtype)
        is_causal = attn_mask is None if is_causal is None else check_bool(is_causal, "is_causal")
        check_bool(need_weights, "need_weights")
        if is_causal and attn_mask is not None:
            raise ValueError("pass either attn_mask or is_causal=True, not both; leave is_causal=None to use the "
                             "mask alone, or combine the masks with & (bool masks).")
        if self.window is not None and not is_causal and attn_mask is None:
            raise ValueError(f"a sliding window (window={self.window}) is causal: pass is_causal=True.")
        H, Hkv = self.num_heads, self.num_kv_heads
        # The projections, one slice of features per head: (N, L, E) -> (N, H, L, Dh) and (N, Hkv, L, Dh)
        q = split_heads(self.q_proj(x), H)
        k, v = split_heads(self.k_proj(x), Hkv), split_heads(self.v_proj(x), Hkv)
        if offset is None:
            offset = 0 if cache is None else cache.get_seq_length(self.layer_idx)  # the cached tokens come first
        if self.rotary is not None:  # turn queries and keys by their positions; the cache keeps turned keys
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:  # everything so far: (N, Hkv, S, Dh), the new keys last
            k, v = cache.update(k, v, self.layer_idx)
        N, L, S = x.shape[0], x.shape[1], k.shape[-2]
        attn_mask, from_bias = resolve_causal_bias(attn_mask, L, S, x.device)  # once per call
        is_causal = is_causal or from_bias
        if is_causal and (self.window is not None or L != S):  # the queries are the last L of S: aligned to the end
            attn_mask, is_causal = decoding_mask(L, S, self.window, x.device), False  # (L, S), or None
        if isinstance(attn_mask, torch.Tensor):
            if attn_mask.dim() not in (2, 4):
                raise ValueError(f"attn_mask must be (L, S) or (N or 1, H or 1, L, S), but attn_mask.shape="
                                 f"{tuple(attn_mask.shape)}; use mask.unsqueeze(1) for an (N, L, S) mask and "
                                 f"mask[:, None, None, :] for an (N, S) padding mask (True = real word).")
            check_mask(attn_mask, (N, H, L, S), q)
            if attn_mask.dim() == 4 and attn_mask.shape[1] == H and attn_mask.shape[2] == 1:
                attn_mask = attn_mask.expand(-1, -1, L, -1)  # (N, H, 1, S) -> (N, H, L, S), to fold per head
        dropout_p = self.dropout if self.training else 0.0
        fused = is_causal or isinstance(attn_mask, torch.Tensor)  # a one-token step (no mask at all) is the fold
        if not need_weights and fused and (SDPA_HAS_GQA or H == Hkv):  # SDPA pairs the groups: (N, H, L, Dh)
            heads, weights = _sdpa_fast_path(q, k, v, attn_mask, dropout_p, is_causal, None,
                                             enable_gqa=H != Hkv), None  # and skips the future itself
        else:
            if is_causal and H != Hkv:  # folded rows need the mask itself, tiled: (L, S) -> (G·L, S)
                attn_mask, is_causal = causal_mask(L, S, device=x.device), False
            # Fold each group into its query rows: (N, H, L, Dh) -> (N, Hkv, G·L, Dh), against (N, Hkv, S, Dh)
            heads, weights = calculate_attention(group_heads(q, Hkv), k, v, group_mask(attn_mask, H, Hkv), dropout_p,
                                                 is_causal, need_weights=need_weights)
            # (N, Hkv, G·L, Dh) -> (N, H, L, Dh), (N, Hkv, G·L, S) -> (N, H, L, S)
            heads, weights = ungroup_heads(heads, H), None if weights is None else ungroup_heads(weights, H)
        # Pool the notes, then mix them: (N, H, L, Dh) -> (N, L, E) -> (N, L, E)
        return self.out_proj(merge_heads(heads)), weights
