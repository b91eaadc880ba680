"""Multi-head latent attention (MLA, DeepSeek-V2 2024, V3): cache one small latent per token, not every head's keys.

Built step by step in ``notebooks/17_latent_and_paged.ipynb``. Lesson 15 shrank the cache by sharing keys (GQA,
MQA). MLA compresses instead: each token's input ``x (E)`` is projected down to a **latent** ``c (r)`` (normed),
and every head's key (its position-free part, ``Dn``) and value (``Dv``) are projections *up* from it,
``W_uk c`` and ``W_uv c``. RoPE cannot pass through that projection, so a small **decoupled rotary key**
``k_rope (Dr)``, one for all heads, carries the positions. The cache holds ``c`` and ``k_rope``: ``r + Dr``
numbers per token per layer (576 in DeepSeek-V3, against 40,960 for the same model with MHA and every head's
192-wide key, or 32,768 as DeepSeek-V2's paper counts MHA, ``2 · n_h · d_h``).

Two forms compute the same attention:

- **expanded** (``absorbed=False``): rebuild every head's keys and values from the cached latents at every step,
  ``(N, 1, S, r) -> (N, H, S, Dn + Dv)``; simple, and the cost of a step grows with ``H · S · r · (Dn + Dv)``;
- **absorbed** (``absorbed=True``): by associativity, ``q_nope · (W_uk c) = (W_ukᵀ q_nope) · c``, so fold
  ``W_uk`` into the query and ``W_uv`` into the output. Attention then runs over the latents themselves, as
  multi-query attention with one shared key ``[c, k_rope]`` and one shared value ``c``, the key's first ``r``
  features. :class:`LatentCache` holds ``c`` and ``k_rope`` side by side, so that key is read in place.

The layout of :class:`MultiHeadLatentAttention` and the names of its projections are transformers'
``DeepseekV3Attention`` (``kv_a_proj_with_mqa``, ``kv_a_layernorm``, ``kv_b_proj``), whose cache holds the same
two tensors. Shape legend: ``N`` texts, ``H`` heads, ``L`` new tokens, ``S`` tokens so far, ``r`` the latent.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import calculate_attention
from .cache import KVCache
from .llama import LlamaOutput, RMSNorm, SwiGLU
from .masks import decoding_mask
from .multihead import merge_heads
from .positions import RotaryPositions
from .validation import check_bool, check_int, check_token_ids


class LatentCache(KVCache):
    """A cache of latents: per layer the latents ``(N, 1, S, r)`` and the rotary keys ``(N, 1, S, Dr)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. A :class:`~attention_lib.KVCache` whose "key"
    is the latent and whose "value" is the decoupled rotary key, as transformers' DeepSeek-V3 caches them:
    ``update(latent, rope_key, layer_idx)`` returns every latent and rotary key so far.

    Example:
        >>> cache = LatentCache(num_layers=1, max_cache_len=8)
        >>> c, k_rope = cache.update(torch.ones(1, 1, 3, 16), torch.ones(1, 1, 3, 8), layer_idx=0)
        >>> tuple(c.shape), tuple(k_rope.shape), cache.numbers_per_token()  # r + Dr per token per layer
        ((1, 1, 3, 16), (1, 1, 3, 8), 24)
    """

    def _allocate(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, length: int) -> None:
        """One buffer ``(N, 1, length, r + Dr)`` per layer, each token's latent and rotary key side by side (as
        vLLM's MLA cache holds them, 576 numbers in one row for DeepSeek-V3); ``keys`` and ``values`` are views."""
        N, H, _, r = key.shape
        both = key.new_zeros(N, H, length, r + value.shape[-1])
        self.keys[layer_idx], self.values[layer_idx] = both[..., :r], both[..., r:]  # views, written in place

    def numbers_per_token(self) -> int:
        """Numbers held per token in each layer: ``r + Dr`` (0 before the first update)."""
        k, v = self.keys[0], self.values[0]
        return 0 if k is None else k.shape[1] * (k.shape[-1] + v.shape[-1])


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


