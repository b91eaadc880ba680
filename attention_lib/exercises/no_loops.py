"""The exercise of ``notebooks/07_no_loops.ipynb``: turn a loop over words into matrix operations.

The notebook builds ``loop_weights`` by hand, filling the attention weights one query and one key at a time
(the library's loop version is :func:`attention_lib.loop_attention`).
The learner writes ``weights_no_loops(query, key)``, the same numbers with no Python loop, for any batch
dimensions: ``query (N, ..., L, E)`` and ``key (N, ..., S, E)`` give weights ``(N, ..., L, S)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import matchmaker, percentages, scaler
from ._checker import CheckResult, check_function
from ._hints import recipe_mistakes

#: Trial 0 is square (L = S = E) so that a missing transpose runs and earns its hint; the others are not,
#: and each has a different N, L and S, so that a loop over sentences or words changes the number of calls.
_SHAPES = ((2, 4, 4, 4), (3, 5, 7, 6), (1, 6, 3, 8))  # (N, L, S, E)


#: How much larger than the keys the queries are, per trial: in the last, scores reach the hundreds, where exp
#: overflows float32, so a softmax written by hand must subtract each row's max first (lesson 05).
_LOUDNESS = (1.0, 1.0, 100.0)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SHAPES[seed % len(_SHAPES)]
    g = torch.Generator().manual_seed(2000 + seed)
    return _LOUDNESS[seed % 3] * torch.randn(n, L, E, generator=g), torch.randn(n, S, E, generator=g)


def _reference(query, key):
    return percentages(scaler(matchmaker(query, key), query.size(-1)))


#: Typical wrong answers: the matchmaker's, the scaler's and the softmax's slips.
MISTAKES = recipe_mistakes(("no_transpose", "reversed_scores", "no_scale", "scale_by_d_k", "scale_multiplied",
                            "scale_by_S", "scale_by_L", "scale_by_N", "softmax_dim_-2", "softmax_dim_0",
                            "no_softmax", "scale_after_softmax", "naive_exp"), result=lambda r: r.weights)


def check_weights_no_loops(fn: Callable) -> CheckResult:
    """Check ``weights_no_loops(query, key)``: the notebook's ``loop_weights`` without loops, for any batch dimensions.

    The exercise of ``notebooks/07_no_loops.ipynb``. The learner's function is run on three fresh random
    batches ``query (N, L, E)``, ``key (N, S, E)`` (one of them square) and compared with
    ``percentages(scaler(matchmaker(query, key), E))``; typical slips get their own hint. A function whose
    number of PyTorch calls grows with the input (a Python loop over words or sentences) fails too.

    Args:
        fn: ``(query (N, L, E), key (N, S, E)) -> weights (N, L, S)``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> check_weights_no_loops(lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5,
        ...                                                   dim=-1)).status
        'passed'
        >>> print(check_weights_no_loops(lambda q, k: torch.softmax(q @ k.transpose(-2, -1), dim=-1)))
        ❌ weights_no_loops: not quite. Hint: divide the scores by √d_k, math.sqrt(query.size(-1)), before ...
    """
    return check_function(
        fn, _reference, _inputs, name="weights_no_loops", mistakes=MISTAKES, no_loops=True,
        shape_hint="the weights are (N, L, S): one row per query, one column per key, for every sentence; "
                   "use query @ key.transpose(-2, -1) (it handles the batch dimension N for you).",
    )
