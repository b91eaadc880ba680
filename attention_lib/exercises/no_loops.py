"""The exercise of ``notebooks/07_no_loops.ipynb``: turn a loop over words into matrix operations.

The notebook builds ``loop_weights`` by hand, filling the attention weights one query and one key at a time
(the library's loop version is :func:`attention_lib.loop_attention`).
The learner writes ``weights_no_loops(query, key)``, the same numbers with no Python loop, for any batch
dimensions: ``query (N, ..., L, E)`` and ``key (N, ..., S, E)`` give weights ``(N, ..., L, S)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import matchmaker, percentages, scaler
from .checker import CheckResult, check_function

#: Trial 0 is square (L = S = E) so that a missing transpose runs and earns its hint; the others are not.
_SHAPES = ((2, 4, 4, 4), (3, 5, 7, 6), (2, 6, 3, 8))  # (N, L, S, E)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SHAPES[seed % len(_SHAPES)]
    g = torch.Generator().manual_seed(2000 + seed)
    return torch.randn(n, L, E, generator=g), torch.randn(n, S, E, generator=g)


def _reference(query, key):
    return percentages(scaler(matchmaker(query, key), query.size(-1)))


def _scaled(scores, query):
    return scores / math.sqrt(query.size(-1))


_MISTAKES = [
    (lambda q, k: torch.softmax(_scaled(q @ k, q), dim=-1),
     "flip key sideways first: query @ key.transpose(-2, -1), so that (L, E) @ (E, S) -> (L, S)."),
    (lambda q, k: torch.softmax(_scaled(k @ q.transpose(-2, -1), q), dim=-1),
     "rows are queries and columns are keys: query @ key.transpose(-2, -1), not key @ query.transpose(-2, -1)."),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1), dim=-1),
     "the loop divides every dot product by math.sqrt(d_k); divide the whole score matrix once."),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / q.size(-1), dim=-1),
     "divide by the square root of d_k, math.sqrt(d_k), not by d_k itself."),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-2)), dim=-1),
     "d_k is the size of each query vector, query.size(-1), not the number of words."),
    (lambda q, k: torch.softmax(_scaled(q @ k.transpose(-2, -1), q), dim=-2),
     "the loop takes a softmax along each query's row (over the keys): use dim=-1, not dim=-2."),
    (lambda q, k: torch.softmax(_scaled(q @ k.transpose(-2, -1), q), dim=0),
     "the loop takes a softmax along each query's row (over the keys): use dim=-1, not dim=0."),
    (lambda q, k: _scaled(q @ k.transpose(-2, -1), q),
     "the loop ends each row with a softmax: apply torch.softmax(scores, dim=-1) to the whole matrix."),
]


def check_weights_no_loops(fn: Callable) -> CheckResult:
    """Check ``weights_no_loops(query, key)``: the notebook's ``loop_weights`` without loops, for any batch dimensions.

    The exercise of ``notebooks/07_no_loops.ipynb``. The learner's function is run on three fresh random
    batches ``query (N, L, E)``, ``key (N, S, E)`` (one of them square) and compared with
    ``percentages(scaler(matchmaker(query, key), E))``; typical slips get their own hint.

    Args:
        fn: ``(query (N, L, E), key (N, S, E)) -> weights (N, L, S)``.

    Returns:
        A :class:`~attention_lib.exercises.checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> check_weights_no_loops(lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5,
        ...                                                   dim=-1)).status
        'passed'
        >>> print(check_weights_no_loops(lambda q, k: torch.softmax(q @ k.transpose(-2, -1), dim=-1)))
        ❌ weights_no_loops: not quite. Hint: the loop divides every dot product by math.sqrt(d_k); divide ...
    """
    return check_function(
        fn, _reference, _inputs, name="weights_no_loops", mistakes=_MISTAKES,
        shape_hint="the weights are (N, L, S): one row per query, one column per key, for every sentence; "
                   "use query @ key.transpose(-2, -1) (it handles the batch dimension N for you).",
    )