class TinyLatentLM(nn.Module):
    """A tiny decoder-only language model with multi-head latent attention (DeepSeek-V3's dense layers).

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. :class:`~attention_lib.TinyLlama` with
    :class:`MultiHeadLatentAttention` in each block: embedding, blocks of ``x + attention(RMSNorm(x))`` then
    ``x + SwiGLU(RMSNorm(x))``, a final RMSNorm and a linear head. ``absorbed`` switches every layer's form.

    Args:
        vocab_size, embed_dim, num_heads, num_layers, mlp_dim, rope_base, eps: as for ``TinyLlama``.
        kv_rank, rope_dim, nope_dim, v_dim: as for :class:`MultiHeadLatentAttention`.
        absorbed: every layer's form.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyLatentLM(vocab_size=10).eval()
        >>> ids = torch.randint(0, 10, (2, 6))
        >>> cache = model.new_cache(6)
        >>> full = model(ids).logits
        >>> step = torch.cat([model(ids[:, :4], cache).logits, model(ids[:, 4:], cache).logits], dim=1)
        >>> torch.allclose(full, step, atol=1e-5), cache
        (True, LatentCache(num_layers=2, max_cache_len=6, seq_length=6))
    """

    def __init__(self, vocab_size: int, *, embed_dim: int = 64, num_heads: int = 4, num_layers: int = 2,
                 kv_rank: int = 16, rope_dim: int = 8, nope_dim: int = 16, v_dim: int = 16, mlp_dim: int | None = None,
                 rope_base: float = 10000.0, eps: float = 1e-6, absorbed: bool = False):
        super().__init__()
        mlp_dim = 2 * embed_dim if mlp_dim is None else mlp_dim
        for name, size in (("vocab_size", vocab_size), ("num_layers", num_layers), ("mlp_dim", mlp_dim)):
            check_int(size, name, minimum=1)
        self.config = {"vocab_size": vocab_size, "embed_dim": embed_dim, "num_heads": num_heads,
                       "num_layers": num_layers, "kv_rank": kv_rank, "rope_dim": rope_dim, "nope_dim": nope_dim,
                       "v_dim": v_dim, "mlp_dim": mlp_dim, "rope_base": float(rope_base), "eps": float(eps)}
        self.embed_tokens = nn.Embedding(vocab_size, embed_dim)
        self.layers = nn.ModuleList()
        for i in range(num_layers):
            block = nn.Module()
            block.input_layernorm, block.post_attention_layernorm = RMSNorm(embed_dim, eps), RMSNorm(embed_dim, eps)
            block.self_attn = MultiHeadLatentAttention(embed_dim, num_heads, kv_rank=kv_rank, rope_dim=rope_dim,
                                                       nope_dim=nope_dim, v_dim=v_dim, rope_base=rope_base, eps=eps,
                                                       absorbed=absorbed, layer_idx=i)
            block.mlp = SwiGLU(embed_dim, mlp_dim)
            self.layers.append(block)
        self.norm = RMSNorm(embed_dim, eps)
        self.lm_head = nn.Linear(embed_dim, vocab_size, bias=False)

    @property
    def absorbed(self) -> bool:
        """Whether the layers compute the absorbed form; set it to switch all of them."""
        return all(block.self_attn.absorbed for block in self.layers)

    @absorbed.setter
    def absorbed(self, value: bool) -> None:
        for block in self.layers:
            block.self_attn.absorbed = check_bool(value, "absorbed")

    def new_cache(self, max_cache_len: int) -> LatentCache:
        """An empty :class:`LatentCache` of ``max_cache_len`` positions, one slot per layer."""
        return LatentCache(len(self.layers), max_cache_len)

    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None, *, offset: int | None = None):
        """Score the next token at every position of ``input_ids (N, L)``: a ``LlamaOutput(logits (N, L, vocab),
        cache, None)``. Raises as :meth:`TinyLlama.forward <attention_lib.TinyLlama.forward>` does."""
        check_token_ids(input_ids, self.embed_tokens.num_embeddings)
        if offset is None:
            offset = 0 if cache is None else cache.get_seq_length(0)
        x = self.embed_tokens(input_ids)  # (N, L) -> (N, L, E)
        for block in self.layers:
            x = x + block.self_attn(block.input_layernorm(x), cache, offset)  # (N, L, E)
            x = x + block.mlp(block.post_attention_layernorm(x))
        return LlamaOutput(self.lm_head(self.norm(x)), cache, None)  # (N, L, E) -> (N, L, vocab)


def _rope_rows(rope_dim: int) -> torch.Tensor:
    """DeepSeek's interleaved rotary pairs ``(0, 1), (2, 3), ...`` in ``rotate_half``'s order: evens, then odds."""
    return torch.cat([torch.arange(0, rope_dim, 2), torch.arange(1, rope_dim, 2)])


