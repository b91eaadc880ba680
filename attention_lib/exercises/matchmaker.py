"""The exercise of ``notebooks/03_matchmaker.ipynb``: write the matchmaker, ``scores = query @ keyᵀ``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import matchmaker
from .checker import CheckResult, check_function

#: (N, L, S, E) for each trial: the first is square on purpose, so that a missing or wrong transpose still
#: runs and can be recognised; the others tell L, S and E apart and add batch dimensions.
_SIZES = ((4, 4, 4, 4), (2, 3, 5, 6), (3, 2, 4, 5))

_TRANSPOSE_HINT = ("did you transpose the key? query is (..., L, E) and key is (..., S, E); "
                   "key.transpose(-2, -1) is (..., E, S), so that (..., L, E) @ (..., E, S) -> (..., L, S).")


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(300 + seed)
    batch = (n,) if seed < 2 else (n, 2)  # the last trial has two batch dimensions, e.g. (N, H)
    return torch.randn(*batch, L, E, generator=g), torch.randn(*batch, S, E, generator=g)


def _reverse_all(x: torch.Tensor) -> torch.Tensor:
    return x.permute(*range(x.dim() - 1, -1, -1))  # what the deprecated x.T does to a batched tensor


_MISTAKES = [
    (lambda q, k: q @ k, _TRANSPOSE_HINT),
    (lambda q, k: k @ q.transpose(-2, -1),
     "rows must be queries and columns keys: put the query first, query @ key.transpose(-2, -1) -> (..., L, S)."),
    (lambda q, k: q @ _reverse_all(k),
     "key.T reverses every dimension of a batched tensor; use key.transpose(-2, -1) (or key.mT) to flip only "
     "the last two."),
    (lambda q, k: q @ k.transpose(-2, -1) / q.size(-1) ** 0.5,
     "the matchmaker only multiplies: dividing by √d_k is the scaler's job (lesson 04)."),
]


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
        ❌ matchmaker: not quite. Hint: did you transpose the key? ...
    """
    result = check_function(fn, matchmaker, _inputs, name="matchmaker", mistakes=_MISTAKES,
                            shape_hint="the scores have one row per query and one column per key: (..., L, S).")
    if result.status == "error" and ("multiplied" in result.message or "Expected size" in result.message):
        return CheckResult("error", f"{result.message}\nHint: {_TRANSPOSE_HINT}")
    return result
