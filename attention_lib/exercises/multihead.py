"""Checkers for lesson 09 (the detective team): split the features into heads, and merge them back.

The typical mistake is a plain ``reshape`` straight to the final shape: the shape is right, but each "head"
then holds pieces of several words. These checkers recognise it (and a few cousins) and say what to change.
"""

from __future__ import annotations

import torch

from ..multihead import merge_heads, split_heads
from .checker import CheckResult, check_function


def _sizes(seed: int) -> tuple[torch.Generator, int, int, int, int]:
    g = torch.Generator().manual_seed(1000 + seed)
    N, L, H, Dh = (int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in ((1, 4), (3, 7), (2, 5), (2, 5)))
    return g, N, L, H, Dh


def _split_inputs(seed: int) -> tuple[torch.Tensor, int]:
    g, N, L, H, Dh = _sizes(seed)
    return torch.randn(N, L, H * Dh, generator=g), H


def _merge_inputs(seed: int) -> tuple[torch.Tensor]:
    g, N, L, H, Dh = _sizes(seed)
    return (torch.randn(N, H, L, Dh, generator=g),)


# Typical wrong answers for split_heads(x, num_heads): x is (N, L, E).
def _split_reshape_only(x, h):
    N, L, E = x.shape
    return x.reshape(N, h, L, E // h)


def _split_heads_interleaved(x, h):
    N, L, E = x.shape
    return x.reshape(N, L, E // h, h).permute(0, 3, 1, 2)


# Typical wrong answers for merge_heads(x): x is (N, H, L, Dh).
def _merge_reshape_only(x):
    N, H, L, Dh = x.shape
    return x.reshape(N, L, H * Dh)


def _merge_interleaved(x):
    N, H, L, Dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(N, L, H * Dh)


def check_split_heads(fn) -> CheckResult:
    """Check ``fn(x, num_heads)``, which should turn ``x (N, L, E)`` into ``(N, H, L, Dh)`` like
    :func:`attention_lib.split_heads`.

    Used in ``notebooks/09_detective_team.ipynb``.

    Example:
        >>> check_split_heads(split_heads).status
        'passed'
    """
    return check_function(
        fn, split_heads, _split_inputs, name="split_heads",
        mistakes=[
            (_split_reshape_only, "reshaping straight to (N, H, L, Dh) reads the numbers in memory order, so "
                                  "a head gets pieces of several words. Reshape to (N, L, H, Dh) first (each "
                                  "word's features cut into H slices), then swap L and H with .transpose(1, 2)."),
            (_split_heads_interleaved, "each head should get a contiguous slice of Dh features (head 0: the first "
                                       "Dh), not every H-th feature: reshape to (N, L, H, Dh), not (N, L, Dh, H)."),
        ],
        shape_hint="the result is (N, H, L, Dh) with Dh = E // num_heads. If you got (N, L, H, Dh), the last "
                   "step is missing: .transpose(1, 2) puts the heads before the words.",
    )


def check_merge_heads(fn) -> CheckResult:
    """Check ``fn(x)``, which should turn ``x (N, H, L, Dh)`` into ``(N, L, H * Dh)`` like
    :func:`attention_lib.merge_heads`.

    Used in ``notebooks/09_detective_team.ipynb``.

    Example:
        >>> check_merge_heads(merge_heads).status
        'passed'
    """
    return check_function(
        fn, merge_heads, _merge_inputs, name="merge_heads",
        mistakes=[
            (_merge_reshape_only, "reshaping (N, H, L, Dh) straight to (N, L, E) mixes words and heads. First "
                                  "bring each word's heads together with .transpose(1, 2) -> (N, L, H, Dh), "
                                  "then .reshape(N, L, H * Dh)."),
            (_merge_interleaved, "the heads should sit side by side (head 0's Dh features, then head 1's, ...), "
                                 "not interleaved: transpose to (N, L, H, Dh), not (N, L, Dh, H), before the "
                                 "reshape."),
        ],
        shape_hint="the result is (N, L, H * Dh). If you got (N, L, H, Dh), finish with "
                   ".reshape(N, L, H * Dh) to glue the heads together.",
    )
