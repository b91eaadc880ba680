"""FlexAttention the course's way (``notebooks/20_flex_attention.ipynb``): masks and biases as functions of positions.

- :mod:`~attention_lib.flex.mask_mods`: every mask of :mod:`attention_lib.masks` as a rule ``mask_mod(b, h, q_idx,
  kv_idx) -> bool`` (``True`` = may attend), and two new ones: documents packed in one sequence, prefix-LM;
- :mod:`~attention_lib.flex.score_mods`: biases as ``score_mod(score, b, h, q_idx, kv_idx) -> score`` (ALiBi,
  soft-capping);
- :mod:`~attention_lib.flex.reference`: :func:`flex_reference`, the recipe with the two hooks, every score in one
  table, and :func:`dense_mask`, a rule turned into its tensor;
- :mod:`~attention_lib.flex.blocks`: the tiles a block mask computes or skips, and :func:`find_compiler`.

PyTorch's own ``torch.nn.attention.flex_attention`` is imported only where it is used (importing it takes seconds).
"""

from .blocks import TILE_KINDS, find_compiler, tiles_of_block_mask, tiles_of_mask
from .mask_mods import (
    causal_lower_right_mod,
    causal_mod,
    decoding_mod,
    document_mod,
    padding_mod,
    prefix_lm_mod,
    sliding_window_mod,
)
from .reference import dense_mask, flex_reference, index_grid
from .score_mods import alibi_mod, alibi_slopes, soft_cap_mod

__all__ = ["TILE_KINDS", "alibi_mod", "alibi_slopes", "causal_lower_right_mod", "causal_mod", "decoding_mod",
           "dense_mask", "document_mod", "find_compiler", "flex_reference", "index_grid", "padding_mod",
           "prefix_lm_mod", "sliding_window_mod", "soft_cap_mod", "tiles_of_block_mask", "tiles_of_mask"]
