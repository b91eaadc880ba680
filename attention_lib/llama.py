"""A tiny decoder-only language model in the architecture of Llama, built from the course's own parts.

Built step by step in ``notebooks/15_generation.ipynb``. Every part is one that Llama 2 and 3 (Touvron et al.,
2023), Mistral and Qwen have, at a size a CPU trains in seconds:

- a **token embedding** and, at the end, a **linear head** that scores every word of the vocabulary as the next;
- **blocks**, each ``x = x + attention(norm(x))`` then ``x = x + mlp(norm(x))`` (pre-norm, as in lesson 12);
- **RMSNorm** (Zhang & Sennrich, 2019): divide each vector by its root mean square, then scale; no mean removed,
  no bias;
- **attention** that is causal, with **rotary positions** (:class:`~attention_lib.RotaryPositions`) and
  **grouped-query attention** (``num_kv_heads``): the course's :class:`~attention_lib.GroupedQueryAttention`;
- a **SwiGLU MLP** (Shazeer, 2020): ``down(silu(gate(x)) * up(x))``.

:func:`from_hf_llama` copies the weights of a ``transformers`` ``LlamaForCausalLM``; the tests check that both
give the same logits, cached and not.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .cache import KVCache, SlidingWindowCache
from .grouped_query import GroupedQueryAttention
from .positions import RotaryPositions
from .validation import check_int, check_number, check_token_ids


class LlamaOutput(NamedTuple):
    """What :class:`TinyLlama` returns: ``logits (N, L, vocab)``, the ``cache`` (or ``None``) and, when asked,
    one attention map ``(N, H, L, S)`` per layer (``attentions``, else ``None``), as transformers names them."""

    logits: torch.Tensor
    cache: KVCache | None
    attentions: tuple[torch.Tensor, ...] | None


class RMSNorm(nn.Module):
    """Root-mean-square norm: ``weight * x / sqrt(mean(x²) + eps)`` over the last dimension, in float32.

    Built step by step in ``notebooks/15_generation.ipynb``. Like layer norm without the mean and the bias (Zhang
    & Sennrich, 2019); Llama's ``LlamaRMSNorm``.

    Example:
        >>> RMSNorm(2)(torch.tensor([[3.0, 4.0]]))  # root mean square sqrt(12.5)
        tensor([[0.8485, 1.1314]], grad_fn=<MulBackward0>)
    """

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = check_number(eps, "eps", positive=True, fix="Llama uses eps=1e-6 (or 1e-5).")
        self.weight = nn.Parameter(torch.ones(check_int(dim, "dim", minimum=1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (N, ..., E)`` -> ``(N, ..., E)``: each vector divided by its root mean square, then scaled."""
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)  # (N, ..., E) * (N, ..., 1)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    """Llama's MLP: ``down(silu(gate(x)) * up(x))``, each word on its own, ``E -> mlp_dim -> E``, no biases."""

    def __init__(self, dim: int, mlp_dim: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, mlp_dim, bias=False)
        self.up_proj = nn.Linear(dim, mlp_dim, bias=False)
        self.down_proj = nn.Linear(mlp_dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, L, E) -> (N, L, mlp_dim) -> (N, L, E)``: the gate decides how much of ``up(x)`` passes."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """One Llama block: ``x + attention(norm(x))`` (causal, RoPE, GQA), then ``x + mlp(norm(x))`` (SwiGLU)."""

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int, mlp_dim: int, *, rope_base: float,
                 eps: float, window: int | None, layer_idx: int):
        super().__init__()
        self.input_layernorm = RMSNorm(embed_dim, eps)
        self.self_attn = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, window=window, layer_idx=layer_idx,
                                               rotary=RotaryPositions(embed_dim // num_heads, rope_base))
        self.post_attention_layernorm = RMSNorm(embed_dim, eps)
        self.mlp = SwiGLU(embed_dim, mlp_dim)

    def forward(self, x, attn_mask, cache, offset, need_weights):
        """``x (N, L, E)`` -> ``(x (N, L, E), weights (N, H, L, S) or None)``; causal unless ``attn_mask`` is given."""
        h = self.input_layernorm(x)
        mixed, weights = self.self_attn(h, attn_mask, need_weights=need_weights, cache=cache, offset=offset)
        x = x + mixed  # residual: keep the word, add what it gathered
        return x + self.mlp(self.post_attention_layernorm(x)), weights


class TinyLlama(nn.Module):
    """A tiny decoder-only language model in Llama's architecture (the module docstring lists its parts).

    Built step by step in ``notebooks/15_generation.ipynb``. Not the TinyLlama-1.1B release: the course's own,
    a few thousand parameters. It reads token ids and scores every word of the vocabulary as the next one, at every
    position; with a cache it reads only the new tokens and attends over everything the cache holds.

    Args:
        vocab_size: how many tokens there are.
        embed_dim: ``E``; must be divisible by ``num_heads``, and ``E / H`` even (RoPE turns pairs).
        num_heads: ``H``, query heads per layer.
        num_kv_heads: ``Hkv``, key/value heads (default ``H``: MHA; ``1``: MQA; in between: GQA).
        num_layers: how many blocks.
        mlp_dim: the SwiGLU's inner width (default ``2 * embed_dim``).
        rope_base: RoPE's base (transformers' ``rope_theta``).
        eps: RMSNorm's epsilon (transformers' ``rms_norm_eps``).
        window: a sliding window for every layer, or ``None``.

    Raises:
        TypeError, ValueError: for bad sizes (from the parts, through :mod:`attention_lib.validation`).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyLlama(vocab_size=10, embed_dim=16, num_heads=4, num_kv_heads=2)
        >>> out = model(torch.randint(0, 10, (3, 5)))  # (N, L) token ids
        >>> tuple(out.logits.shape), out.cache is None  # (N, L, vocab)
        ((3, 5, 10), True)
    """

    def __init__(self, vocab_size: int, *, embed_dim: int = 32, num_heads: int = 4, num_kv_heads: int | None = None,
                 num_layers: int = 2, mlp_dim: int | None = None, rope_base: float = 10000.0, eps: float = 1e-6,
                 window: int | None = None):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        mlp_dim = 2 * embed_dim if mlp_dim is None else mlp_dim
        for name, size in (("vocab_size", vocab_size), ("num_layers", num_layers), ("mlp_dim", mlp_dim)):
            check_int(size, name, minimum=1)
        self.config = {"vocab_size": vocab_size, "embed_dim": embed_dim, "num_heads": num_heads,
                       "num_kv_heads": num_kv_heads, "num_layers": num_layers, "mlp_dim": mlp_dim,
                       "rope_base": float(rope_base), "eps": float(eps), "window": window}
        self.window = window
        self.embed_tokens = nn.Embedding(vocab_size, embed_dim)
        self.layers = nn.ModuleList(LlamaBlock(embed_dim, num_heads, num_kv_heads, mlp_dim, rope_base=rope_base,
                                               eps=eps, window=window, layer_idx=i) for i in range(num_layers))
        self.norm = RMSNorm(embed_dim, eps)
        self.lm_head = nn.Linear(embed_dim, vocab_size, bias=False)

    def new_cache(self, max_cache_len: int) -> KVCache:
        """An empty cache for this model: a :class:`~attention_lib.KVCache` of ``max_cache_len`` positions, or a
        :class:`~attention_lib.SlidingWindowCache` when the model has a window.

        Example:
            >>> TinyLlama(vocab_size=10).new_cache(16)
            KVCache(num_layers=2, max_cache_len=16, seq_length=0)
        """
        if self.window is not None:
            return SlidingWindowCache(len(self.layers), self.window)
        return KVCache(len(self.layers), max_cache_len)

    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None, *, attn_mask: torch.Tensor | None = None,
                offset: int | None = None, need_weights: bool = False) -> LlamaOutput:
        """Score the next token at every position of ``input_ids (N, L)``.

        Args:
            input_ids: ``(N, L)`` int64 token ids: the whole text, or with a cache only the new tokens.
            cache: a cache (:meth:`new_cache`) that already holds the earlier tokens; it is updated in place.
            attn_mask: ``(L, S)`` or ``(N or 1, H or 1, L, S)``, ``True`` = may attend, instead of the causal
                mask (``S`` counts the cached tokens too). Lesson 15 passes wrong ones on purpose.
            offset: the position of the first new token (default: the tokens in the cache). transformers passes
                every position instead, ``position_ids (N, L)``; ours are ``offset, ..., offset + L - 1``.
            need_weights: also return every layer's attention weights.

        Returns:
            :class:`LlamaOutput`: ``logits (N, L, vocab)``, the ``cache``, and ``attentions`` (one
            ``(N, H, L, S)`` map per layer) when ``need_weights``.

        Raises:
            TypeError: if ``input_ids`` is not a tensor of integer ids.
            ValueError: if it is not ``(N, L)`` with ``L >= 1`` or holds an id outside ``0 .. vocab_size - 1``.
        """
        check_token_ids(input_ids, self.embed_tokens.num_embeddings)
        if offset is None:
            offset = 0 if cache is None else cache.get_seq_length(0)  # one position for every layer
        x = self.embed_tokens(input_ids)  # (N, L) -> (N, L, E)
        maps = []
        for layer in self.layers:
            x, weights = layer(x, attn_mask, cache, offset, need_weights)  # (N, L, E), (N, H, L, S)
            maps.append(weights)
        logits = self.lm_head(self.norm(x))  # (N, L, E) -> (N, L, vocab)
        return LlamaOutput(logits, cache, tuple(maps) if need_weights else None)


def from_hf_llama(model) -> TinyLlama:
    """Copy the weights of a ``transformers`` ``LlamaForCausalLM`` into a :class:`TinyLlama`.

    Built step by step in ``notebooks/15_generation.ipynb``; the tests build a small random one from a
    ``LlamaConfig`` (no download) and check equal logits and tokens. Copies the embedding, every block's
    projections (``o_proj`` becomes ``out_proj``), norms and MLP, the final norm and the head.

    Args:
        model: a ``transformers.LlamaForCausalLM`` with the default RoPE, no biases, SiLU and
            ``head_dim = hidden_size / num_attention_heads``.

    Returns:
        A :class:`TinyLlama` in eval mode, on the model's device and dtype.

    Raises:
        TypeError: if ``model`` is not a ``LlamaForCausalLM``.
        ValueError: if its configuration uses something this model does not have (another RoPE, biases,
            another head size or activation).
    """
    if type(model).__name__ != "LlamaForCausalLM" or not hasattr(model, "config"):
        raise TypeError(f"from_hf_llama copies a transformers LlamaForCausalLM, but got {type(model).__name__}.")
    c = model.config
    rope = dict(getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {})
    theta = rope.get("rope_theta", getattr(c, "rope_theta", None))
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    unsupported = {"rope_type": rope.get("rope_type", "default") != "default", "attention_bias": c.attention_bias,
                   "mlp_bias": getattr(c, "mlp_bias", False), "hidden_act": c.hidden_act != "silu",
                   "head_dim": head_dim * c.num_attention_heads != c.hidden_size, "rope_theta": theta is None}
    if any(unsupported.values()):
        raise ValueError(f"this LlamaForCausalLM uses {[k for k, bad in unsupported.items() if bad]}, which TinyLlama "
                         f"does not have; use the default RoPE, no biases, silu and head_dim = hidden_size / heads.")
    weight = model.lm_head.weight
    ours = TinyLlama(c.vocab_size, embed_dim=c.hidden_size, num_heads=c.num_attention_heads,
                     num_kv_heads=c.num_key_value_heads, num_layers=c.num_hidden_layers, mlp_dim=c.intermediate_size,
                     rope_base=float(theta), eps=c.rms_norm_eps).to(device=weight.device, dtype=weight.dtype)
    theirs = model.model
    pairs = [(ours.embed_tokens, theirs.embed_tokens), (ours.norm, theirs.norm), (ours.lm_head, model.lm_head)]
    for mine, layer in zip(ours.layers, theirs.layers, strict=True):
        pairs += [(mine.input_layernorm, layer.input_layernorm), (mine.post_attention_layernorm,
                   layer.post_attention_layernorm), (mine.self_attn.out_proj, layer.self_attn.o_proj)]
        pairs += [(getattr(mine.self_attn, n), getattr(layer.self_attn, n)) for n in ("q_proj", "k_proj", "v_proj")]
        pairs += [(getattr(mine.mlp, n), getattr(layer.mlp, n)) for n in ("gate_proj", "up_proj", "down_proj")]
    with torch.no_grad():
        for mine, source in pairs:
            mine.weight.copy_(source.weight)
    return ours.eval()