def from_hf_deepseek(model) -> TinyLatentLM:
    """Copy a ``transformers`` ``DeepseekV3ForCausalLM`` with dense MLPs into a :class:`TinyLatentLM`.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``; the tests build a tiny random one from a
    ``DeepseekV3Config`` (no download) and compare logits and greedy tokens. DeepSeek turns interleaved feature
    pairs ``(2i, 2i + 1)`` (``rope_interleave=True``); the package's :class:`~attention_lib.RotaryPositions` pairs
    ``i`` with ``i + Dr/2``. The same rotations in another feature order: the rows of the weights that make the
    rotary query and key are reordered, evens then odds, and the scores are unchanged.

    Args:
        model: a ``DeepseekV3ForCausalLM`` whose layers are all dense (``first_k_dense_replace >=
            num_hidden_layers``), with ``q_lora_rank=None``, the default RoPE, no attention bias and SiLU.

    Returns:
        A :class:`TinyLatentLM` in eval mode (expanded form), on the model's device and dtype.

    Raises:
        TypeError: if ``model`` is not a ``DeepseekV3ForCausalLM``.
        ValueError: naming what this model does not have: ``MoE layers``, ``q_lora_rank``, ``rope scaling``,
            ``attention_bias`` or ``hidden_act``.
    """
    if type(model).__name__ != "DeepseekV3ForCausalLM" or not hasattr(model, "config"):
        raise TypeError(f"from_hf_deepseek copies a transformers DeepseekV3ForCausalLM, but got "
                        f"{type(model).__name__}.")
    c = model.config
    rope = dict(getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {})
    unsupported = {"MoE layers": (c.first_k_dense_replace or 0) < c.num_hidden_layers,
                   "q_lora_rank": c.q_lora_rank is not None,
                   "rope scaling": rope.get("rope_type", "default") != "default",
                   "attention_bias": bool(c.attention_bias), "hidden_act": c.hidden_act != "silu"}
    if any(unsupported.values()):
        raise ValueError(f"this DeepseekV3ForCausalLM uses {[k for k, bad in unsupported.items() if bad]}, which "
                         f"TinyLatentLM does not have; build it with first_k_dense_replace >= num_hidden_layers "
                         f"(dense MLPs), q_lora_rank=None, the default RoPE, no attention bias and silu.")
    weight = model.lm_head.weight
    ours = TinyLatentLM(c.vocab_size, embed_dim=c.hidden_size, num_heads=c.num_attention_heads,
                        num_layers=c.num_hidden_layers, kv_rank=c.kv_lora_rank, rope_dim=c.qk_rope_head_dim,
                        nope_dim=c.qk_nope_head_dim, v_dim=c.v_head_dim, mlp_dim=c.intermediate_size,
                        rope_base=float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))),
                        eps=c.rms_norm_eps).to(device=weight.device, dtype=weight.dtype)
    H, Dn, Dr, r = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.kv_lora_rank
    order = _rope_rows(Dr) if getattr(c, "rope_interleave", True) else torch.arange(Dr)
    q_rows = torch.cat([h * (Dn + Dr) + torch.cat([torch.arange(Dn), Dn + order]) for h in range(H)])
    kv_rows = torch.cat([torch.arange(r), r + order])
    theirs = model.model
    with torch.no_grad():
        for mine, source in [(ours.embed_tokens, theirs.embed_tokens), (ours.norm, theirs.norm),
                             (ours.lm_head, model.lm_head)]:
            mine.weight.copy_(source.weight)
        for mine, layer in zip(ours.layers, theirs.layers, strict=True):
            a, b = mine.self_attn, layer.self_attn
            a.q_proj.weight.copy_(b.q_proj.weight[q_rows])  # each head's rotary rows, evens then odds
            a.kv_a_proj_with_mqa.weight.copy_(b.kv_a_proj_with_mqa.weight[kv_rows])  # the latent, then k_rope
            a.kv_a_layernorm.eps = b.kv_a_layernorm.variance_epsilon
            for name in ("kv_a_layernorm", "kv_b_proj", "o_proj"):
                getattr(a, name).weight.copy_(getattr(b, name).weight)
            for name in ("input_layernorm", "post_attention_layernorm"):
                getattr(mine, name).weight.copy_(getattr(layer, name).weight)
            for name in ("gate_proj", "up_proj", "down_proj"):
                getattr(mine.mlp, name).weight.copy_(getattr(layer.mlp, name).weight)
    return ours.eval()
