"""The course's models with a state of fixed size: their softmax attention replaced by linear attention or by the
gated delta rule, in every layer or in all layers but one (a hybrid, as Qwen3-Next and Kimi Linear keep one softmax
layer in four).

Used in ``notebooks/19_linear_attention.ipynb``. Two layers, each a drop-in for the softmax layer it
replaces (the same projections in, the same ``(N, L, E)`` out):

- :class:`LinearAttentionLayer`: causal linear attention (feature map ``elu + 1``, Katharopoulos et al. 2020), the
  package's :func:`~attention_lib.linear_attention.linear_attention`;
- :class:`GatedDeltaLayer`: the gated delta rule (Yang et al. 2024, Gated DeltaNet; Qwen3-Next's linear layers),
  the package's :func:`~attention_lib.delta_rule.chunk_gated_delta_rule`, with unit-length keys and queries and a
  write strength ``β`` and a decay ``g`` computed from each token, as Qwen3-Next computes them. Kept minimal: no
  short convolution and no output gate (Qwen3-Next has both).

Two models, each the course's own model with only those layers swapped (:data:`LAYER_TYPES` names them, one per
layer): :class:`LinearAttentionOnlyTransformer` is lesson 13's :class:`~attention_lib.AttentionOnlyTransformer`,
:class:`LinearTinyLlama` lesson 15's :class:`~attention_lib.TinyLlama`. Each calls its parent's constructor first,
so the embedding, positions, norms, MLPs and read-out are the parent's, initialised from the same random numbers;
``"softmax"`` keeps the parent's own attention layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention_only import AttentionOnlyTransformer, InductionOutput
from .delta_rule import chunk_gated_delta_rule
from .linear_attention import linear_attention
from .llama import TinyLlama
from .masks import causal_mask
from .multihead import merge_heads, split_heads
from .validation import check_bool, check_int, check_multihead_inputs, check_token_ids

#: What a layer can be: the parent model's softmax attention, causal linear attention, or the gated delta rule.
LAYER_TYPES = ("softmax", "linear", "gated_delta")


class _FixedStateLayer(nn.Module):
    """What both layers share: the checks, the four projections and the call of the softmax layer they replace."""

    def __init__(self, embed_dim: int, num_heads: int, *, key_dim: int | None = None):
        super().__init__()
        check_int(embed_dim, "embed_dim", minimum=1)
        check_int(num_heads, "num_heads", minimum=1)
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim must be divisible by num_heads (each head gets embed_dim // num_heads "
                             f"value features), but embed_dim={embed_dim} and num_heads={num_heads}; pick num_heads "
                             f"among {[h for h in range(1, embed_dim + 1) if embed_dim % h == 0]}.")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.value_dim = embed_dim // num_heads
        self.key_dim = self.value_dim if key_dim is None else check_int(
            key_dim, "key_dim", minimum=1, fix="the state of each head is key_dim x value_dim numbers.")
        self.q_proj = nn.Linear(embed_dim, num_heads * self.key_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_heads * self.key_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, state per head="
                f"{self.key_dim} x {self.value_dim}")

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool | None = None,
                need_weights: bool = False, *, cache=None, offset: int | None = None) -> tuple[torch.Tensor, None]:
        """Mix every token of ``x`` with the tokens before it, through the fixed-size state of each head.

        Called as the softmax layer it replaces is (:class:`~attention_lib.GroupedQueryAttention`'s arguments).

        Args:
            x: ``(N, L, E)``.
            attn_mask, is_causal, cache: refused (a mask, ``is_causal=False``, a cache): the layer is causal by
                construction and keeps a state, not a cache.
            need_weights: accepted; the weights are ``None`` all the same (there are none).
            offset: ignored: no positions inside the layer.

        Returns:
            ``(output (N, L, E), None)``.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor of the layer's dtype.
            ValueError: if ``x`` is not ``(N, L, E)``, or an option this layer has not is asked for.
        """
        check_multihead_inputs(x, x, x, sizes=dict.fromkeys(("query", "key", "value"), self.embed_dim),
                               dtype=self.q_proj.weight.dtype)
        if attn_mask is not None or is_causal is False:
            raise ValueError(f"{type(self).__name__} is causal by construction and takes no mask; leave attn_mask "
                             f"and is_causal out.")
        if cache is not None:
            raise ValueError(f"{type(self).__name__} keeps a state of fixed size, not a KV cache; run the model "
                             f"without a cache (generate(..., use_cache=False)).")
        check_bool(need_weights, "need_weights")
        H = self.num_heads
        q, k, v = split_heads(self.q_proj(x), H), split_heads(self.k_proj(x), H), split_heads(self.v_proj(x), H)
        return self.out_proj(merge_heads(self.mix(x, q, k, v))), None  # (N, H, L, Dv) -> (N, L, E)


class LinearAttentionLayer(_FixedStateLayer):
    """Causal linear attention as a layer: project, split into heads, blend with ``φ(q) · φ(k)``, merge, project.

    Used in ``notebooks/19_linear_attention.ipynb``. Lesson 09's multi-head layer with the softmax
    replaced by :func:`~attention_lib.linear_attention.linear_attention` (``φ = elu + 1``, causal): each head keeps
    a state of ``key_dim x value_dim`` numbers whatever the length.

    Args:
        embed_dim: ``E``, the width in and out; ``num_heads``: ``H``, dividing ``E`` (``Dv = E / H``).
        key_dim: ``Dk``, the features of each head's queries and keys (default ``Dv``): the state is ``Dk x Dv``.

    Raises:
        TypeError: if a size is not an int. ValueError: if a size is not positive or ``H`` does not divide ``E``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> layer = LinearAttentionLayer(embed_dim=8, num_heads=2, key_dim=3)
        >>> out, weights = layer(torch.randn(2, 5, 8))  # (N, L, E)
        >>> tuple(out.shape), weights, (layer.key_dim, layer.value_dim)
        ((2, 5, 8), None, (3, 4))
    """

    def mix(self, x, q, k, v):
        """``(N, H, L, Dk)`` queries and keys, ``(N, H, L, Dv)`` values -> ``(N, H, L, Dv)``, causal."""
        return linear_attention(q, k, v, is_causal=True)


class GatedDeltaLayer(_FixedStateLayer):
    """The gated delta rule as a layer, as Qwen3-Next's linear layers use it (kept minimal).

    Used in ``notebooks/19_linear_attention.ipynb``. Queries, keys and values as in
    :class:`LinearAttentionLayer`; from each token also a write strength ``β = sigmoid(b_proj(x))`` and a decay
    ``g = -exp(A_log) · softplus(a_proj(x) + dt_bias)`` per head (Qwen3-Next's ``Qwen3NextGatedDeltaNet``, with
    ``A_log`` and ``dt_bias`` initialised as Gated DeltaNet's code initialises them); then
    :func:`~attention_lib.delta_rule.chunk_gated_delta_rule` with unit-length queries and keys. Left out of
    Qwen3-Next's layer: the short causal convolution before the rule and the gated norm after it.

    Args:
        embed_dim, num_heads, key_dim: as for :class:`LinearAttentionLayer`; the state is ``Dk x Dv`` per head.

    Raises:
        TypeError: if a size is not an int. ValueError: if a size is not positive or ``H`` does not divide ``E``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> layer = GatedDeltaLayer(embed_dim=8, num_heads=2)
        >>> out, _ = layer(torch.randn(2, 5, 8))
        >>> tuple(out.shape), bool((layer.gates(torch.randn(2, 5, 8))[0] < 0).all())  # a decay: g < 0
        ((2, 5, 8), True)
    """

    def __init__(self, embed_dim: int, num_heads: int, *, key_dim: int | None = None):
        super().__init__(embed_dim, num_heads, key_dim=key_dim)
        self.b_proj = nn.Linear(embed_dim, num_heads)  # the write strength beta, per head
        self.a_proj = nn.Linear(embed_dim, num_heads)  # the decay's input, per head
        A = torch.empty(num_heads).uniform_(0, 16)
        dt = torch.exp(torch.rand(num_heads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
        self.A_log = nn.Parameter(torch.log(A))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(g, beta)``, each ``(N, H, L)``, of ``x (N, L, E)``: the log of each token's decay and its strength."""
        g = -self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)  # (N, L, H), < 0
        return g.transpose(1, 2), self.b_proj(x).sigmoid().transpose(1, 2)

    def mix(self, x, q, k, v):
        """``(N, H, L, Dk)`` queries and keys, ``(N, H, L, Dv)`` values -> ``(N, H, L, Dv)``, causal."""
        g, beta = self.gates(x)
        return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm=True)[0]


