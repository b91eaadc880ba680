"""Attention over a paged cache, read block by block through the block tables (see :mod:`attention_lib.paged`)."""

from __future__ import annotations

import math

import torch

from ..grouped_query import group_heads, ungroup_heads
from ..memory_efficient import online_softmax_update
from ..validation import check_is_tensor
from .cache import PagedCache


def paged_attention(query: torch.Tensor, cache: PagedCache, layer_idx: int, *, scale: float | None = None
                    ) -> torch.Tensor:
    """Attention of the newest ``L`` queries over a paged cache, read block by block through the block tables.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. For block ``j`` of every table the keys and
    values are read from the pool and folded into the running max, sum and output with
    :func:`~attention_lib.online_softmax_update` (lesson 10): no ``(N, H, S, Dh)`` copy of the keys is made. The
    queries are the last ``L`` of ``S`` positions, causal aligned to the end; with ``Hkv < H`` they read their
    group's key/value head (:func:`~attention_lib.group_heads`).

    Args:
        query: ``(N, H, L, Dh)``, rotated already (as the keys in the cache are), ``H`` a multiple of ``Hkv``.
        cache: the :class:`PagedCache` holding ``S >= L`` positions of layer ``layer_idx``, the queries' own last.
        scale: the scores' factor (default ``1 / sqrt(Dh)``).

    Returns:
        ``(N, H, L, Dv)``, the same as SDPA on the gathered keys and values with the causal mask aligned to the end.

    Raises:
        TypeError: if ``query`` is not a floating-point tensor of the cache's dtype.
        ValueError: if its shape does not fit the cache, or a block in a table was freed.

    Example:
        >>> from attention_lib.paged import BlockPool, PagedCache
        >>> cache = PagedCache(BlockPool(num_positions=64, block_size=4), num_layers=1)
        >>> k, v = torch.randn(1, 1, 7, 8), torch.randn(1, 1, 7, 8)
        >>> keys, values = cache.update(k, v, layer_idx=0)
        >>> q = torch.randn(1, 2, 1, 8)  # 2 query heads, one key/value head
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        >>> torch.allclose(paged_attention(q, cache, 0), ref, atol=1e-6)
        True
    """
    check_is_tensor(query, "query")
    cache._alive("read the cache")
    S = cache.get_seq_length(layer_idx)
    if cache.tables is None or layer_idx not in cache.pool.keys or S == 0:
        raise ValueError(f"layer {layer_idx} of this cache holds no keys yet: update it first.")
    store_k, store_v = cache.pool.keys[layer_idx], cache.pool.values[layer_idx]
    if query.dtype != store_k.dtype:
        raise TypeError(f"query and its cache must share one dtype, but query.dtype={query.dtype} and the cache "
                        f"holds {store_k.dtype}; convert the query with .to({store_k.dtype}), or fill the cache in "
                        f"{query.dtype}.")
    N, Hkv, B, Dh = len(cache.tables), store_k.shape[2], cache.pool.block_size, store_k.shape[-1]
    if query.dim() != 4 or query.shape[0] != N or query.shape[1] % Hkv or query.shape[-1] != Dh \
            or not 1 <= query.shape[2] <= S:
        raise ValueError(f"query must be (N, H, L, Dh) = ({N}, a multiple of Hkv={Hkv}, L <= S={S}, {Dh}) for this "
                         f"cache, but query.shape={tuple(query.shape)}.")
    for t in cache.tables:
        cache.pool.check_live(t)
    L, table = query.shape[2], torch.tensor(cache.tables, dtype=torch.long, device=query.device)  # (N, blocks)
    scale = 1.0 / math.sqrt(Dh) if scale is None else scale
    q = group_heads(query, Hkv) * scale  # (N, H, L, Dh) -> (N, Hkv, G·L, Dh): each group's queries as rows
    H = query.shape[1]
    # (G·L, 1): each row's position, the L newest positions once per query head of the group
    newest = torch.arange(S - L, S, device=query.device).repeat(H // Hkv)[:, None]
    rows = q.shape[2]
    state = (q.new_full((N, Hkv, rows, 1), float("-inf")), q.new_zeros(N, Hkv, rows, 1),
             q.new_zeros(N, Hkv, rows, store_v.shape[-1]))
    for j in range(-(-S // B)):  # block j of every table: positions j·B .. j·B + B - 1
        k = store_k[table[:, j]].transpose(1, 2)  # (N, B, Hkv, Dh) -> (N, Hkv, B, Dh)
        v = store_v[table[:, j]].transpose(1, 2)  # (N, B, Hkv, Dv) -> (N, Hkv, B, Dv)
        scores = q @ k.transpose(-2, -1)  # (N, Hkv, G·L, Dh) @ (N, Hkv, Dh, B) -> (N, Hkv, G·L, B)
        seen = j * B + torch.arange(B, device=query.device) <= newest  # (G·L, B): causal, and nothing past S
        state = online_softmax_update(*state, scores.masked_fill(~seen, float("-inf")), v)
    return ungroup_heads(state[2] / state[1], H)  # (N, Hkv, G·L, Dv) -> (N, H, L, Dv)
