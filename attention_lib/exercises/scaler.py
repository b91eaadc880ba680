"""The exercise of ``notebooks/04_scaler.ipynb``: scaled scores of a sentence, from its embeddings and two weights.

The lesson scales scores of queries and keys it was given. The exercise starts one step earlier, as a model does:
``x (N, L, d_model)`` holds each word's embedding, ``w_query`` and ``w_key`` ``(d_k, d_model)`` are two weights
stored as ``nn.Linear`` stores them (lesson 02), and the learner projects, scores and scales:
``(x @ w_queryᵀ) @ (x @ w_keyᵀ)ᵀ / √d_k``. The slip it is built to catch: ``d_k`` is the size of the projected
queries, ``w_query.size(0)``, not the size of the embeddings, ``d_model = x.size(-1)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import matchmaker, scaler
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, check_function
from ._hints import HINTS, recipe_mistakes

#: (N, L, d_model, d_k) per trial. The first has L == d_k, so that a missing transpose still runs and earns its
#: hint; d_model differs from d_k everywhere, so that √d_model is caught; the three tell N, L, d_k and d_k / 2
#: apart (a slip that agrees with another on one trial is told apart by the others).
_SIZES = ((2, 6, 8, 6), (3, 4, 5, 9), (4, 3, 10, 7))


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, L, d_model, d_k = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(400 + seed)
    x = torch.randn(n, L, d_model, generator=g)  # (N, L, d_model): one embedding per word
    w_query = torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)  # (d_k, d_model), as nn.Linear's weight
    w_key = torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)
    return x, w_query, w_key


def _project(x: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor):
    # (N, L, d_model) @ (d_model, d_k) -> (N, L, d_k): what nn.Linear(d_model, d_k, bias=False) computes
    return x @ w_query.transpose(-2, -1), x @ w_key.transpose(-2, -1)


def _scaled_scores(x: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor) -> torch.Tensor:
    query, key = _project(x, w_query, w_key)
    return scaler(matchmaker(query, key), query.size(-1))


PROJECTED_ONLY = ("those are the projected queries (N, L, d_k); score them against the keys: "
                  "(N, L, d_k) @ (N, d_k, L).")
FEATURES_MEET = ("one score per pair of words: the words meet, not the features. query @ key.transpose(-2, -1) is "
                 "(N, L, d_k) @ (N, d_k, L) -> (N, L, L).")
BY_D_MODEL = ("divide by √d_k, the size of the projected queries and keys, w_query.size(0) (or query.size(-1) "
              "once you have projected), not by √d_model = x.size(-1), the size of the embeddings: the dot "
              "products add up d_k products, whatever size the words had before.")

#: Typical wrong answers: the matchmaker's slips, each wrong way to scale, and two ways to skip a projection.
MISTAKES = [
    *recipe_mistakes(("no_transpose", "reversed_scores", "no_scale", "scale_by_d_k", "scale_multiplied",
                      "scale_half", "scale_half_inline", "scale_by_numel", "scale_by_L", "scale_by_N"),
                     result=lambda r: r.scaled, inputs=_project),
    *recipe_mistakes(("scaled_then_softmax",), result=lambda r: torch.softmax(r.scaled, dim=-1), inputs=_project),
    (lambda x, wq, wk: (lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(x.size(-1)))(*_project(x, wq, wk)),
     BY_D_MODEL),
    (lambda x, wq, wk: _project(x, wq, wk)[0], PROJECTED_ONLY),
    (lambda x, wq, wk: (lambda q, k: q.transpose(-2, -1) @ k / math.sqrt(q.size(-1)))(*_project(x, wq, wk)),
     FEATURES_MEET),
    (lambda x, wq, wk: _scaled_scores(x, wq, wq),
     "you used w_query for the keys too: the keys come from their own weight, key = x @ w_key.T."),
    (lambda x, wq, wk: _scaled_scores(x, wk, wk),
     "you used w_key for the queries too: the queries come from their own weight, query = x @ w_query.T."),
]


#: Plain PyTorch operations (``F.linear`` included); the package's steps and PyTorch's fused attention are refused.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX, said=PLAIN_SAID, library_hint=HINTS["library_shortcut"],
                  instead={"scaled_dot_product_attention": HINTS["library_shortcut"]}, own_helpers=False)


def _shape_hint(args: tuple, got: tuple | None) -> str:
    x, w_query, _ = args
    N, L, d_model = x.shape
    if got == (N, L, w_query.size(0)):
        return PROJECTED_ONLY
    if got in ((N, d_model, d_model), (N, w_query.size(0), w_query.size(0))):
        return FEATURES_MEET
    return "one score per pair of words: (N, L, L)."


def check_scaled_scores(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(x, w_query, w_key) -> scaled scores`` of ``notebooks/04_scaler.ipynb``.

    Built step by step in ``notebooks/04_scaler.ipynb``. Three fixed inputs: ``x (N, L, d_model)`` and two
    weights ``(d_k, d_model)`` stored as ``nn.Linear`` stores them, with ``d_model != d_k``; the expected result
    is ``(x @ w_queryᵀ) @ (x @ w_keyᵀ)ᵀ / √d_k``, ``(N, L, L)``. The library's steps and PyTorch's
    ``scaled_dot_product_attention`` are refused; ``nn.Linear``-style projections (``x @ w.T``,
    ``F.linear(x, w)``) are the point.

    Args:
        fn: the learner's function.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> def scaled_scores(x, w_query, w_key):
        ...     query, key = x @ w_query.T, x @ w_key.T  # (N, L, d_k) each
        ...     return query @ key.transpose(-2, -1) / query.size(-1) ** 0.5
        >>> check_scaled_scores(scaled_scores).status
        'passed'
        >>> def by_d_model(x, w_query, w_key):
        ...     return (x @ w_query.T) @ (x @ w_key.T).transpose(-2, -1) / x.size(-1) ** 0.5
        >>> print(check_scaled_scores(by_d_model).message)
        ❌ scaled scores: not quite. Hint: divide by √d_k, the size of the projected queries and keys, ...
    """
    return check_function(fn, _scaled_scores, _inputs, name="scaled scores", mistakes=MISTAKES,
                          shape_hint=_shape_hint, allowed=ALLOWED, float64=True, keep_inputs=True,
                          inputs_said="3 fixed sentences, each with d_model different from d_k")
