"""The exercise of ``notebooks/03_matchmaker.ipynb``: the matchmaker without ``@``, from products and sums.

The lesson computes every score with one matrix product, ``query @ key.transpose(-2, -1)``. The exercise asks
for the same scores without it: each score is a dot product (products added up, as the lesson's first cell of
scores does for one pair), and broadcasting can pair every query with every key at once, whatever the batch
dimensions in front. Matrix products in any spelling, the library's matchmaker and Python loops are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import matchmaker
from ._allowed import CREATION, ELEMENTWISE, LAYOUT, METADATA, PRODUCTS, Allowed
from ._checker import CheckResult, check_function
from ._hints import recipe_mistakes

#: (N, L, S, E) for each trial: the first is square on purpose, so that a product of query i with key i only
#: still runs and can be recognised; the others tell L, S and E apart and add batch dimensions.
_SIZES = ((4, 4, 4, 4), (2, 3, 5, 6), (3, 2, 4, 5))


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, L, S, E = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(300 + seed)
    batch = (n,) if seed < 2 else (n, 2)  # the last trial has two batch dimensions, e.g. (N, H)
    return torch.randn(*batch, L, E, generator=g), torch.randn(*batch, S, E, generator=g)


#: The spellings of a product routine that get the hint of :data:`NO_MATMUL` (any other call outside
#: :data:`ALLOWED` is refused too, with the general hint).
MATRIX_PRODUCTS = (*PRODUCTS, "addmv", "chain_matmul", "bilinear", "linalg_matmul", "linalg_vecdot",
                   "linalg_multi_dot", "matrix_power", "linalg_matrix_power", "kron", "cosine_similarity", "cdist")

NO_MATMUL = ("this exercise builds the scores without a matrix product, and your function called {call}. Each "
             "score is a sum of products: multiply a query and a key feature by feature and add up over the last "
             "dimension; broadcasting (lesson 00) pairs every query with every key at once.")

NO_LOOPS = ("no Python loops: your function ran {few} PyTorch operations on the smallest input and {many} on the "
            "largest, so it loops in Python (over words, sentences or features). Broadcasting does every pair at "
            "once: give the queries a size-1 "
            "dimension for the keys, query.unsqueeze(-2) (..., L, 1, E), and the keys one for the queries, "
            "key.unsqueeze(-3) (..., 1, S, E).")

SUMMED_OVER_WORDS = ("you added up over the words. A dot product adds up the features, the last dimension of the "
                     "(..., L, S, E) products: .sum(dim=-1).")

FLIPPED = ("rows are queries and columns are keys: the scores are (..., L, S). Yours are flipped, (..., S, L): "
           "the queries' size-1 dimension goes after their words, query.unsqueeze(-2) (..., L, 1, E), and the "
           "keys' before theirs, key.unsqueeze(-3) (..., 1, S, E).")

#: What the exercise may use: elementwise products and sums, with broadcasting, reshapes and indexing; no product
#: routine in any spelling, and no detour out of PyTorch.
ALLOWED = Allowed(METADATA | LAYOUT | CREATION | ELEMENTWISE | {"sum", "mean", "amax", "max", "prod"},
                  said="elementwise products and sums, with broadcasting (unsqueeze, indexing with None), reshapes and "
                       "indexing", instead=dict.fromkeys(MATRIX_PRODUCTS, NO_MATMUL), library_hint=NO_MATMUL,
                  own_helpers=False)

#: Typical wrong answers: the scores flipped, scaling too early.
MISTAKES = [(wrong, FLIPPED) for wrong, _ in recipe_mistakes(("reversed_scores",), result=lambda r: r.scores)]
MISTAKES += recipe_mistakes(("scaled_in_matchmaker",), result=lambda r: r.scores)
MISTAKES.append((lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-2), SUMMED_OVER_WORDS))
MISTAKES.append((lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).mean(dim=-1),
                 "a dot product adds the products up, .sum(dim=-1); .mean(dim=-1) also divides them by E."))


def _shape_hint(args: tuple, got: tuple | None) -> str:
    query, key = args
    *batch, L, E = query.shape
    S = key.size(-2)
    if got == (*batch, S, L):
        return FLIPPED
    if got == (*batch, L):
        return ("(..., L) is one score per query: query * key multiplies query i with key i only, the diagonal of "
                "the scores. Every query must meet every key: give query a dimension for the keys, "
                "query.unsqueeze(-2) (..., L, 1, E), and key one for the queries, key.unsqueeze(-3) (..., 1, S, E).")
    if got == (*batch, L, E) or got == (*batch, S, E):
        return SUMMED_OVER_WORDS
    if got == (*batch, L, 1):
        return ("the keys need their size-1 dimension in front of their words, key.unsqueeze(-3) (..., 1, S, E), so "
                "that it lines up with the queries' words; the queries get theirs after, query.unsqueeze(-2).")
    if got == (*batch, L, S, E):
        return "those are the products, one per feature: add them up over the last dimension, .sum(dim=-1)."
    return "the scores have one row per query and one column per key: (..., L, S)."


def check_matchmaker(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's matchmaker without ``@``, ``fn(query, key) -> scores``, against ``al.matchmaker``.

    Built step by step in ``notebooks/03_matchmaker.ipynb``. Three fixed inputs ``query (N, ..., L, E)`` and
    ``key (N, ..., S, E)``, one square, one with two batch dimensions; the expected scores are ``(N, ..., L, S)``.
    Only elementwise products and sums, broadcasting, reshapes and indexing are allowed: a product routine in any
    spelling (``@``, ``torch.matmul``, ``torch.linalg.vecdot``, ``einsum``, ``F.linear``, ...), the library's
    matchmaker, a detour out of PyTorch (``.tolist()``, ``.numpy()``) and a Python loop all fail the check, with a
    hint. The first input runs again in float64.

    Args:
        fn: the learner's matchmaker.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> check_matchmaker(lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1)).status
        'passed'
        >>> print(check_matchmaker(lambda q, k: q @ k.transpose(-2, -1)).message)
        ❌ matchmaker: not allowed here. Hint: this exercise builds the scores without a matrix product, ...
    """
    return check_function(fn, matchmaker, _inputs, name="matchmaker", mistakes=MISTAKES, shape_hint=_shape_hint,
                          allowed=ALLOWED, no_loops=True, loop_hint=NO_LOOPS, float64=True, keep_inputs=True,
                          inputs_said="3 fixed test inputs, one square and one with two batch dimensions, with "
                                      "elementwise products and sums only and no Python loop")
