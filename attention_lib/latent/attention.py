"""The latent cache and the multi-head latent attention layer, expanded and absorbed (see
:mod:`attention_lib.latent`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..attention import calculate_attention
from ..cache import KVCache
from ..llama import RMSNorm
from ..masks import decoding_mask
from ..multihead import merge_heads
from ..positions import RotaryPositions
from ..validation import check_bool, check_int, check_is_tensor


class LatentCache(KVCache):
    """A cache of latents: per layer each token's latent ``(r)`` and rotary key ``(Dr)``, side by side.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. A :class:`~attention_lib.KVCache` whose "key" is
    each token's latent and rotary key side by side, ``r + Dr`` numbers in one row (as vLLM's MLA cache holds them,
    576 for DeepSeek-V3; transformers' DeepSeek-V3 caches the same two tensors), and whose "value" is empty:
    ``update(latent, rope_key, layer_idx)`` writes both in one copy and returns every latent and rotary key so far,
    two views of those rows (so the absorbed form reads ``[c, k_rope]`` in place, :func:`side_by_side`).

    Example:
        >>> cache = LatentCache(num_layers=1, max_cache_len=8)
        >>> c, k_rope = cache.update(torch.ones(1, 1, 3, 16), torch.ones(1, 1, 3, 8), layer_idx=0)
        >>> tuple(c.shape), tuple(k_rope.shape), cache.numbers_per_token()  # r + Dr per token per layer
        ((1, 1, 3, 16), (1, 1, 3, 8), 24)
    """

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' latents ``key (N, 1, L, r)`` and rotary keys ``value (N, 1, L, Dr)``; return those
        of every token so far, ``(N, 1, S, r)`` and ``(N, 1, S, Dr)``, views of the rows that hold them.

        Raises:
            TypeError, ValueError: as :meth:`KVCache.update <attention_lib.KVCache.update>`, and if the latents and
                rotary keys differ in ``N``, heads or ``L``.
        """
        check_is_tensor(key, "key (the latents)")
        check_is_tensor(value, "value (the rotary keys)")
        if key.dim() != 4 or value.dim() != 4 or key.shape[:3] != value.shape[:3]:
            raise ValueError(f"the latents and rotary keys must be (N, 1, L, r) and (N, 1, L, Dr) with the same N "
                             f"and L, but key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}.")
        rows, _ = super().update(torch.cat([key, value], dim=-1), value[..., :0], layer_idx)  # (N, 1, S, r + Dr)
        return rows[..., :key.shape[-1]], rows[..., key.shape[-1]:]

    def numbers_per_token(self) -> int:
        """Numbers held per token in each layer: ``r + Dr`` (0 before the first update)."""
        k = self.keys[0]
        return 0 if k is None else k.shape[1] * k.shape[-1]