_LAYERS = {"linear": LinearAttentionLayer, "gated_delta": GatedDeltaLayer}


def _check_layer_types(layer_types) -> tuple[str, ...]:
    if isinstance(layer_types, str) or not isinstance(layer_types, Sequence) or not layer_types:
        raise TypeError(f"layer_types must be a non-empty sequence with one of {LAYER_TYPES} per layer, such as "
                        f"('gated_delta', 'softmax'), but got {layer_types!r}.")
    unknown = [t for t in layer_types if t not in LAYER_TYPES]
    if unknown:
        raise ValueError(f"every layer type must be one of {LAYER_TYPES}, but layer_types={tuple(layer_types)!r} "
                         f"has {unknown}.")
    return tuple(layer_types)


class LinearAttentionOnlyTransformer(AttentionOnlyTransformer):
    """Lesson 13's attention-only transformer with some or all of its softmax layers swapped for fixed-state ones.

    Used in ``notebooks/19_linear_attention.ipynb``. The parent's token embedding, learned positions
    and read-out (made first, from the same random numbers as the parent's), then ``x = x + layer(x)`` for each
    layer: the parent's causal :class:`~attention_lib.MultiHeadAttention` for ``"softmax"``, a
    :class:`LinearAttentionLayer` or a :class:`GatedDeltaLayer` otherwise.

    Args:
        vocab_size, max_len, embed_dim, num_heads: as for :class:`~attention_lib.AttentionOnlyTransformer`.
        layer_types: one of :data:`LAYER_TYPES` per layer, e.g. ``("linear", "linear")`` or
            ``("gated_delta", "softmax")`` (a hybrid).
        key_dim: ``Dk`` of the fixed-state layers (default ``E / H``): each head's state is ``Dk x E / H``.

    Raises:
        TypeError, ValueError: for bad sizes or layer types.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = LinearAttentionOnlyTransformer(32, 16, layer_types=("gated_delta", "softmax"))
        >>> out = model(torch.randint(0, 32, (3, 10)))
        >>> tuple(out.logits.shape), out.attentions[0], tuple(out.attentions[1].shape)
        ((3, 10, 32), None, (3, 2, 10, 10))
    """

    def __init__(self, vocab_size: int, max_len: int, *, embed_dim: int = 64, num_heads: int = 2,
                 layer_types: Sequence[str] = ("linear", "linear"), key_dim: int | None = None):
        layer_types = _check_layer_types(layer_types)
        super().__init__(vocab_size, max_len, embed_dim=embed_dim, num_heads=num_heads, num_layers=len(layer_types))
        del self.config["num_layers"]  # the config is the constructor's arguments: the layer types say it
        self.config |= {"layer_types": layer_types, "key_dim": key_dim}
        for i, kind in enumerate(layer_types):
            if kind != "softmax":
                self.layers[i] = _LAYERS[kind](embed_dim, num_heads, key_dim=key_dim)

    def forward(self, tokens: torch.Tensor, *, ablate=(), need_weights: bool = True) -> InductionOutput:
        """Score the next token at every position of ``tokens (N, L)``, as the parent does.

        Returns:
            :class:`~attention_lib.attention_only.InductionOutput`: ``logits (N, L, V)``, and one ``(N, H, L, L)``
            map per softmax layer (``None`` for a fixed-state layer, which has none, and without ``need_weights``).

        Raises:
            TypeError, ValueError: as the parent's ``forward``; ValueError if ``ablate`` names a head of a
                fixed-state layer (only softmax heads have weights to zero).
        """
        check_token_ids(tokens, self.config["vocab_size"], "tokens")
        types = self.config["layer_types"]
        if any(len(p) == 2 and p[0] in range(len(types)) and types[p[0]] != "softmax" for p in map(tuple, ablate)):
            raise ValueError(f"ablate zeroes the weights of softmax heads, but layers {types} ablate={list(ablate)} "
                             f"names a layer without weights.")
        with self._ablated(ablate):
            x = self.positions(self.token_embedding(tokens))  # (N, L, E)
            mask = causal_mask(tokens.shape[1], device=tokens.device)
            maps = []
            for kind, layer in zip(types, self.layers, strict=True):
                if kind == "softmax":
                    mixed, weights = layer(x, x, x, attn_mask=mask, need_weights=need_weights)
                else:
                    mixed, weights = layer(x)
                x = x + mixed
                maps.append(weights)
        return InductionOutput(self.readout(x), tuple(maps))


