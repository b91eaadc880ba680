"""The exercise of lesson 02: a soft lookup of one query in a library of keys and values.

The learner writes ``soft_lookup(query, key, value)``: one score per key (``key @ query``), scaled by
``1 / sqrt(E)``, turned into weights by a softmax, and the answer is the weighted mix of the **values**
``weights @ value``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import calculate_attention
from ._checker import CheckResult, check_function
from ._hints import HINTS, recipe_mistakes

#: (S, E, Ev) of each trial. The first has E == Ev, so that mixing the keys instead of the values is caught
#: with its own hint rather than as a shape error; S, E and Ev differ otherwise, so that √S or √Ev in place
#: of √E gives a different answer.
_TRIALS = ((4, 3, 3), (5, 4, 2), (6, 2, 5))


def _inputs(trial: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    S, E, Ev = _TRIALS[trial % len(_TRIALS)]
    g = torch.Generator().manual_seed(200 + trial)
    query = torch.randn(E, generator=g)  # (E,)
    key = torch.randn(S, E, generator=g)  # (S, E)
    value = torch.randn(S, Ev, generator=g)  # (S, Ev)
    return query, key, value


def _reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    # One query is a batch of L = 1: (1, E) against (S, E) and (S, Ev) -> (1, Ev) -> (Ev,)
    return calculate_attention(query.unsqueeze(0), key, value)[0].squeeze(0)


#: Typical wrong answers: the recipe's slips on one query (a batch of L = 1), and the hard lookup.
MISTAKES = [
    *recipe_mistakes(("blend_keys", "no_scale", "scale_by_d_k", "scale_multiplied", "scale_by_S", "scale_by_Ev",
                      "no_softmax"),
                     result=lambda r: r.output.squeeze(0), inputs=lambda q, k, v: (q.unsqueeze(0), k, v)),
    (lambda q, k, v: v[(k @ q).argmax()], HINTS["hard_lookup"]),
]


def check_soft_lookup(soft_lookup: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check the learner's ``soft_lookup(query, key, value)`` of ``notebooks/02_library_search.ipynb``.

    Built step by step in ``notebooks/02_library_search.ipynb``; the worked solution is in
    ``notebooks/solutions/02_library_search_solution.ipynb``.

    Args:
        soft_lookup: ``(query, key, value) -> answer`` with ``query: (E,)``, ``key: (S, E)`` and
            ``value: (S, Ev)``; it must return ``softmax(key @ query / sqrt(E)) @ value``, shape ``(Ev,)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` that reads "✅ ..." when correct, or says what to fix.

    Example:
        >>> def soft_lookup(query, key, value):
        ...     return torch.softmax(key @ query / query.size(-1) ** 0.5, dim=-1) @ value
        >>> check_soft_lookup(soft_lookup).status
        'passed'
    """
    return check_function(
        soft_lookup, _reference, _inputs, name="soft_lookup", mistakes=MISTAKES,
        shape_hint="the answer is one value-sized vector (Ev,): the weights (S,) @ value (S, Ev) -> (Ev,). "
                   "Score with key @ query, (S, E) @ (E,) -> (S,).",
    )
