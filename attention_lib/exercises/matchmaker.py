"""The exercise of ``notebooks/03_matchmaker.ipynb``: write the matchmaker, ``scores = query @ keyᵀ``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import matchmaker
from ._checker import CheckResult, check_function
from ._hints import recipe_mistakes

#: (N, L, S, E) for each trial: the first is square on purpose, so that a missing or wrong transpose still
#: runs and can be recognised; the others tell L, S and E apart and add batch dimensions.
_SIZES = ((4, 4, 4, 4), (2, 3, 5, 6), (3, 2, 4, 5))


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(300 + seed)
    batch = (n,) if seed < 2 else (n, 2)  # the last trial has two batch dimensions, e.g. (N, H)
    return torch.randn(*batch, L, E, generator=g), torch.randn(*batch, S, E, generator=g)


#: Typical wrong answers: no transpose, the scores flipped, .T on a batched key, scaling too early.
MISTAKES = recipe_mistakes(("no_transpose", "reversed_scores", "dot_T", "scaled_in_matchmaker"),
                           result=lambda r: r.scores)


def check_matchmaker(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(query, key) -> scores`` against :func:`attention_lib.matchmaker`.

    Built step by step in ``notebooks/03_matchmaker.ipynb``. The inputs are random ``query (N, ..., L, E)``
    and ``key (N, ..., S, E)`` with one or two batch dimensions; the expected scores are ``(N, ..., L, S)``.

    Args:
        fn: the learner's matchmaker.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> check_matchmaker(lambda q, k: q @ k.transpose(-2, -1)).status
        'passed'
        >>> print(check_matchmaker(lambda q, k: q @ k).message)
        ❌ matchmaker: not quite. Hint: flip the key sideways: ...
    """
    return check_function(fn, matchmaker, _inputs, name="matchmaker", mistakes=MISTAKES,
                          shape_hint="the scores have one row per query and one column per key: (..., L, S).")
