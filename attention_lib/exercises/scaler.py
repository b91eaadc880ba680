"""The exercise of ``notebooks/04_scaler.ipynb``: scaled scores, ``query @ keyᵀ / √d_k``."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import matchmaker, scaler
from .checker import CheckResult, check_function

#: (N, L, S, E) per trial: L, S and E all differ, so using the wrong size for d_k gives a different answer.
_SIZES = ((2, 3, 5, 16), (1, 4, 6, 64), (3, 2, 7, 9))


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(400 + seed)
    return torch.randn(n, L, E, generator=g), torch.randn(n, S, E, generator=g)


def _scaled_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    return scaler(matchmaker(query, key), query.size(-1))


def _raw(q, k):
    return q @ k.transpose(-2, -1)  # (N, L, E) @ (N, E, S) -> (N, L, S)


_MISTAKES = [
    (_raw, "you computed the raw scores; now divide them by math.sqrt(d_k)."),
    (lambda q, k: _raw(q, k) / q.size(-1), "divide by the square root of d_k, math.sqrt(d_k), not by d_k itself."),
    (lambda q, k: _raw(q, k) * math.sqrt(q.size(-1)), "divide by √d_k; you multiplied by it."),
    (lambda q, k: _raw(q, k) / math.sqrt(k.size(-2)),
     "d_k is the size of each query and key vector, query.size(-1), not the number of keys S."),
    (lambda q, k: _raw(q, k) / math.sqrt(q.size(-2)),
     "d_k is the size of each query vector, query.size(-1), not the number of queries L."),
    (lambda q, k: _raw(q, k) / math.sqrt(q.size(0)),
     "d_k is the last dimension, query.size(-1); size(0) is the batch size."),
]


def check_scaled_scores(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(query, key) -> scaled scores`` against ``scaler(matchmaker(query, key), E)``.

    Built step by step in ``notebooks/04_scaler.ipynb``. The inputs are random ``query (N, L, E)`` and
    ``key (N, S, E)`` with ``L``, ``S`` and ``E`` all different; the expected result is ``(N, L, S)``.

    Args:
        fn: the learner's function.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> check_scaled_scores(lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).status
        'passed'
        >>> print(check_scaled_scores(lambda q, k: q @ k.transpose(-2, -1) / q.size(-1)).message)
        ❌ scaled scores: not quite. Hint: divide by the square root of d_k, ...
    """
    return check_function(fn, _scaled_scores, _inputs, name="scaled scores", mistakes=_MISTAKES,
                          shape_hint="one score per (query, key) pair: query @ key.transpose(-2, -1) is (N, L, S).")