class LinearTinyLlama(TinyLlama):
    """Lesson 15's tiny Llama with some or all of its softmax layers swapped for fixed-state ones.

    Used in ``notebooks/19_linear_attention.ipynb``. Every part is the parent's (embedding, blocks with
    RMSNorm and SwiGLU, final norm and head, made first from the same random numbers); in each block whose type is
    not ``"softmax"`` the :class:`~attention_lib.GroupedQueryAttention` (rotary positions inside) becomes a
    :class:`LinearAttentionLayer` or a :class:`GatedDeltaLayer`, which have no positions: order reaches them only
    through causality (and the decay) and through the softmax layers.

    Args:
        vocab_size, embed_dim, num_heads, mlp_dim, rope_base, eps: as for :class:`~attention_lib.TinyLlama`.
        layer_types: one of :data:`LAYER_TYPES` per layer.
        key_dim: ``Dk`` of the fixed-state layers (default ``E / H``).

    Raises:
        TypeError, ValueError: for bad sizes or layer types.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = LinearTinyLlama(10, layer_types=("linear", "linear"))
        >>> tuple(model(torch.randint(0, 10, (3, 5))).logits.shape)
        (3, 5, 10)
    """

    def __init__(self, vocab_size: int, *, layer_types: Sequence[str] = ("linear", "linear"),
                 key_dim: int | None = None, embed_dim: int = 32, num_heads: int = 4, mlp_dim: int | None = None,
                 rope_base: float = 10000.0, eps: float = 1e-6):
        layer_types = _check_layer_types(layer_types)
        super().__init__(vocab_size, embed_dim=embed_dim, num_heads=num_heads, num_layers=len(layer_types),
                         mlp_dim=mlp_dim, rope_base=rope_base, eps=eps)
        for name in ("num_kv_heads", "num_layers", "window"):  # the config is the constructor's arguments
            del self.config[name]
        self.config |= {"layer_types": layer_types, "key_dim": key_dim}
        for block, kind in zip(self.layers, layer_types, strict=True):
            if kind != "softmax":
                block.self_attn = _LAYERS[kind](embed_dim, num_heads, key_dim=key_dim)

    def new_cache(self, max_cache_len: int):
        """Refused: the fixed-state layers keep no KV cache.

        Raises:
            TypeError: always; generate with ``use_cache=False``.
        """
        raise TypeError(f"{type(self).__name__} has layers that keep a state of fixed size, not a KV cache; "
                        f"generate with use_cache=False.")
