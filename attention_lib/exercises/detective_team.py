"""Checkers for lesson 09 (the detective team): split the features into heads, and merge them back, for tensors
laid out words first, ``(L, N, E)``: the layout of ``torch.nn.MultiheadAttention`` with its default
``batch_first=False``.

The lesson splits batch-first tensors ``(N, L, E)``; the exercise asks for the same idea in the other layout. The
typical mistakes are the lesson's moves copied unchanged (``.transpose(1, 2)``, a reshape to ``(N, L, ...)``) and
a plain ``reshape`` straight to the final shape: the shape is right, but each "head" then holds pieces of several
words or sentences. These checkers recognise them and say what to change.
"""

from __future__ import annotations

import torch

from ..multihead import merge_heads, split_heads
from ._allowed import PLAIN, Allowed
from ._checker import CheckResult, also_checked, check_function
from ._hints import HINTS

#: (L, N, H, Dh) per trial: L, N and H all different (so that a dimension in the wrong place shows up as a wrong
#: shape), and N >= 2 (with one sentence, words-first and sentences-first memory orders are the same).
_SIZES = ((3, 2, 4, 2), (5, 3, 2, 3), (4, 2, 3, 5))


def _sizes(seed: int) -> tuple[torch.Generator, int, int, int, int]:
    g = torch.Generator().manual_seed(1000 + seed)
    return (g, *_SIZES[seed % len(_SIZES)])


def _split_inputs(seed: int) -> tuple[torch.Tensor, int]:
    g, L, N, H, Dh = _sizes(seed)
    return torch.randn(L, N, H * Dh, generator=g), H


def _merge_inputs(seed: int) -> tuple[torch.Tensor]:
    g, L, N, H, Dh = _sizes(seed)
    return (torch.randn(N, H, L, Dh, generator=g),)


