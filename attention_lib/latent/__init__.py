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

from .attention import LatentCache, MultiHeadLatentAttention, side_by_side
from .model import TinyLatentLM, from_hf_deepseek

__all__ = ["LatentCache", "MultiHeadLatentAttention", "TinyLatentLM", "from_hf_deepseek", "side_by_side"]
