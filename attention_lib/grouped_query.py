"""Grouped-query attention: query heads in groups, each group sharing one key/value head, by broadcasting.

Built step by step in ``notebooks/15_generation.ipynb``. With ``H`` query heads and ``Hkv`` key/value heads
(``Hkv`` divides ``H``; Ainslie et al., 2023), query head ``h`` reads key/value head ``h // G``, ``G = H / Hkv``:

- ``Hkv = H``: multi-head attention (MHA), every head its own keys;
- ``Hkv = 1``: multi-query attention (MQA, Shazeer 2019), one set of keys for all heads;
- in between: grouped-query attention (GQA: Llama 2-70B, Llama 3, Mistral, Qwen).

The cache then holds ``Hkv`` heads instead of ``H``. No key is copied: the queries get a group dimension
``(N, Hkv, G, L, Dh)`` and the keys and values a dimension of size 1 there, ``(N, Hkv, 1, S, Dh)``, which
broadcasts in the matmul (lessons 07 and 09), the same pairing as ``repeat_interleave(G, dim=1)`` and as SDPA's
``enable_gqa=True``, without the copy in the cache.
"""

from __future__ import annotations

import torch

from .validation import check_int, check_is_tensor


def group_heads(x: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """Put query heads in groups: ``(N, H, L, Dh) -> (N, Hkv, G, L, Dh)``; group ``g`` reads key/value head ``g``.

    Built step by step in ``notebooks/15_generation.ipynb``. Heads ``g·G .. g·G + G - 1`` form group ``g``
    (as in transformers' ``repeat_kv`` and SDPA's ``enable_gqa``). Keys and values ``(N, Hkv, S, Dh)`` join them
    as ``key.unsqueeze(2)``, ``(N, Hkv, 1, S, Dh)``, which broadcasts over the ``G`` heads of a group.

    Args:
        x: ``(N, H, L, Dh)``, the queries after :func:`~attention_lib.split_heads` (or anything per query head,
            such as a mask ``(N, H, L, S)``).
        num_kv_heads: ``Hkv``, which must divide ``H``.

    Returns:
        ``(N, Hkv, H // Hkv, L, Dh)``, a view.

    Raises:
        TypeError: if ``x`` is not a tensor or ``num_kv_heads`` not an int.
        ValueError: if ``x`` is not 4-D or ``num_kv_heads`` does not divide ``H``.

    Example:
        >>> q = torch.arange(4.0).reshape(1, 4, 1, 1)  # 4 query heads, each holding its number
        >>> group_heads(q, 2).flatten(2).tolist()  # 2 groups: heads 0, 1 read kv head 0; heads 2, 3 kv head 1
        [[[0.0, 1.0], [2.0, 3.0]]]
    """
    check_is_tensor(x, "x")
    num_kv_heads = check_int(num_kv_heads, "num_kv_heads", minimum=1, fix="pass Hkv, a divisor of H.")
    if x.dim() != 4:
        raise ValueError(f"group_heads expects x of shape (N, H, L, Dh), but x.shape={tuple(x.shape)}; split the "
                         f"queries into heads first (split_heads).")
    N, H, L, D = x.shape
    if H % num_kv_heads != 0:
        raise ValueError(f"num_kv_heads must divide the number of query heads H, but H={H} and num_kv_heads="
                         f"{num_kv_heads}; pick num_kv_heads among {[h for h in range(1, H + 1) if H % h == 0]}.")
    return x.reshape(N, num_kv_heads, H // num_kv_heads, L, D)  # (N, H, L, Dh) -> (N, Hkv, G, L, Dh)


def ungroup_heads(x: torch.Tensor) -> torch.Tensor:
    """Undo :func:`group_heads`: ``(N, Hkv, G, L, D) -> (N, Hkv·G, L, D)``, the heads back in their order.

    Built step by step in ``notebooks/15_generation.ipynb``.

    Raises:
        TypeError: if ``x`` is not a tensor.
        ValueError: if ``x`` is not 5-D.

    Example:
        >>> x = torch.randn(2, 4, 3, 5)
        >>> torch.equal(ungroup_heads(group_heads(x, 2)), x)
        True
    """
    check_is_tensor(x, "x")
    if x.dim() != 5:
        raise ValueError(f"ungroup_heads expects x of shape (N, Hkv, G, L, D), but x.shape={tuple(x.shape)}; it "
                         f"undoes group_heads, whose output is 5-D.")
    N, Hkv, G, L, D = x.shape
    return x.reshape(N, Hkv * G, L, D)  # (N, Hkv, G, L, D) -> (N, H, L, D)


def group_mask(attn_mask: torch.Tensor | None, num_heads: int, num_kv_heads: int) -> torch.Tensor | None:
    """A mask ``(L, S)`` or ``(N or 1, H or 1, L, S)`` made to broadcast against grouped scores ``(N, Hkv, G, L, S)``.

    Raises:
        ValueError: if a 4-D mask has neither 1 nor ``num_heads`` heads.

    Example:
        >>> group_mask(torch.ones(1, 4, 2, 3, dtype=torch.bool), 4, 2).shape
        torch.Size([1, 2, 2, 2, 3])
        >>> group_mask(torch.ones(2, 1, 2, 3, dtype=torch.bool), 4, 2).shape
        torch.Size([2, 1, 1, 2, 3])
    """
    if not isinstance(attn_mask, torch.Tensor) or attn_mask.dim() == 2:
        return attn_mask  # None, or (L, S): broadcasts as it is
    if attn_mask.shape[1] not in (1, num_heads):
        raise ValueError(f"attn_mask must be (N or 1, H or 1, L, S) with H={num_heads} query heads, but "
                         f"attn_mask.shape={tuple(attn_mask.shape)}; give every query head its row, or use 1 to "
                         f"share it.")
    if attn_mask.shape[1] == 1:
        return attn_mask.unsqueeze(2)  # (N, 1, L, S) -> (N, 1, 1, L, S): the same for every head
    return group_heads(attn_mask, num_kv_heads)  # (N, H, L, S) -> (N, Hkv, G, L, S)