def _split_reference(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    return split_heads(x.transpose(0, 1), num_heads)  # (L, N, E) -> (N, L, E) -> (N, H, L, Dh)


def _merge_reference(x: torch.Tensor) -> torch.Tensor:
    return merge_heads(x).transpose(0, 1)  # (N, H, L, Dh) -> (N, L, E) -> (L, N, E)


_PERMUTE_SPLIT = "x.reshape(L, N, H, Dh) (only the features are cut), then .permute(1, 2, 0, 3) -> (N, H, L, Dh)"
_PERMUTE_MERGE = "x.permute(2, 0, 1, 3) -> (L, N, H, Dh) (each word's heads side by side), then .reshape(L, N, H * Dh)"


# Typical wrong answers for split_heads(x, num_heads): x is (L, N, E).
def _split_reshape_only(x, h):
    L, N, E = x.shape
    return x.reshape(N, h, L, E // h)


def _split_as_if_batch_first(x, h):
    L, N, E = x.shape
    return x.reshape(N, L, h, E // h).transpose(1, 2)  # reads (L, N, E) as if it were (N, L, E)


def _split_interleaved(x, h):
    L, N, E = x.shape
    return x.reshape(L, N, E // h, h).permute(1, 3, 0, 2)


def _split_swapped_then_reshaped(x, h):
    L, N, E = x.shape
    return x.transpose(0, 1).reshape(N, h, L, E // h)


# Typical wrong answers for merge_heads(x): x is (N, H, L, Dh).
def _merge_reshape_only(x):
    N, H, L, Dh = x.shape
    return x.reshape(L, N, H * Dh)


def _merge_batch_first_reshaped(x):
    N, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(L, N, H * Dh)  # (N, L, H, Dh) cut as if it were (L, N, ...)


def _merge_interleaved(x):
    N, H, L, Dh = x.shape
    return x.permute(2, 0, 3, 1).reshape(L, N, H * Dh)


def _merge_reversed(x):
    N, H, L, Dh = x.shape
    return x.flip(1).permute(2, 0, 1, 3).reshape(L, N, H * Dh)  # head H-1 first


SPLIT_MISTAKES = [
    (_split_reshape_only, "reshaping straight to (N, H, L, Dh) reads the numbers in memory order, so a head gets "
                          f"pieces of several words and sentences. Cut the features first, then move them: "
                          f"{_PERMUTE_SPLIT}."),
    (_split_as_if_batch_first, "x is (L, N, E), words first: in memory come word 0 of every sentence, then word 1 "
                               "of every sentence, and so on. Reshaping it to (N, L, H, Dh) regroups those numbers "
                               "as if the sentences came first, so each 'sentence' gets pieces of several. "
                               f"Keep its order: {_PERMUTE_SPLIT}."),
    (_split_interleaved, "each head should get a contiguous slice of Dh features (head 0: the first Dh), not every "
                         "H-th feature: reshape to (L, N, H, Dh), not (L, N, Dh, H)."),
    (_split_swapped_then_reshaped, "you put the sentences first (good: (N, L, E)), then reshaped straight to "
                                   "(N, H, L, Dh), which reads the numbers in memory order and hands each head "
                                   "pieces of several words. Cut the features into (N, L, H, Dh) first, then swap "
                                   "the words and heads with .transpose(1, 2)."),
]

MERGE_MISTAKES = [
    (_merge_reshape_only, "reshaping (N, H, L, Dh) straight to (L, N, E) mixes sentences, heads and words. First "
                          f"bring each word's heads together, words first: {_PERMUTE_MERGE}."),
    (_merge_batch_first_reshaped, "after .transpose(1, 2) the tensor is (N, L, H, Dh), sentences first; reshaping "
                                  "it to (L, N, E) reads it in memory order, sentence by sentence, and cuts it as "
                                  f"if the words came first, which mixes sentences and words. Put the words first "
                                  f"before you reshape: {_PERMUTE_MERGE}."),
    (_merge_interleaved, "the heads should sit side by side (head 0's Dh features, then head 1's, ...), not "
                         "interleaved: permute to (L, N, H, Dh), not (L, N, Dh, H), before the reshape."),
    (_merge_reversed, "the heads are in reversed order: head 0's Dh features come first, then head 1's, and so on. "
                      f"Moving the dimensions keeps their order: {_PERMUTE_MERGE}."),
]


def _fmt(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def _split_shape_hint(args: tuple, got: tuple | None) -> str:
    """The hint for a split of the wrong shape: named after the shape the learner actually got."""
    x, h = args
    L, N, E = x.shape
    Dh = E // h
    named = {(L, h, N, Dh): "(L, H, N, Dh): .transpose(1, 2) is the move for batch-first (N, L, E) inputs. Here "
                            "the words come first, so after the reshape to (L, N, H, Dh) the sentences go to the "
                            "front, then the heads, then the words: .permute(1, 2, 0, 3).",
             (L, N, h, Dh): "(L, N, H, Dh): the features are cut, and the last step is missing: .permute(1, 2, 0, 3) "
                            "puts the sentences first, then the heads, then the words.",
             (h, N, L, Dh): "(H, N, L, Dh): the heads and the sentences are swapped; the result is (N, H, L, Dh): "
                            ".permute(1, 2, 0, 3) from (L, N, H, Dh).",
             (N, L, h, Dh): "(N, L, H, Dh): the heads must come before the words: (N, H, L, Dh)."}
    hint = f"the result is (N, H, L, Dh) = {_fmt((N, h, L, Dh))}, with Dh = E // num_heads."
    return f"you got {named[got]}" if got in named else hint


def _merge_shape_hint(args: tuple, got: tuple | None) -> str:
    """The hint for a merge of the wrong shape: named after the shape the learner actually got."""
    (x,) = args
    N, H, L, Dh = x.shape
    if got == (N, L, H * Dh):
        return (f"you returned (N, L, E) = {_fmt(got)}, the batch-first layout. Here the words come first, (L, N, E): "
                f"{_PERMUTE_MERGE}.")
    if got in ((L, N, Dh), (N, L, Dh)):
        return (f"you got {_fmt(got)}, Dh = {Dh} features per word: the heads were added up (or averaged). Merging "
                f"puts them side by side, so that each word gets H * Dh = E features: {_PERMUTE_MERGE}.")
    hint = f"the result is (L, N, H * Dh) = {_fmt((L, N, H * Dh))}."
    if got == (L, N, H, Dh):
        hint += " You got (L, N, H, Dh), so finish with .reshape(L, N, H * Dh) to glue the heads together."
    return hint


#: The exercise asks for reshapes and transposes (and plain tensor operations, whose slips have their hints):
#: calling the library's answer (even through a helper) fails, and so does a detour out of PyTorch.
ALLOWED = Allowed(PLAIN, said="reshapes and transposes (reshape, view, transpose, permute, flatten, ...)",
                  library_hint=HINTS["library_call"], own_helpers=False)

_SAID = "three fixed inputs, with L, N and H all different"


def check_split_heads(fn) -> CheckResult:
    """Check ``fn(x, num_heads)``, which should turn ``x (L, N, E)``, words first, into heads ``(N, H, L, Dh)``.

    Used in ``notebooks/09_detective_team.ipynb``: the layout of ``torch.nn.MultiheadAttention`` with
    ``batch_first=False``; head ``h`` holds features ``h * Dh`` to ``(h + 1) * Dh - 1`` of every word, as with
    :func:`attention_lib.split_heads` on ``x.transpose(0, 1)``.

    Example:
        >>> check_split_heads(lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(1, 2, 0, 3)).status
        'passed'
        >>> print(check_split_heads(lambda x, h: x.reshape(*x.shape[:2], h, -1).transpose(1, 2)))
        ❌ split_heads: expected shape (2, 4, 3, 2), but got (3, 4, 2, 2). Hint: you got (L, H, N, Dh): ...
    """
    result = check_function(fn, _split_reference, _split_inputs, name="split_heads", mistakes=SPLIT_MISTAKES,
                            allowed=ALLOWED, shape_hint=_split_shape_hint, float64=True, keep_inputs=True)
    return CheckResult("passed", f"✅ split_heads: correct on {_SAID}{also_checked(True, False)}. Well done!") \
        if result.passed else result


def check_merge_heads(fn) -> CheckResult:
    """Check ``fn(x)``, which should turn heads ``x (N, H, L, Dh)`` back into ``(L, N, H * Dh)``, words first.

    Used in ``notebooks/09_detective_team.ipynb``: the inverse of the split of :func:`check_split_heads`, as
    :func:`attention_lib.merge_heads` followed by ``.transpose(0, 1)``.

    Example:
        >>> check_merge_heads(lambda x: x.permute(2, 0, 1, 3).flatten(2)).status
        'passed'
    """
    result = check_function(fn, _merge_reference, _merge_inputs, name="merge_heads", mistakes=MERGE_MISTAKES,
                            allowed=ALLOWED, shape_hint=_merge_shape_hint, float64=True, keep_inputs=True)
    return CheckResult("passed", f"✅ merge_heads: correct on {_SAID}{also_checked(True, False)}. Well done!") \
        if result.passed else result
