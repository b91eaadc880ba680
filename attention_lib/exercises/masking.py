"""Checkers for the exercises of ``notebooks/08_masking.ipynb``: build a causal mask, apply a mask.

Masks follow SDPA's convention: a bool mask holds ``True`` where a query **may attend** to a key.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import percentages
from ..masks import causal_mask
from ._checker import CheckResult, check_function
from ._hints import HINTS
from ._running import run_learner


def _sizes(seed: int) -> tuple[int, int]:
    """``(L, S)`` for one trial: square first, then fewer queries than keys, then more."""
    g = torch.Generator().manual_seed(seed)
    L = int(torch.randint(2, 7, (1,), generator=g))
    gap = int(torch.randint(1, 4, (1,), generator=g))
    return [(L, L), (L, L + gap), (L + gap, L)][seed % 3]


def _additive(L: int, S: int) -> torch.Tensor:
    return torch.zeros(L, S).masked_fill(~causal_mask(L, S), float("-inf"))


CAUSAL_MISTAKES = [
    (_additive, HINTS["mask_additive"]),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).triu(), HINTS["mask_triu"]),
    (lambda L, S: ~causal_mask(L, S), HINTS["mask_swapped"]),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=-1), HINTS["mask_no_diagonal"]),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L), HINTS["mask_bottom_right"]),
]


def check_causal_mask(fn: Callable[[int, int], torch.Tensor]) -> CheckResult:
    """Check a learner's ``causal_mask(L, S)``: a bool ``(L, S)`` mask, ``True`` = may attend, top-left aligned.

    Built step by step in ``notebooks/08_masking.ipynb``.

    Args:
        fn: ``(L, S) -> (L, S)`` bool tensor; it is tried with ``L == S``, ``L < S`` and ``L > S``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (``triu``, swapped
        ``True``/``False``, a blocked diagonal, bottom-right alignment, a float mask).

    Example:
        >>> check_causal_mask(lambda L, S: torch.ones(L, S, dtype=torch.bool).tril()).status
        'passed'
        >>> print(check_causal_mask(lambda L, S: torch.ones(L, S, dtype=torch.bool).triu()))
        ❌ causal mask: not quite. Hint: that is the upper triangle (triu): ...
    """
    name = "causal mask"
    result = check_function(fn, causal_mask, _sizes, name=name, mistakes=CAUSAL_MISTAKES,
                            shape_hint="the mask is (L, S): one row per query, one column per key. Did you "
                                       "use L for both sizes?")
    if result.passed:
        got = run_learner(fn, (3, 5)).result  # it ran without error in every trial
        if got.dtype != torch.bool:
            return CheckResult("failed", f"❌ {name}: the pattern is right, but the mask has dtype {got.dtype}. "
                               f"Hint: {HINTS['mask_float']}")
    return result


def _scores_and_mask(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random scores ``(2, L, S)`` and a random bool mask ``(2, L, S)``.

    In the first trial every query keeps at least one key; in the others, the first query of the second
    sentence has all its keys blocked (its weights must be exact zeros).
    """
    g = torch.Generator().manual_seed(seed)
    L, S = _sizes(seed)
    scores = 2 * torch.randn(2, L, S, generator=g)
    mask = torch.rand(2, L, S, generator=g) > 0.5
    mask[..., int(torch.randint(0, S, (1,), generator=g))] = True  # every query keeps a key ...
    if seed > 0:
        mask[1, 0] = False  # ... except this one, which has nothing to look at
    return scores, mask


def _masked(scores: torch.Tensor, mask: torch.Tensor, fill: float = float("-inf")) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, fill), dim=-1)


def _reference(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return percentages(scores, attn_mask=mask)


MASKED_SOFTMAX_MISTAKES = [
    (lambda scores, mask: _masked(scores, ~mask), HINTS["mask_fill_allowed"]),
    (lambda scores, mask: torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0), HINTS["mask_after_softmax"]),
    (lambda scores, mask: torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1), HINTS["mask_multiplied"]),
    (lambda scores, mask: torch.softmax(scores * mask, dim=-1), HINTS["mask_multiplied"]),
    (lambda scores, mask: torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-2), HINTS["softmax_dim_-2"]),
    (_masked, HINTS["fully_masked_nan"]),
    (lambda scores, mask: _masked(scores, mask, fill=-1e9), HINTS["fully_masked_finite"]),
]


def check_masked_softmax(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``masked_softmax(scores, mask)``: block with ``-inf`` where ``mask`` is False, then softmax.

    Built step by step in ``notebooks/08_masking.ipynb``. Some test inputs have a query whose keys are all
    blocked: its weights must be exact zeros (it has nothing to look at), not NaN and not a uniform spread,
    as in :func:`attention_lib.percentages`.

    Args:
        fn: ``(scores (N, L, S), mask (N, L, S) bool, True = may attend) -> weights (N, L, S)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (swapped convention,
        masking after the softmax, filling with 0 or multiplying by the mask, the wrong softmax dimension, NaN
        or a uniform spread on a fully masked row).

    Example:
        >>> def solution(scores, mask):
        ...     weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        ...     return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # no key at all: zeros
        >>> check_masked_softmax(solution).status
        'passed'
        >>> print(check_masked_softmax(lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1)))
        ❌ masked softmax: not quite. Hint: a query whose keys are all blocked has -inf everywhere, ...
    """
    return check_function(fn, _reference, _scores_and_mask, name="masked softmax",
                          mistakes=MASKED_SOFTMAX_MISTAKES,
                          shape_hint="the weights have the scores' shape (N, L, S): mask the scores, do not "
                                     "index them.")
