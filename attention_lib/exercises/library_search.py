"""The exercise of lesson 02: a soft lookup for a queue of readers, each with one question in a library of its own.

The learner writes ``soft_lookup(query, key, value)`` for ``query (N, E)`` (one question per reader), ``key (N, S, E)``
and ``value (N, S, Ev)`` (each reader's own library): for each reader, one score per key of its library, scaled by
``1 / sqrt(E)``, turned into weights by a softmax, and the answer is the weighted mix of its **values**, ``(N, Ev)``.
The lesson's search asks its questions as rows of one matrix; here each question must meet only its own library,
which ``query @ key.transpose(-2, -1)`` does not do (it pairs every question with every library).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import calculate_attention
from ._again import Awkward, loud
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, check_function
from ._hints import HINTS, recipe_mistakes

#: (N, S, E, Ev) of each trial. The first has E == Ev, so that mixing the keys instead of the values is caught
#: with its own hint rather than as a shape error; N, S, E and Ev differ otherwise, so that √S or √Ev in place of
#: √E gives a different answer, and a question that meets every library shows up as a shape (N, N, Ev). The last two
#: have one reader (N = 1) and one feature per value (Ev = 1), where ``.squeeze()`` drops more than the question's
#: own dimension.
_TRIALS = ((2, 4, 3, 3), (3, 5, 4, 2), (4, 6, 2, 5), (1, 3, 4, 2), (3, 4, 3, 1))


def _inputs(trial: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    N, S, E, Ev = _TRIALS[trial % len(_TRIALS)]
    g = torch.Generator().manual_seed(200 + trial)
    query = torch.randn(N, E, generator=g)  # (N, E): one question per reader
    key = torch.randn(N, S, E, generator=g)  # (N, S, E): each reader's own keys
    value = torch.randn(N, S, Ev, generator=g)  # (N, S, Ev): and values
    return query, key, value


def _square_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As many readers as keys, N = S = 3: a reduction over the wrong dimension keeps the right shape."""
    g = torch.Generator().manual_seed(299)
    return torch.randn(3, 4, generator=g), torch.randn(3, 3, 4, generator=g), torch.randn(3, 3, 2, generator=g)


def _one_row(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor):
    return query.unsqueeze(-2), key, value  # each question a batch of L = 1: (N, 1, E)


def _reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    # (N, 1, E) against (N, S, E) and (N, S, Ev) -> (N, 1, Ev) -> (N, Ev)
    return calculate_attention(*_one_row(query, key, value))[0].squeeze(-2)


def _hard(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    best = (key @ query.unsqueeze(-1)).squeeze(-1).argmax(dim=-1)  # (N, S, E) @ (N, E, 1) -> (N, S) -> (N,)
    return value[torch.arange(value.size(0)), best]  # (N, Ev)


#: Typical wrong answers: the recipe's slips for each reader's one question, and the hard lookup.
MISTAKES = [
    *recipe_mistakes(("blend_keys", "no_scale", "scale_by_d_k", "scale_multiplied", "scale_half",
                      "scale_half_inline", "scale_by_S",
                      "scale_by_Ev", "scale_by_N", "no_softmax", "softmax_dim_0"),
                     result=lambda r: r.output.squeeze(-2), inputs=_one_row),
    (_hard, HINTS["hard_lookup"]),
]

#: What a question that met every library looks like, and why.
EVERY_LIBRARY = ("your answer is (N, N, Ev): each reader's question met every library. `@` treats a 2-D query "
                 "(N, E) as one matrix of N questions, so query @ key.transpose(-2, -1) is (N, N, S). Give each "
                 "question its own dimension of size 1, query.unsqueeze(-2) (N, 1, E), so that it meets only its "
                 "own keys, and drop that dimension again at the end.")


#: Plain PyTorch operations; the package's attention and PyTorch's fused attention are the answer itself.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX, said=PLAIN_SAID, library_hint=HINTS["library_shortcut"],
                  instead={"scaled_dot_product_attention": HINTS["library_shortcut"]}, own_helpers=False)