class MultiHeadLatentAttention(nn.Module):
    """Causal multi-head latent attention with a decoupled rotary key, expanded or absorbed (module docstring).

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``.

    Args:
        embed_dim: ``E``, the size of each token's vector.
        num_heads: ``H``.
        kv_rank: ``r``, the size of the cached latent (transformers' ``kv_lora_rank``).
        rope_dim: ``Dr``, the decoupled rotary part of each query and of the shared key (``qk_rope_head_dim``).
        nope_dim: ``Dn``, the position-free part of each head's query and key (``qk_nope_head_dim``).
        v_dim: ``Dv``, each head's value (``v_head_dim``).
        rope_base: RoPE's base (``rope_theta``); eps: the latent's RMSNorm epsilon.
        absorbed: compute attention over the latents (``True``) or rebuild keys and values (``False``).
        layer_idx: which slot of a cache this layer uses.

    Raises:
        TypeError, ValueError: for sizes that are not positive ints (``rope_dim`` even) or a non-bool ``absorbed``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mla = MultiHeadLatentAttention(64, 4, kv_rank=16, rope_dim=8, nope_dim=16, v_dim=16).double()
        >>> x = torch.randn(2, 5, 64, dtype=torch.float64)  # (N, L, E)
        >>> expanded = mla(x)
        >>> mla.absorbed = True
        >>> torch.allclose(mla(x), expanded, atol=1e-12), tuple(expanded.shape)  # (N, L, E)
        (True, (2, 5, 64))
    """

    def __init__(self, embed_dim: int, num_heads: int, *, kv_rank: int, rope_dim: int, nope_dim: int, v_dim: int,
                 rope_base: float = 10000.0, eps: float = 1e-6, absorbed: bool = False, layer_idx: int = 0):
        super().__init__()
        for name, size in (("embed_dim", embed_dim), ("num_heads", num_heads), ("kv_rank", kv_rank),
                           ("rope_dim", rope_dim), ("nope_dim", nope_dim), ("v_dim", v_dim)):
            check_int(size, name, minimum=1, fix="DeepSeek-V3 uses r=512, Dr=64, Dn=128, Dv=128.")
        self.num_heads, self.kv_rank, self.rope_dim, self.nope_dim, self.v_dim = (num_heads, kv_rank, rope_dim,
                                                                                  nope_dim, v_dim)
        self.absorbed, self.layer_idx = check_bool(absorbed, "absorbed"), check_int(layer_idx, "layer_idx", minimum=0)
        self.scale = 1.0 / math.sqrt(nope_dim + rope_dim)  # a score is over Dn + Dr features
        self.q_proj = nn.Linear(embed_dim, num_heads * (nope_dim + rope_dim), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(embed_dim, kv_rank + rope_dim, bias=False)  # down: the latent and k_rope
        self.kv_a_layernorm = RMSNorm(kv_rank, eps)
        self.kv_b_proj = nn.Linear(kv_rank, num_heads * (nope_dim + v_dim), bias=False)  # up: W_uk and W_uv
        self.o_proj = nn.Linear(num_heads * v_dim, embed_dim, bias=False)
        self.rotary = RotaryPositions(rope_dim, rope_base)

    def up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``W_uk (H, Dn, r)`` and ``W_uv (H, Dv, r)``: views of ``kv_b_proj.weight``, one pair per head."""
        w = self.kv_b_proj.weight.view(self.num_heads, self.nope_dim + self.v_dim, self.kv_rank)  # (H, Dn + Dv, r)
        return w[:, :self.nope_dim], w[:, self.nope_dim:]

    def compress(self, x: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """What the cache keeps of ``x (N, L, E)``: the latents ``(N, 1, L, r)`` and rotary keys ``(N, 1, L, Dr)``."""
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.kv_rank, self.rope_dim], dim=-1)
        latent = self.kv_a_layernorm(latent)[:, None]  # (N, L, r) -> (N, 1, L, r): one "head", shared
        return latent, self.rotary(k_rope[:, None], offset)  # only the rotary key is turned, never the latent

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, offset: int | None = None) -> torch.Tensor:
        """Causal attention of ``x (N, L, E)`` over itself and, with a cache, every earlier token -> ``(N, L, E)``.

        Args:
            x: the new tokens' vectors.
            cache: a :class:`LatentCache` (or any cache with ``update`` and ``get_seq_length``), updated in place.
            offset: the position of the first new token (default: the tokens in the cache).
        """
        N, L, _ = x.shape
        if offset is None:
            offset = 0 if cache is None else cache.get_seq_length(self.layer_idx)
        q = self.q_proj(x).view(N, L, self.num_heads, -1).transpose(1, 2)  # (N, H, L, Dn + Dr)
        q_nope, q_rope = q.split([self.nope_dim, self.rope_dim], dim=-1)
        q_rope = self.rotary(q_rope, offset)
        latent, k_rope = self.compress(x, offset)  # (N, 1, L, r), (N, 1, L, Dr)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope, self.layer_idx)  # (N, 1, S, r), (N, 1, S, Dr)
        mask = decoding_mask(L, latent.shape[2], device=x.device)  # (L, S) aligned to the end, or None
        attend = self._absorbed if self.absorbed else self._expanded
        heads = attend(q_nope, q_rope, latent, k_rope, mask)  # (N, H, L, Dv)
        return self.o_proj(merge_heads(heads))  # (N, H, L, Dv) -> (N, L, H·Dv) -> (N, L, E)

    def _expanded(self, q_nope, q_rope, latent, k_rope, mask):
        N, _, S, _ = latent.shape
        kv = self.kv_b_proj(latent).view(N, S, self.num_heads, -1).transpose(1, 2)  # (N, 1, S, r) -> (N, H, S, Dn+Dv)
        k_nope, v = kv.split([self.nope_dim, self.v_dim], dim=-1)  # every head's keys, rebuilt from all S latents
        k = torch.cat([k_nope, k_rope.expand(-1, self.num_heads, -1, -1)], dim=-1)  # (N, H, S, Dn + Dr)
        q = torch.cat([q_nope, q_rope], dim=-1)  # (N, H, L, Dn + Dr)
        return calculate_attention(q, k, v, attn_mask=mask, scale=self.scale, need_weights=False)[0]

    def _absorbed(self, q_nope, q_rope, latent, k_rope, mask):
        w_uk, w_uv = self.up_projections()  # (H, Dn, r), (H, Dv, r)
        q_latent = q_nope @ w_uk  # (N, H, L, Dn) @ (H, Dn, r) -> (N, H, L, r): W_uk folded into the query
        q = torch.cat([q_latent, q_rope], dim=-1)  # (N, H, L, r + Dr)
        k = side_by_side(latent, k_rope)  # (N, 1, S, r + Dr): one key shared by every head (MQA)
        N, H, L, _ = q.shape  # every head's queries become rows of one head, as MQA reads its one key: one matmul
        rows = q.reshape(N, 1, H * L, -1)  # (N, H, L, r + Dr) -> (N, 1, H·L, r + Dr), row h·L + l
        mask = None if mask is None else mask.repeat(H, 1)  # (L, S) -> (H·L, S), the same rows
        # The value is the latent c, the first r features of the key itself: blend the whole key, keep those r
        # (one key and value of one size, which SDPA's fused CPU kernel needs; the Dr more are dropped)
        mixed = calculate_attention(rows, k, k, attn_mask=mask, scale=self.scale, need_weights=False)[0]
        mixed = mixed[..., :self.kv_rank].reshape(N, H, L, self.kv_rank)  # (N, 1, H·L, r) -> (N, H, L, r)
        return mixed @ w_uv.transpose(-2, -1)  # (N, H, L, r) @ (H, r, Dv) -> (N, H, L, Dv): W_uv folded in after


def side_by_side(latent: torch.Tensor, k_rope: torch.Tensor) -> torch.Tensor:
    """``[latent, k_rope]`` along the features, ``(N, 1, S, r + Dr)``: the absorbed form's shared key.

    A view, with nothing copied, when the two are neighbouring columns of one buffer (as a :class:`LatentCache`
    holds them); otherwise ``torch.cat``, a copy of every cached token at every step.

    Example:
        >>> both = torch.arange(12.0).view(1, 1, 3, 4)  # 3 tokens, r = 3 and Dr = 1 side by side
        >>> latent, k_rope = both.split([3, 1], dim=-1)
        >>> side_by_side(latent, k_rope).data_ptr() == both.data_ptr(), torch.equal(side_by_side(latent, k_rope), both)
        (True, True)
    """
    r = latent.shape[-1]
    if (latent.shape[:-1] == k_rope.shape[:-1] and latent.stride() == k_rope.stride() and latent.stride(-1) == 1
            and latent.untyped_storage().data_ptr() == k_rope.untyped_storage().data_ptr()
            and k_rope.storage_offset() == latent.storage_offset() + r and latent.dtype == k_rope.dtype):
        return latent.as_strided((*latent.shape[:-1], r + k_rope.shape[-1]), latent.stride(), latent.storage_offset())
    return torch.cat([latent, k_rope], dim=-1)
