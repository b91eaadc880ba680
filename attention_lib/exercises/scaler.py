"""The exercise of ``notebooks/04_scaler.ipynb``: scaled scores, ``query @ keyᵀ / √d_k``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import matchmaker, scaler
from ._checker import CheckResult, check_function
from ._hints import recipe_mistakes

#: (N, L, S, E) per trial: L, S, E and N all differ, so using the wrong size for d_k gives a different answer;
#: the first is square in L, S and E so that a missing transpose runs and earns its hint.
_SIZES = ((2, 5, 5, 5), (3, 4, 6, 16), (1, 2, 7, 9))


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(400 + seed)
    return torch.randn(n, L, E, generator=g), torch.randn(n, S, E, generator=g)


def _scaled_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    return scaler(matchmaker(query, key), query.size(-1))


#: Typical wrong answers: the matchmaker's slips, and each wrong way to scale.
MISTAKES = [*recipe_mistakes(("no_transpose", "reversed_scores", "no_scale", "scale_by_d_k", "scale_multiplied",
                             "scale_by_S", "scale_by_L", "scale_by_N"), result=lambda r: r.scaled),
            *recipe_mistakes(("scaled_then_softmax",), result=lambda r: torch.softmax(r.scaled, dim=-1))]


def check_scaled_scores(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(query, key) -> scaled scores`` against ``scaler(matchmaker(query, key), E)``.

    Built step by step in ``notebooks/04_scaler.ipynb``. The inputs are random ``query (N, L, E)`` and
    ``key (N, S, E)`` with ``L``, ``S`` and ``E`` all different; the expected result is ``(N, L, S)``.

    Args:
        fn: the learner's function.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> check_scaled_scores(lambda q, k: q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).status
        'passed'
        >>> print(check_scaled_scores(lambda q, k: q @ k.transpose(-2, -1) / q.size(-1)).message)
        ❌ scaled scores: not quite. Hint: divide by the square root of d_k, ...
    """
    return check_function(fn, _scaled_scores, _inputs, name="scaled scores", mistakes=MISTAKES,
                          shape_hint="one score per (query, key) pair: query @ key.transpose(-2, -1) is (N, L, S).")
