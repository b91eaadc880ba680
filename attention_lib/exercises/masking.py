"""Checkers for the exercises of ``notebooks/08_masking.ipynb``: build a sliding-window mask, apply a mask.

Masks follow SDPA's convention: a bool mask holds ``True`` where a query **may attend** to a key.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import attention
from ..masks import causal_mask, sliding_window_mask
from ._again import Awkward, loud
from ._allowed import PLAIN, PLAIN_SAID, SOFTMAX, Allowed
from ._checker import CheckResult, also_checked, check_function
from ._hints import HINTS
from ._running import run_learner

# -- Exercise 1: a sliding-window mask ---------------------------------------------------------------------------

#: ``(L, S, window)`` per trial: square, fewer queries than keys, more, and a window of one key.
_WINDOW_SIZES = ((5, 5, 2), (4, 7, 3), (7, 4, 3), (3, 5, 1))


def _window_sizes(seed: int) -> tuple[int, int, int]:
    return _WINDOW_SIZES[seed % len(_WINDOW_SIZES)]


def _band(L: int, S: int, lowest: int, highest: int) -> torch.Tensor:
    """``True`` where ``lowest <= j - i <= highest``, for query ``i`` and key ``j``: an ``(L, S)`` bool band."""
    offset = torch.arange(S)[None, :] - torch.arange(L)[:, None]  # (1, S) - (L, 1) -> (L, S): j - i
    return (offset >= lowest) & (offset <= highest)


def window_mask(L: int, S: int, window: int) -> torch.Tensor:
    """The reference: query ``i`` may attend to key ``j`` when ``i - window < j <= i`` (top-left aligned).

    The package's one sliding window, :func:`~attention_lib.sliding_window_mask` with ``align="upper_left"``.

    Example:
        >>> window_mask(4, 4, 2).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    return sliding_window_mask(L, S, window=window, align="upper_left")


def _additive(L: int, S: int, window: int) -> torch.Tensor:
    return torch.zeros(L, S).masked_fill(~window_mask(L, S, window), float("-inf"))


WINDOW_MISTAKES = [
    (_additive, HINTS["mask_additive"]),
    (lambda L, S, w: causal_mask(L, S),
     "that is the causal mask: every earlier word is allowed. The window keeps only the last `window` keys: query "
     "i may also not attend to keys j <= i - window (block them with a second triangle, e.g. .triu(1 - window), "
     "or compare positions)."),
    (lambda L, S, w: ~window_mask(L, S, w),
     "True and False are swapped. In SDPA's convention True means 'may attend', so the keys inside the window are "
     "True and all the others False (nn.MultiheadAttention uses the opposite)."),
    (lambda L, S, w: _band(L, S, -w, 0),
     "one key too many: a window of `window` keys is the query's own key and the window - 1 keys before it, "
     "i - window < j <= i. Yours also lets query i see key i - window."),
    (lambda L, S, w: _band(L, S, 2 - w, 0),
     "one key too few: a window of `window` keys is the query's own key and the window - 1 keys before it, "
     "i - window < j <= i (for window = 1, the query's own key alone)."),
    (lambda L, S, w: _band(L, S, 1 - w, -1), HINTS["mask_no_diagonal"]),
    (lambda L, S, w: _band(L, S, -w, -1),
     "the query's own key is missing (j < i), and the window reaches one key further back (j >= i - window): a window "
     "of `window` keys is the query's own key and the window - 1 keys before it, i - window < j <= i."),
    (lambda L, S, w: _band(L, S, 0, w - 1),
     "that window looks ahead: it lets query i see keys i .. i + window - 1, the future. The window runs "
     "backwards from the query: i - window < j <= i (the lower side of the diagonal, as for the causal mask)."),
    (lambda L, S, w: _band(L, S, 1 - w, w - 1),
     "that window reaches both ways, i - window < j < i + window, so each query sees future words too. Keep only "
     "the keys at or before the query: i - window < j <= i."),
    (lambda L, S, w: _band(L, S, 1 - w, S),
     "your mask lets query i see every key from i - window + 1 on, the future included: keep only the keys at or "
     "before the query as well, j <= i (.tril())."),
    (lambda L, S, w: _band(L, S, 1 - w + (S - L), S - L),
     "the window is aligned at the bottom-right corner (query i's window ends at key i + S - L). Align it top-left "
     "like SDPA's is_causal: query i's window ends at key i, whatever L and S."),
]


