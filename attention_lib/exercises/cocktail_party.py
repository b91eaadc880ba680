"""The exercise of lesson 01: every word tunes in to all the words, with a given focus.

The learner writes ``tune_in(x, focus)``: scores ``x @ xᵀ`` (dot products of the word vectors), multiplied
by ``focus``, turned into weights by a softmax over each row, and each word's new meaning is the weighted
average ``weights @ x``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import calculate_attention
from ._checker import CheckResult, check_function
from ._hints import HINTS

#: The (L, E) sizes and the focus of each trial: L != E, so that a transposed result shows up as a shape error,
#: and focus != 1 and != 1/√E, so that a forgotten or replaced focus shows up as a wrong value.
_TRIALS = ((4, 3, 2.0), (5, 4, 0.5), (3, 6, 3.0))


def _inputs(trial: int) -> tuple[torch.Tensor, float]:
    L, E, focus = _TRIALS[trial % len(_TRIALS)]
    g = torch.Generator().manual_seed(100 + trial)
    return torch.randn(L, E, generator=g), focus


def _reference(x: torch.Tensor, focus: float) -> torch.Tensor:
    return calculate_attention(x, x, x, scale=focus)[0]


def _scores(x: torch.Tensor) -> torch.Tensor:
    return x @ x.transpose(-2, -1)  # (L, E) @ (E, L) -> (L, L)


#: Typical wrong answers and the hint each deserves.
MISTAKES = [
    (lambda x, focus: (focus * _scores(x)) @ x, HINTS["no_softmax"]),
    (lambda x, focus: torch.softmax(focus * _scores(x), dim=0) @ x, HINTS["softmax_dim_0"]),
    (lambda x, focus: torch.softmax(_scores(x), dim=-1) @ x, HINTS["focus_missing"]),
    (lambda x, focus: torch.softmax(_scores(x) / focus, dim=-1) @ x, HINTS["focus_divided"]),
    (lambda x, focus: focus * (torch.softmax(_scores(x), dim=-1) @ x), HINTS["focus_outside"]),
    (lambda x, focus: torch.softmax(_scores(x) / math.sqrt(x.size(-1)), dim=-1) @ x, HINTS["focus_and_scale"]),
    (lambda x, focus: torch.softmax(focus * _scores(x) / math.sqrt(x.size(-1)), dim=-1) @ x,
     HINTS["focus_extra_scale"]),
]


def check_tune_in(tune_in: Callable[[torch.Tensor, float], torch.Tensor]) -> CheckResult:
    """Check the learner's ``tune_in(x, focus)`` of ``notebooks/01_cocktail_party.ipynb`` on random inputs.

    Built step by step in ``notebooks/01_cocktail_party.ipynb``; the worked solution is in
    ``notebooks/solutions/01_cocktail_party_solution.ipynb``.

    Args:
        tune_in: ``(x, focus) -> new meanings``, with ``x`` of shape ``(L, E)`` (one vector per word) and
            ``focus`` a positive float; it must return ``softmax(focus * x @ xᵀ, dim=-1) @ x``, shape ``(L, E)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` that reads "✅ ..." when correct, or says what to fix.

    Example:
        >>> check_tune_in(lambda x, focus: torch.softmax(focus * x @ x.T, dim=-1) @ x).status
        'passed'
    """
    return check_function(
        tune_in, _reference, _inputs, name="tune_in", mistakes=MISTAKES,
        shape_hint="each word gets a new vector of the same size as before, so the result is (L, E): "
                   "return weights @ x, where weights is (L, L) and x is (L, E).",
    )