def _shape_hint(args: tuple, got: tuple | None) -> str:
    query, key, value = args
    N, S, Ev = key.size(0), key.size(1), value.size(-1)
    if got == (N, N, Ev):
        return EVERY_LIBRARY
    if got is not None and len(got) < 2 and (N == 1 or Ev == 1):
        which = "one reader (N = 1)" if N == 1 else "values of one feature (Ev = 1)"
        return (f"with {which}, your answer lost that dimension too: .squeeze() drops every dimension of size 1. "
                f"Drop only the question's own, .squeeze(-2), so that the answer stays (N, Ev).")
    if got == (N, 1, Ev):
        return "one answer per reader, (N, Ev): drop the size-1 dimension with .squeeze(-2)."
    if got == (N, S):
        return "those are the weights, (N, S); the answer mixes the values with them: (N, 1, S) @ (N, S, Ev)."
    return ("one answer per reader: (N, Ev). Each reader's weights (S,) mix its own values (S, Ev) into one "
            "value-sized vector.")


def check_soft_lookup(soft_lookup: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check the learner's ``soft_lookup(query, key, value)`` of ``notebooks/02_library_search.ipynb``.

    Built step by step in ``notebooks/02_library_search.ipynb``; the worked solution is in
    ``notebooks/solutions/02_library_search_solution.ipynb``. Five fixed queues of readers (one with a single
    reader, one with values of one feature; the first again in float64); only plain PyTorch operations are allowed:
    the library's attention (``al.calculate_attention`` and the rest), PyTorch's ``scaled_dot_product_attention`` and
    a detour out of PyTorch are refused.

    Args:
        soft_lookup: ``(query, key, value) -> answer`` with ``query: (N, E)``, one question per reader, and
            ``key: (N, S, E)``, ``value: (N, S, Ev)``, each reader's library; it must return, for each reader n,
            ``softmax(key[n] @ query[n] / sqrt(E)) @ value[n]``, shape ``(N, Ev)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` that reads "✅ ..." when correct, or says what to fix.

    Example:
        >>> def soft_lookup(query, key, value):
        ...     scores = (key * query.unsqueeze(-2)).sum(dim=-1)  # (N, S, E) * (N, 1, E) -> (N, S)
        ...     weights = torch.softmax(scores / query.size(-1) ** 0.5, dim=-1)  # (N, S)
        ...     return (weights.unsqueeze(-2) @ value).squeeze(-2)  # (N, 1, S) @ (N, S, Ev) -> (N, Ev)
        >>> check_soft_lookup(soft_lookup).status
        'passed'
        >>> print(check_soft_lookup(lambda q, k, v: torch.softmax(q @ k.mT / q.size(-1) ** 0.5, dim=-1) @ v))
        ❌ soft_lookup: expected shape (2, 3), but got (2, 2, 3). Hint: your answer is (N, N, Ev): ...
    """
    return check_function(
        soft_lookup, _reference, _inputs, name="soft_lookup", mistakes=MISTAKES, shape_hint=_shape_hint,
        allowed=ALLOWED, float64=True, trials=len(_TRIALS), keep_inputs=True,
        awkward=[loud(_inputs(0), 30.0, 0, 1, hint=HINTS["naive_exp"]),
                 Awkward("as many readers as keys (N = S = 3), where a sum or a max over the wrong dimension "
                         "still has the right shape", _square_inputs(),
                         "a max, a sum or a softmax ran over the readers (dim 0) instead of the keys, or lost its "
                         "dimension (keepdim=False) and broadcast along the wrong one: with N = S it still fits. "
                         "Reduce over the keys, dim=-1, with keepdim=True.")],
        inputs_said=f"{len(_TRIALS)} fixed queues of readers, with different numbers of readers, keys and features "
                    f"(one with a single reader, one with values of one feature)",
    )