def _window_shape_hint(args: tuple, got: tuple | None) -> str:
    """The hint for a mask of the wrong shape, named after the shape the learner actually got."""
    L, S, _ = args
    rows = "the mask is (L, S): one row per query, one column per key; entry [i, j] says whether query i may attend " \
           "to key j."
    if got == (S, L):
        return f"you returned (S, L) = {got}, one row per key: the mask transposed; " + rows
    if got == (L, L):
        return rows + " Did you use L for both sizes?"
    if got == (S, S):
        return rows + " Did you use S for both sizes?"
    return rows


#: The hint for a window mask that goes wrong once the window reaches past the first key.
WINDOW_AT_LEAST_L = ("with a window as long as the sentence or longer, no key falls out of it: the window mask is the "
                     "causal mask (query i sees keys 0..i). Look at what your expression does when i - window is "
                     "negative: a diagonal beyond the matrix in triu/tril, a slice whose negative start counts from "
                     "the end, a window capped at the wrong size.")


#: The hint for a window mask that caps the window at the number of keys, or assumes L <= S.
WINDOW_BETWEEN = ("with more queries than keys, query i still sees the keys j with i - window < j <= i that exist: "
                  "the last queries see only the last keys of the window, or none. Compare positions, i - window < j "
                  "and j <= i, and cap the window at nothing (not at min(L, S)).")


def check_window_mask(fn: Callable[[int, int, int], torch.Tensor]) -> CheckResult:
    """Check a learner's ``window_mask(L, S, window)``: bool ``(L, S)``, ``True`` where ``i - window < j <= i``.

    Built step by step in ``notebooks/08_masking.ipynb``: each query may attend to its own key and the
    ``window - 1`` keys before it (a sliding window, top-left aligned like ``is_causal``), ``True`` = may attend.

    Args:
        fn: ``(L, S, window) -> (L, S)`` bool tensor; it is tried on four fixed sizes: ``L == S``, ``L < S``,
            ``L > S``, and a window of one key.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (the plain causal mask, a
        window one key too wide or too narrow, a window that looks ahead or both ways, swapped ``True``/``False``,
        bottom-right alignment, a transposed or float mask).

    Example:
        >>> ones = lambda L, S: torch.ones(L, S, dtype=torch.bool)
        >>> check_window_mask(lambda L, S, w: ones(L, S).tril() & ones(L, S).triu(1 - w)).status
        'passed'
        >>> print(check_window_mask(lambda L, S, w: ones(L, S).tril()))
        ❌ window mask: not quite. Hint: that is the causal mask: every earlier word is allowed. ...
    """
    name = "window mask"
    result = check_function(fn, window_mask, _window_sizes, name=name, mistakes=WINDOW_MISTAKES,
                            trials=len(_WINDOW_SIZES), shape_hint=_window_shape_hint, allowed=WINDOW_ALLOWED,
                            fresh_result=True,
                            awkward=[Awkward("a window as long as the sentence, (L, S, window) = (5, 5, 5)",
                                             (5, 5, 5), WINDOW_AT_LEAST_L),
                                     Awkward("a window longer than the keys, (L, S, window) = (4, 6, 9)", (4, 6, 9),
                                             WINDOW_AT_LEAST_L),
                                     Awkward("more queries than keys, a window between them, (L, S, window) = (7, 4, "
                                             "5)", (7, 4, 5), WINDOW_BETWEEN)])
    if not result.passed:
        return result
    got = run_learner(fn, _window_sizes(1)).result  # it ran without error in every trial
    if got.dtype != torch.bool:
        return CheckResult("failed", f"❌ {name}: the pattern is right, but the mask has dtype {got.dtype}. "
                           f"Hint: return a bool tensor (True = may attend), e.g. build it from "
                           f"torch.ones(L, S, dtype=torch.bool) or from a comparison of positions.")
    return CheckResult("passed", f"✅ {name}: correct on four fixed sizes (L = S, L < S, L > S, windows of 1 to 3 "
                                 f"keys). Well done!")


