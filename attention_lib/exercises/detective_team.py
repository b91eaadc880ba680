"""Checkers for lesson 09 (the detective team): split the features into heads, and merge them back.

The typical mistake is a plain ``reshape`` straight to the final shape: the shape is right, but each "head"
then holds pieces of several words. These checkers recognise it (and a few cousins) and say what to change.
"""

from __future__ import annotations

import torch

from ..multihead import merge_heads, split_heads
from ._checker import CheckResult, check_function
from ._hints import HINTS

#: (N, L, H, Dh) per trial, L != H so that a missing transpose shows up as a wrong shape. (With L == H,
#: reshape(N, L, H, Dh) is the same tensor as the plain reshape to (N, H, L, Dh), which has its own hint.)
_SIZES = ((2, 3, 2, 4), (1, 5, 2, 3), (3, 4, 3, 5))


def _sizes(seed: int) -> tuple[torch.Generator, int, int, int, int]:
    g = torch.Generator().manual_seed(1000 + seed)
    return (g, *_SIZES[seed % len(_SIZES)])


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


def _split_transpose_first(x, h):
    N, L, E = x.shape
    return x.transpose(1, 2).reshape(N, h, L, E // h)  # (N, E, L) cut into (N, H, L, Dh): across words


# Typical wrong answers for merge_heads(x): x is (N, H, L, Dh).
def _merge_reshape_only(x):
    N, H, L, Dh = x.shape
    return x.reshape(N, L, H * Dh)


def _merge_interleaved(x):
    N, H, L, Dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(N, L, H * Dh)


def _merge_reversed(x):
    N, H, L, Dh = x.shape
    return x.flip(1).transpose(1, 2).reshape(N, L, H * Dh)  # head H-1 first


#: Typical wrong answers for split_heads and merge_heads, with their hints.
SPLIT_MISTAKES = [(_split_reshape_only, HINTS["split_reshape_only"]),
                  (_split_heads_interleaved, HINTS["split_interleaved"]),
                  (_split_transpose_first, HINTS["split_transpose_first"])]
MERGE_MISTAKES = [(_merge_reshape_only, HINTS["merge_reshape_only"]), (_merge_interleaved, HINTS["merge_interleaved"]),
                  (_merge_reversed, HINTS["merge_reversed"])]


def _fmt(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def _split_shape_hint(args: tuple, got: tuple | None) -> str:
    """The hint for a split of the wrong shape: named after the shape the learner actually got."""
    x, h = args
    N, L, E = x.shape
    if got == (N, L, E // h, h):
        return HINTS["split_wrong_swap"].format(got=_fmt(got))
    hint = "the result is (N, H, L, Dh) with Dh = E // num_heads."
    if got == (N, L, h, E // h):
        hint += " You got (N, L, H, Dh), so the last step is missing: .transpose(1, 2) puts the heads before the words."
    return hint


def _merge_shape_hint(args: tuple, got: tuple | None) -> str:
    """The hint for a merge of the wrong shape: named after the shape the learner actually got."""
    (x,) = args
    N, H, L, Dh = x.shape
    if got == (N, L, Dh):
        return HINTS["merge_summed"].format(got=_fmt(got))
    hint = "the result is (N, L, H * Dh)."
    if got == (N, L, H, Dh):
        hint += " You got (N, L, H, Dh), so finish with .reshape(N, L, H * Dh) to glue the heads together."
    return hint

#: The exercise asks for reshape and transpose: calling the library's answer (even through a helper) fails.
FORBIDDEN = {split_heads: HINTS["library_call"], merge_heads: HINTS["library_call"]}


def check_split_heads(fn) -> CheckResult:
    """Check ``fn(x, num_heads)``, which should turn ``x (N, L, E)`` into ``(N, H, L, Dh)`` like
    :func:`attention_lib.split_heads`.

    Used in ``notebooks/09_detective_team.ipynb``.

    Example:
        >>> check_split_heads(lambda x, h: x.reshape(*x.shape[:2], h, -1).transpose(1, 2)).status
        'passed'
        >>> print(check_split_heads(split_heads))
        ❌ split_heads: not allowed here. Hint: build it from reshape and transpose; your function called ...
    """
    return check_function(
        fn, split_heads, _split_inputs, name="split_heads",
        mistakes=SPLIT_MISTAKES, forbidden=FORBIDDEN,
        shape_hint=_split_shape_hint,
    )


def check_merge_heads(fn) -> CheckResult:
    """Check ``fn(x)``, which should turn ``x (N, H, L, Dh)`` into ``(N, L, H * Dh)`` like
    :func:`attention_lib.merge_heads`.

    Used in ``notebooks/09_detective_team.ipynb``.

    Example:
        >>> check_merge_heads(lambda x: x.transpose(1, 2).flatten(2)).status
        'passed'
    """
    return check_function(
        fn, merge_heads, _merge_inputs, name="merge_heads",
        mistakes=MERGE_MISTAKES, forbidden=FORBIDDEN,
        shape_hint=_merge_shape_hint,
    )
