"""Attention, Step by Step: the tested package behind the notebooks.

The names below are what the lessons build, each docstring says where. The course's machinery lives in
sub-packages, each with one module per lesson named after its notebook: :mod:`attention_lib.exercises`,
:mod:`attention_lib.plotting`, :mod:`attention_lib.widgets` and :mod:`attention_lib.experiments`; and
:mod:`attention_lib.training` (tasks, training recipe, shipped models), :mod:`attention_lib.bench` (the benchmark
and its measuring) and :mod:`attention_lib.toy_data` (the toy sentence).
"""

from .attention import blend, calculate_attention, matchmaker, percentages, scaler
from .attention_only import AttentionOnlyTransformer
from .cache import ConcatCache, KVCache, SlidingWindowCache
from .delta_rule import chunk_gated_delta_rule, l2_normalize, recurrent_gated_delta_rule
from .device import get_device
from .encoder import TinyTransformer
from .flex import (
    alibi_mod,
    causal_lower_right_mod,
    causal_mod,
    decoding_mod,
    document_mod,
    flex_reference,
    padding_mod,
    prefix_lm_mod,
    sliding_window_mod,
    soft_cap_mod,
)
from .generation import generate, next_token
from .grouped_query import GroupedQueryAttention, group_heads, ungroup_heads
from .interventions import edit_head, force_onto, remove_keys, zero_rows
from .latent import LatentCache, MultiHeadLatentAttention, TinyLatentLM, from_hf_deepseek
from .linear_attention import (
    LinearAttentionState,
    chunk_linear_attention,
    elu_feature_map,
    linear_attention,
    recurrent_linear_attention,
)
from .linear_models import GatedDeltaLayer, LinearAttentionLayer, LinearAttentionOnlyTransformer, LinearTinyLlama
from .llama import TinyLlama, from_hf_llama
from .lookup import hard_lookup
from .loops import loop_attention
from .masks import causal_mask, causal_mask_lower_right, padding_mask, sliding_window_mask
from .memory_efficient import memory_efficient_attention, online_softmax_update, triton_attention
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .paged import BlockPool, PagedCache, PagedModel, paged_attention
from .positions import LearnedPositions, RotaryPositions, sinusoidal_encoding
from .speculative import speculative_generate

__all__ = [
    "AttentionOnlyTransformer",
    "BlockPool",
    "ConcatCache",
    "GatedDeltaLayer",
    "GroupedQueryAttention",
    "KVCache",
    "LatentCache",
    "LearnedPositions",
    "LinearAttentionLayer",
    "LinearAttentionOnlyTransformer",
    "LinearAttentionState",
    "LinearTinyLlama",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
    "PagedCache",
    "PagedModel",
    "RotaryPositions",
    "SlidingWindowCache",
    "TinyLatentLM",
    "TinyLlama",
    "TinyTransformer",
    "alibi_mod",
    "blend",
    "calculate_attention",
    "causal_lower_right_mod",
    "causal_mask",
    "causal_mask_lower_right",
    "causal_mod",
    "chunk_gated_delta_rule",
    "chunk_linear_attention",
    "decoding_mod",
    "document_mod",
    "edit_head",
    "elu_feature_map",
    "flex_reference",
    "force_onto",
    "from_hf_deepseek",
    "from_hf_llama",
    "generate",
    "get_device",
    "group_heads",
    "hard_lookup",
    "l2_normalize",
    "linear_attention",
    "loop_attention",
    "matchmaker",
    "memory_efficient_attention",
    "merge_heads",
    "next_token",
    "online_softmax_update",
    "padding_mask",
    "padding_mod",
    "paged_attention",
    "percentages",
    "prefix_lm_mod",
    "recurrent_gated_delta_rule",
    "recurrent_linear_attention",
    "remove_keys",
    "scaler",
    "sinusoidal_encoding",
    "sliding_window_mask",
    "sliding_window_mod",
    "soft_cap_mod",
    "speculative_generate",
    "split_heads",
    "triton_attention",
    "ungroup_heads",
    "zero_rows",
]
