"""A tiny language model of multi-head latent attention, and the copy of a ``transformers`` DeepSeek-V3 into it (see
:mod:`attention_lib.latent`)."""

from __future__ import annotations

import torch
from torch import nn

from ..cache import KVCache
from ..llama import LlamaOutput, RMSNorm, SwiGLU
from ..validation import check_bool, check_int, check_token_ids
from .attention import LatentCache, MultiHeadLatentAttention


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
            ``attention_bias``, ``hidden_act``, or ``num_key_value_heads`` other than the head count.
    """
    if type(model).__name__ != "DeepseekV3ForCausalLM" or not hasattr(model, "config"):
        raise TypeError(f"from_hf_deepseek copies a transformers DeepseekV3ForCausalLM, but got "
                        f"{type(model).__name__}.")
    c = model.config
    rope = dict(getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {})
    unsupported = {"MoE layers": (c.first_k_dense_replace or 0) < c.num_hidden_layers,
                   "q_lora_rank": c.q_lora_rank is not None,
                   "rope scaling": rope.get("rope_type", "default") != "default",
                   "attention_bias": bool(c.attention_bias), "hidden_act": c.hidden_act != "silu",
                   "num_key_value_heads": getattr(c, "num_key_value_heads", None) not in (
                       None, c.num_attention_heads)}
    if any(unsupported.values()):
        raise ValueError(f"this DeepseekV3ForCausalLM uses {[k for k, bad in unsupported.items() if bad]}, which "
                         f"TinyLatentLM does not have; build it with first_k_dense_replace >= num_hidden_layers "
                         f"(dense MLPs), q_lora_rank=None, the default RoPE, no attention bias, silu, and "
                         f"num_key_value_heads = num_attention_heads (here {c.num_attention_heads}: every head "
                         f"reads its own keys made from the latent).")
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
