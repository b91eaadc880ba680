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
from .masks import resolve_causal_bias
from .validation import check_bool, check_int, check_is_tensor, check_multihead_inputs, check_probability


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

    For a model that generates (fewer key/value heads, rotary positions, a window, a cache), see
    :class:`~attention_lib.GroupedQueryAttention` (``notebooks/15_generation.ipynb``).

    Args:
        embed_dim: ``E``, the size of each query vector and of the output.
        num_heads: ``H``; must divide ``embed_dim``. Each head works on ``Dh = E // H`` features.
        bias: add a bias to the four projections.
        dropout: probability of zeroing an attention weight, in training mode only.
        kdim, vdim: the sizes of the key and value inputs (default ``embed_dim``).

    Raises:
        TypeError: if a size is not an int or ``dropout`` is not a number.
        ValueError: if a size is not positive, ``embed_dim % num_heads != 0`` or ``dropout`` is not in [0, 1).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2)
        >>> x, memory = torch.randn(3, 5, 8), torch.randn(3, 7, 8)  # (N, L, E), (N, S, E)
        >>> out, weights = mha(x, memory, memory)
        >>> tuple(out.shape), tuple(weights.shape)  # (N, L, E), (N, H, L, S)
        ((3, 5, 8), (3, 2, 5, 7))
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dropout: float = 0.0, *,
                 kdim: int | None = None, vdim: int | None = None):
        super().__init__()
        kdim, vdim = embed_dim if kdim is None else kdim, embed_dim if vdim is None else vdim
        for name, size in (("embed_dim", embed_dim), ("num_heads", num_heads), ("kdim", kdim), ("vdim", vdim)):
            check_int(size, name, minimum=1)
        if embed_dim % num_heads != 0:
            divisors = [h for h in range(1, embed_dim + 1) if embed_dim % h == 0]
            raise ValueError(f"embed_dim must be divisible by num_heads (each head gets embed_dim // num_heads "
                             f"features), but embed_dim={embed_dim} and num_heads={num_heads}; pick num_heads "
                             f"among {divisors} or change embed_dim.")
        dropout = check_probability(dropout, "dropout")
        check_bool(bias, "bias")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim, self.vdim, self.dropout = kdim, vdim, dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, head_dim={self.head_dim}"

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                need_weights: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` with every head at once.

        Args:
            query: ``(N, L, E)``.
            key: ``(N, S, kdim)``.
            value: ``(N, S, vdim)``.
            attn_mask: optional ``(L, S)`` or ``(N or 1, H or 1, L, S)``. Bool: ``True`` = may attend
                (the opposite of ``nn.MultiheadAttention``). Float: added to the scores. For key padding
                pass ``(N, 1, 1, S)``, ``True`` on real words.
            is_causal: query ``i`` may attend to keys ``0..i`` only (top-left, as SDPA's); cannot be combined with
                ``attn_mask``.
            need_weights: if ``False``, return ``(output, None)`` through the fast path (SDPA).

        Returns:
            ``(output, weights)``: output ``(N, L, E)``; weights ``(N, H, L, S)``, one map per head (after
            dropout), or ``None`` when ``need_weights=False``.

        Raises:
            TypeError: if an input is not a tensor or its dtype differs from the module's.
            ValueError: if an input is not 3-D, sizes do not match the module, ``N``/``S`` disagree, or the
                mask has the wrong shape.
        """
        check_multihead_inputs(query, key, value, sizes={"query": self.embed_dim, "key": self.kdim,
                               "value": self.vdim}, dtype=self.q_proj.weight.dtype)
        check_bool(need_weights, "need_weights")
        if not is_causal:  # SDPA's CausalBias objects, read once here: what they stand for
            attn_mask, is_causal = resolve_causal_bias(attn_mask, query.size(1), key.size(1), query.device)
        if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() not in (2, 4):
            raise ValueError(f"attn_mask must be (L, S) or (N or 1, H or 1, L, S), but "
                             f"attn_mask.shape={tuple(attn_mask.shape)}; use mask.unsqueeze(1) for an (N, L, S) "
                             f"mask and mask[:, None, None, :] for an (N, S) padding mask (True = real word).")
        # The projections: each detective's questions, offers and notes, (N, L, E), (N, S, E), (N, S, E)
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        # One slice of features per head: (N, L, E) -> (N, H, L, Dh), (N, S, E) -> (N, H, S, Dh)
        q, k, v = split_heads(q, self.num_heads), split_heads(k, self.num_heads), split_heads(v, self.num_heads)
        dropout_p = self.dropout if self.training else 0.0
        # Every head at once, heads as a batch dimension: (N, H, L, Dh), (N, H, L, S)
        heads, weights = calculate_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                             is_causal=is_causal, need_weights=need_weights)
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