# -- Exercise 2: apply a mask before the softmax -------------------------------------------------------------------


def _scores_and_mask(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random scores ``(2, L, S)`` and a random bool mask ``(2, L, S)``, from a fixed seed.

    In the first trial every query keeps at least one key; in the others, the first query of the second
    sentence has all its keys blocked (its weights must be exact zeros), and the first query of the first
    sentence keeps every key (so that a mask read the wrong way round blocks a whole row there).
    """
    g = torch.Generator().manual_seed(seed)
    L, S = [(4, 4), (3, 5), (6, 4)][seed % 3]
    scores = 2 * torch.randn(2, L, S, generator=g)
    mask = torch.rand(2, L, S, generator=g) > 0.5
    mask[..., int(torch.randint(0, S, (1,), generator=g))] = True  # every query keeps a key ...
    if seed > 0:
        mask[1, 0] = False  # ... except this one, which has nothing to look at
        mask[0, 0] = True  # and this one sees every key
    return scores, mask


def _masked(scores: torch.Tensor, mask: torch.Tensor, fill: float = float("-inf")) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, fill), dim=-1)


def _reference(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return attention.percentages(scores, attn_mask=mask)


def _with_empty_rows_fixed(wrong: Callable) -> list[Callable]:
    """A wrong answer, and the same answer after the learner's fixes for empty rows (NaN -> 0, or no key -> 0):
    such a fix must not hide the mistake underneath."""
    def nan_to_zero(s, m):
        return wrong(s, m).nan_to_num(0.0)

    def no_key_to_zero(s, m):
        return wrong(s, m).masked_fill(~m.any(dim=-1, keepdim=True), 0.0)

    return [wrong, nan_to_zero, no_key_to_zero, lambda s, m: no_key_to_zero(s, m).nan_to_num(0.0)]


_BASE_MISTAKES = [
    (lambda scores, mask: _masked(scores, ~mask), HINTS["mask_fill_allowed"]),
    (lambda scores, mask: torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0), HINTS["mask_after_softmax"]),
    (lambda scores, mask: torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1), HINTS["mask_multiplied"]),
    (lambda scores, mask: torch.softmax(scores * mask, dim=-1), HINTS["mask_multiplied"]),
    (lambda scores, mask: torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-2), HINTS["softmax_dim_-2"]),
]

MASKED_SOFTMAX_MISTAKES = [
    *[(variant, hint) for wrong, hint in _BASE_MISTAKES for variant in _with_empty_rows_fixed(wrong)],
    (_masked, HINTS["fully_masked_nan"]),
    (lambda scores, mask: _masked(scores, mask, fill=-1e9), HINTS["fully_masked_finite"]),
]

_BY_HAND = ("apply the mask yourself, with masked_fill and torch.softmax: your function called {call}, which does "
            "it for you.")

#: What the exercise may use: masked_fill, torch.softmax and plain PyTorch operations. The package's masked softmax
#: and every attention function around it (``al.memory_efficient_attention`` with identity keys and values
#: included), PyTorch's fused attention and its private ``torch._safe_softmax`` do the exercise for you.
ALLOWED = Allowed(PLAIN | SOFTMAX | {"matmul"}, said="masked_fill, torch.softmax and " + PLAIN_SAID.split(": ")[1],
                  library_hint=_BY_HAND, instead=dict.fromkeys(("scaled_dot_product_attention", "_safe_softmax",
                                                                "_masked_softmax"), _BY_HAND), own_helpers=False)
#: The sliding-window mask: plain PyTorch operations, and the package's causal mask (lesson 08 builds on it).
WINDOW_ALLOWED = Allowed(PLAIN, said=PLAIN_SAID, functions=frozenset({causal_mask}),
                         library_hint="build the window yourself (from comparisons of positions, or tril and triu); "
                                      "your function called {call}, which makes it for you.", own_helpers=False)


#: The hint for a softmax taken before masking, then renormalised.
RENORMALISED = ("mask before the softmax. A softmax over every key, then the blocked weights zeroed and the rest "
                "divided by their sum, is the same on paper, but when a blocked key scores far above the allowed "
                "ones their weights underflow to 0 in the softmax, and the renormalisation is 0 / 0. Fill the "
                "blocked scores with float('-inf') first: scores.masked_fill(~mask, float('-inf')).")


#: The hint for a blocked key filled with a finite number (``-1e9``) that allowed scores can fall below.
FINITE_FILL = ("your weights put something on blocked keys: a finite fill (-1e9, -1e4, or scores - 1e9 * ~mask) "
               "blocks a key only while every allowed score stays well above it, and here the allowed scores are "
               "around -1e10 (the blocked ones far above them). Fill the blocked scores with float('-inf'): "
               "scores.masked_fill(~mask, float('-inf')), and give a row with no key at all zeros.")


def _on_blocked_keys(got, expected, inputs) -> bool:
    """Do the weights ``got`` put anything on a key the mask blocks?"""
    return bool(((got.nan_to_num(1.0) != 0) & ~inputs[1]).any())


def check_masked_softmax(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``masked_softmax(scores, mask)``: block with ``-inf`` where ``mask`` is False, then softmax.

    Built step by step in ``notebooks/08_masking.ipynb``. It runs on three fixed inputs (random scores and
    masks from fixed seeds); in two of them a query has all its keys blocked: its weights must be exact zeros
    (it has nothing to look at), not NaN and not a uniform spread, as in :func:`attention_lib.percentages`,
    which the exercise may not call.

    Args:
        fn: ``(scores (N, L, S), mask (N, L, S) bool, True = may attend) -> weights (N, L, S)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (swapped convention,
        masking after the softmax, filling with 0 or multiplying by the mask, the wrong softmax dimension, NaN
        or a uniform spread on a fully masked row), also when a fix for empty rows (``nan_to_num``) sits on top.

    Example:
        >>> def solution(scores, mask):
        ...     weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        ...     return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # no key at all: zeros
        >>> check_masked_softmax(solution).status
        'passed'
        >>> print(check_masked_softmax(lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1)))
        ❌ masked softmax: not quite. Hint: a query whose keys are all blocked has -inf everywhere, ...
    """
    name = "masked softmax"
    scores, mask = _scores_and_mask(1)
    underflow = torch.where(mask, scores, scores + 150.0)  # every blocked key far above the allowed ones
    below = torch.where(mask, scores - 1e10, scores + 1e10)  # every allowed score below -1e9, the blocked far above
    result = check_function(fn, _reference, _scores_and_mask, name=name, mistakes=MASKED_SOFTMAX_MISTAKES,
                            allowed=ALLOWED, float64=True, backward=True, keep_inputs=True,
                            awkward=[Awkward("rows whose allowed weights underflow (their blocked keys score 150 "
                                             "higher)", (underflow, mask), RENORMALISED),
                                     loud((scores, mask), 60.0, 0, hint=HINTS["naive_exp"]),
                                     Awkward("allowed scores far below zero (around -1e10; the blocked ones around "
                                             "+1e10)", (below, mask), FINITE_FILL, present=_on_blocked_keys)],
                            shape_hint="the weights have the scores' shape (N, L, S): mask the scores, do not "
                                       "index them.")
    if not result.passed:
        return result
    return CheckResult("passed", f"✅ {name}: correct on three fixed inputs (random scores and masks; in two, a query "
                                 f"has every key blocked){also_checked(True, True)}. Well done!")
