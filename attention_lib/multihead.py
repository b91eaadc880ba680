"""Multi-head attention: a team of detectives, each with its own projections, attending in parallel.

Shape legend (batch first, as everywhere in the package): ``N`` sentences, ``L`` queries, ``S`` keys and
values, ``E`` the embedding size, ``H`` heads of size ``Dh = E // H``.

Mask convention: a **bool** ``attn_mask`` holds ``True`` where a query **may attend** to a key (as in
``torch.nn.functional.scaled_dot_product_attention``); a **float** mask is added to the scores.
``torch.nn.MultiheadAttention``'s bool ``attn_mask`` and ``key_padding_mask`` mean the opposite
(``True`` = blocked): pass ``~mask`` here, and ``(~key_padding_mask)[:, None, None, :]`` for padding.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import calculate_attention
from .cache import KVCache, decoding_mask
from .grouped_query import group_heads, group_mask, ungroup_heads
from .masks import resolve_causal_bias
from .positions import RotaryPositions
from .validation import check_bool, check_int, check_is_tensor, check_multihead_inputs, check_probability, check_rotary


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the features of every word into ``num_heads`` heads: ``(N, L, E) -> (N, H, L, Dh)``.

    Built step by step in ``notebooks/09_detective_team.ipynb``. Head ``h`` gets features
    ``h * Dh`` to ``(h + 1) * Dh - 1`` of every word.

    Args:
        x: ``(N, L, E)``, projected queries, keys or values.
        num_heads: ``H``, which must divide ``E``.

    Returns:
        ``(N, H, L, Dh)`` with ``Dh = E // H``: one ``(L, Dh)`` matrix per sentence and head.

    Raises:
        TypeError: if ``x`` is not a tensor or ``num_heads`` is not an int.
        ValueError: if ``x`` is not 3-D, or ``num_heads`` is not a positive divisor of ``E``.

    Example:
        >>> x = torch.arange(8.0).reshape(1, 2, 4)  # 2 words, 4 features
        >>> split_heads(x, 2)[0, 1]  # head 1: the last 2 features of each word
        tensor([[2., 3.],
                [6., 7.]])
    """
    check_is_tensor(x, "x")
    num_heads = check_int(num_heads, "num_heads", minimum=1, fix="pass the number of heads H, a divisor of E.")
    if x.dim() != 3:
        raise ValueError(f"split_heads expects x of shape (N, L, E), but x.shape={tuple(x.shape)}; for one "
                         f"sentence use x.unsqueeze(0).")
    N, L, E = x.shape
    if E % num_heads != 0:
        raise ValueError(f"num_heads must divide the embedding size E, but E={E} and num_heads={num_heads}; "
                         f"pick num_heads among {[h for h in range(1, E + 1) if E % h == 0]}.")
    # (N, L, E) -> (N, L, H, Dh) -> (N, H, L, Dh)
    return x.reshape(N, L, num_heads, E // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads back into one vector per word: ``(N, H, L, Dh) -> (N, L, E)`` with ``E = H * Dh``.

    Built step by step in ``notebooks/09_detective_team.ipynb``; the inverse of :func:`split_heads`.

    Args:
        x: ``(N, H, L, Dh)``, the output of each head.

    Returns:
        ``(N, L, H * Dh)``: each word's head outputs side by side, head 0 first.

    Raises:
        TypeError: if ``x`` is not a tensor.
        ValueError: if ``x`` is not 4-D.

    Example:
        >>> x = torch.arange(8.0).reshape(1, 2, 2, 2)  # 2 heads, 2 words, Dh = 2
        >>> merge_heads(x)
        tensor([[[0., 1., 4., 5.],
                 [2., 3., 6., 7.]]])
        >>> torch.equal(split_heads(merge_heads(x), 2), x)
        True
    """
    check_is_tensor(x, "x")
    if x.dim() != 4:
        raise ValueError(f"merge_heads expects x of shape (N, H, L, Dh), but x.shape={tuple(x.shape)}; it "
                         f"undoes split_heads, whose output is 4-D.")
    N, H, L, Dh = x.shape
    # (N, H, L, Dh) -> (N, L, H, Dh) -> (N, L, H * Dh)
    return x.transpose(1, 2).reshape(N, L, H * Dh)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first: project, split into heads, attend, merge, project again.

    Built step by step in ``notebooks/09_detective_team.ipynb``. Computes the same function as
    ``torch.nn.MultiheadAttention(embed_dim, num_heads, bias=bias, dropout=dropout, kdim=kdim, vdim=vdim,
    batch_first=True)`` (see :meth:`from_torch`), with separate ``q_proj``, ``k_proj``, ``v_proj`` and
    ``out_proj`` layers and the mask convention of :func:`calculate_attention` (bool ``True`` = may attend).

    For a model that generates (``notebooks/15_generation.ipynb``): ``num_kv_heads`` (grouped-query attention,
    :mod:`attention_lib.grouped_query`), ``rotary`` positions, a sliding ``window`` and ``forward(..., cache=...)``.

    Args:
        embed_dim: ``E``, the size of each query vector and of the output.
        num_heads: ``H``; must divide ``embed_dim``. Each head works on ``Dh = E // H`` features.
        bias: add a bias to the four projections.
        dropout: probability of zeroing an attention weight, in training mode only.
        kdim, vdim: the sizes of the key and value inputs (default ``embed_dim``).
        num_kv_heads: ``Hkv``, the key/value heads (default ``H``: MHA; ``1``: MQA; in between: GQA); must
            divide ``H``. ``k_proj`` and ``v_proj`` then make ``Hkv · Dh`` features.
        window: with ``is_causal=True``, a query sees only itself and the ``window - 1`` keys before it
            (:func:`~attention_lib.masks.sliding_window_mask`); ``None``: every earlier key.
        rotary: a :class:`~attention_lib.RotaryPositions` of size ``Dh``, turning queries and keys before the cache.
        layer_idx: the layer's index in a model, its slot in a cache (as in transformers).

    Raises:
        TypeError: if a size is not an int, ``dropout`` is not a number or ``rotary`` is not a RotaryPositions.
        ValueError: if a size is not positive, ``embed_dim % num_heads != 0``, ``num_heads % num_kv_heads != 0``,
            ``rotary`` is not of size ``Dh`` or ``dropout`` is not in [0, 1).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2)
        >>> x, memory = torch.randn(3, 5, 8), torch.randn(3, 7, 8)  # (N, L, E), (N, S, E)
        >>> out, weights = mha(x, memory, memory)
        >>> tuple(out.shape), tuple(weights.shape)  # (N, L, E), (N, H, L, S)
        ((3, 5, 8), (3, 2, 5, 7))
        >>> gqa = MultiHeadAttention(embed_dim=8, num_heads=4, num_kv_heads=2)  # 2 query heads per kv head
        >>> tuple(gqa.k_proj.weight.shape), tuple(gqa(x, x, x, is_causal=True)[1].shape)
        ((4, 8), (3, 4, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dropout: float = 0.0, *,
                 kdim: int | None = None, vdim: int | None = None, num_kv_heads: int | None = None,
                 window: int | None = None, rotary: RotaryPositions | None = None, layer_idx: int = 0):
        super().__init__()
        kdim, vdim = embed_dim if kdim is None else kdim, embed_dim if vdim is None else vdim
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        for name, size in (("embed_dim", embed_dim), ("num_heads", num_heads), ("kdim", kdim), ("vdim", vdim),
                           ("num_kv_heads", num_kv_heads)):
            check_int(size, name, minimum=1)
        if embed_dim % num_heads != 0:
            divisors = [h for h in range(1, embed_dim + 1) if embed_dim % h == 0]
            raise ValueError(f"embed_dim must be divisible by num_heads (each head gets embed_dim // num_heads "
                             f"features), but embed_dim={embed_dim} and num_heads={num_heads}; pick num_heads "
                             f"among {divisors} or change embed_dim.")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads must be divisible by num_kv_heads (each key/value head serves a group of "
                             f"num_heads // num_kv_heads query heads), but num_heads={num_heads} and num_kv_heads="
                             f"{num_kv_heads}; pick num_kv_heads among "
                             f"{[h for h in range(1, num_heads + 1) if num_heads % h == 0]}.")
        dropout = check_probability(dropout, "dropout")
        check_bool(bias, "bias")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim, self.vdim, self.dropout, self.num_kv_heads = kdim, vdim, dropout, num_kv_heads
        self.window = None if window is None else check_int(window, "window", minimum=1)
        self.layer_idx = check_int(layer_idx, "layer_idx", minimum=0)
        self.rotary = check_rotary(rotary, self.head_dim)
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim, kv_dim, bias=bias)
        self.v_proj = nn.Linear(vdim, kv_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def extra_repr(self) -> str:
        kv = "" if self.num_kv_heads == self.num_heads else f", num_kv_heads={self.num_kv_heads}"
        window = "" if self.window is None else f", window={self.window}"
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, head_dim={self.head_dim}{kv}{window}"

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                need_weights: bool = True, *, cache: KVCache | None = None,
                offset: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` with every head at once.

        Args:
            query: ``(N, L, E)``.
            key: ``(N, S, kdim)``.
            value: ``(N, S, vdim)``.
            attn_mask: optional ``(L, S)`` or ``(N or 1, H or 1, L, S)``. Bool: ``True`` = may attend
                (the opposite of ``nn.MultiheadAttention``). Float: added to the scores. For key padding
                pass ``(N, 1, 1, S)``, ``True`` on real words. With a cache, ``S`` counts the cached keys too.
            is_causal: query ``i`` may attend to keys ``0..i`` only; cannot be combined with ``attn_mask``.
                With a cache or a window, the queries are the newest ``L`` of ``S`` positions and the mask is
                aligned to the end (:func:`~attention_lib.masks.causal_mask_lower_right`), not top-left as
                SDPA's ``is_causal``.
            need_weights: if ``False``, return ``(output, None)`` through the fast path (SDPA).
            cache: a :class:`~attention_lib.KVCache`: the new keys and values are appended to its slot
                ``layer_idx``, and the queries attend over everything it holds.
            offset: the position of the first query, for ``rotary`` (default: the tokens in the cache, or 0).

        Returns:
            ``(output, weights)``: output ``(N, L, E)``; weights ``(N, H, L, S)``, one map per head (after
            dropout), or ``None`` when ``need_weights=False``.

        Raises:
            TypeError: if an input is not a tensor or its dtype differs from the module's.
            ValueError: if an input is not 3-D, sizes do not match the module, ``N``/``S`` disagree, the
                mask has the wrong shape, or a window is used without ``is_causal``.
        """
        check_multihead_inputs(query, key, value, sizes={"query": self.embed_dim, "key": self.kdim,
                               "value": self.vdim}, dtype=self.q_proj.weight.dtype)
        check_bool(need_weights, "need_weights")
        if not is_causal:  # SDPA's CausalBias objects: what they stand for (calculate_attention rejects both)
            attn_mask, is_causal = resolve_causal_bias(attn_mask, query.size(1), key.size(1), query.device)
        if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() not in (2, 4):
            raise ValueError(f"attn_mask must be (L, S) or (N or 1, H or 1, L, S), but "
                             f"attn_mask.shape={tuple(attn_mask.shape)}; use mask.unsqueeze(1) for an (N, L, S) "
                             f"mask and mask[:, None, None, :] for an (N, S) padding mask (True = real word).")
        if self.window is not None and not is_causal and attn_mask is None:
            raise ValueError(f"a sliding window (window={self.window}) is causal: pass is_causal=True.")
        # The projections: each detective's questions, offers and notes, (N, L, E), (N, S, Hkv·Dh), (N, S, Hkv·Dh)
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        # One slice of features per head: (N, L, E) -> (N, H, L, Dh), (N, S, Hkv·Dh) -> (N, Hkv, S, Dh)
        q, k, v = split_heads(q, self.num_heads), split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)
        if offset is None:
            offset = 0 if cache is None else cache.get_seq_length(self.layer_idx)  # the cached tokens come first
        if self.rotary is not None:  # turn queries and keys by their positions; the cache keeps turned keys
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:  # everything so far: (N, Hkv, S, Dh), the new keys last
            k, v = cache.update(k, v, self.layer_idx)
        if is_causal and (cache is not None or self.window is not None):  # the queries are the last L of S
            attn_mask, is_causal = decoding_mask(q.size(-2), k.size(-2), self.window, q.device), False  # (L, S)
        if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() == 2:
            attn_mask = attn_mask[None, None]  # (L, S) -> (1, 1, L, S), shared by sentences and heads
        grouped = self.num_kv_heads != self.num_heads
        if grouped:  # (N, H, L, Dh) -> (N, Hkv, G, L, Dh); keys (N, Hkv, S, Dh) -> (N, Hkv, 1, S, Dh) broadcast
            q, k, v = group_heads(q, self.num_kv_heads), k.unsqueeze(2), v.unsqueeze(2)
            attn_mask = group_mask(attn_mask, self.num_heads, self.num_kv_heads)
        dropout_p = self.dropout if self.training else 0.0
        # Every head at once, heads as a batch dimension: (N, H, L, Dh), (N, H, L, S) (grouped: (N, Hkv, G, ...))
        heads, weights = calculate_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                             is_causal=is_causal, need_weights=need_weights)
        if grouped:  # (N, Hkv, G, L, Dh) -> (N, H, L, Dh), (N, Hkv, G, L, S) -> (N, H, L, S)
            heads, weights = ungroup_heads(heads), None if weights is None else ungroup_heads(weights)
        # Pool the notes, then mix them: (N, H, L, Dh) -> (N, L, E) -> (N, L, E)
        return self.out_proj(merge_heads(heads)), weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a batch-first ``torch.nn.MultiheadAttention`` into a new module.

        Built step by step in ``notebooks/09_detective_team.ipynb``. The copy computes the same outputs
        and per-head weights (``average_attn_weights=False``); remember that its bool masks mean
        ``True`` = may attend, so pass ``~mask`` where torch gets ``mask``.

        Args:
            module: a ``torch.nn.MultiheadAttention`` built with ``batch_first=True``, with or without
                bias, with or without ``kdim``/``vdim``.

        Returns:
            A :class:`MultiHeadAttention` with copied weights, on the module's device and dtype, in the
            module's training mode.

        Raises:
            TypeError: if ``module`` is not a ``torch.nn.MultiheadAttention``.
            ValueError: if it is not batch first, or uses ``add_bias_kv`` or ``add_zero_attn``.

        Example:
            >>> _ = torch.manual_seed(0)
            >>> theirs = nn.MultiheadAttention(8, 2, batch_first=True)
            >>> ours = MultiHeadAttention.from_torch(theirs)
            >>> x = torch.randn(2, 3, 8)
            >>> torch.allclose(ours(x, x, x)[0], theirs(x, x, x)[0], atol=1e-6)
            True
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"from_torch copies a torch.nn.MultiheadAttention, but got {type(module).__name__}.")
        if not module.batch_first:
            raise ValueError("from_torch needs a module built with batch_first=True, but module.batch_first is "
                             "False; our module is batch first, (N, L, E): rebuild it with batch_first=True (the "
                             "weights do not depend on the layout, so setting module.batch_first = True works).")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("from_torch cannot copy a module built with add_bias_kv=True or add_zero_attn=True: "
                             "they add an extra key position that MultiHeadAttention does not have.")
        E = module.embed_dim
        weight = module.out_proj.weight
        ours = cls(E, module.num_heads, bias=module.in_proj_bias is not None, dropout=module.dropout,
                   kdim=module.kdim, vdim=module.vdim).to(device=weight.device, dtype=weight.dtype)
        if module.in_proj_weight is not None:
            # in_proj_weight stacks the three projections: (3E, E) -> three (E, E)
            w_q, w_k, w_v = module.in_proj_weight.chunk(3, dim=0)
        else:
            w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
        with torch.no_grad():
            for layer, w in ((ours.q_proj, w_q), (ours.k_proj, w_k), (ours.v_proj, w_v)):
                layer.weight.copy_(w)
            ours.out_proj.weight.copy_(weight)
            if module.in_proj_bias is not None:
                for layer, b in zip((ours.q_proj, ours.k_proj, ours.v_proj), module.in_proj_bias.chunk(3),
                                    strict=True):
                    layer.bias.copy_(b)  # (3E,) -> three (E,)
                ours.out_proj.bias.copy_(module.out_proj.bias)
        return ours.train(module.training)

