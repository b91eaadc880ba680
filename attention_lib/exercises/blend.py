"""The exercise of ``notebooks/06_blend.ipynb``: write the whole five-step ``calculate_attention`` yourself.

The learner's function takes ``query (N, ..., L, E)``, ``key (N, ..., S, E)`` and ``value (N, ..., S, Ev)``
and returns the pair ``(output (N, ..., L, Ev), weights (N, ..., L, S))``, like
:func:`attention_lib.calculate_attention` without a mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import calculate_attention
from .checker import CheckResult, check_function

#: Trial 0 is square (L = S = E = Ev) so that a missing transpose runs and earns its hint; the others are not.
_SHAPES = ((2, 4, 4, 4, 4), (3, 5, 7, 6, 2), (2, 3, 6, 8, 5))  # (N, L, S, E, Ev)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, L, S, E, Ev = _SHAPES[seed % len(_SHAPES)]
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(n, L, E, generator=g), torch.randn(n, S, E, generator=g), torch.randn(n, S, Ev, generator=g)


def _reference(query, key, value):
    return calculate_attention(query, key, value)


def _recipe(query, key, value, *, transpose=True, divide_by=None, softmax_dim=-1, softmax=True, swap=False,
            blend_scores=False):
    """The five steps with one thing done wrong, the way learners often get it wrong."""
    d_k = query.size(-1)
    scores = query @ (key.transpose(-2, -1) if transpose else key)  # (N, L, E) @ (N, E, S) -> (N, L, S)
    scores = scores / (math.sqrt(d_k) if divide_by is None else divide_by(query, key, value))
    weights = torch.softmax(scores, dim=softmax_dim) if softmax else scores
    output = (scores if blend_scores else weights) @ value  # (N, L, S) @ (N, S, Ev) -> (N, L, Ev)
    return (weights, output) if swap else (output, weights)


_MISTAKES = [
    (lambda q, k, v: _recipe(q, k, v, transpose=False),
     "the matchmaker needs key flipped sideways: query @ key.transpose(-2, -1), so (L, E) @ (E, S) -> (L, S)."),
    (lambda q, k, v: _recipe(q, k, v, divide_by=lambda *_: 1.0),
     "you skipped the scaler: divide the scores by math.sqrt(d_k) before the softmax."),
    (lambda q, k, v: _recipe(q, k, v, divide_by=lambda q_, *_: q_.size(-1)),
     "divide by the square root of d_k, math.sqrt(d_k), not by d_k itself."),
    (lambda q, k, v: _recipe(q, k, v, divide_by=lambda q_, *_: math.sqrt(q_.size(-2))),
     "d_k is the size of each query vector, query.size(-1) (the last dimension), not the number of words."),
    (lambda q, k, v: _recipe(q, k, v, divide_by=lambda q_, k_, v_: math.sqrt(v_.size(-1))),
     "d_k is the size of the query and key vectors, query.size(-1), not the size of the value vectors."),
    (lambda q, k, v: _recipe(q, k, v, softmax_dim=-2),
     "take the softmax over the keys, dim=-1, so that each query's row of weights sums to 1."),
    (lambda q, k, v: _recipe(q, k, v, softmax_dim=0),
     "take the softmax over the keys, dim=-1, not over dimension 0 (that mixes different sentences)."),
    (lambda q, k, v: _recipe(q, k, v, blend_scores=True),
     "blend with the percentages (the softmax weights), not with the scaled scores: output = weights @ value."),
    (lambda q, k, v: _recipe(q, k, v, softmax=False),
     "turn the scaled scores into percentages with torch.softmax(..., dim=-1) before the blend."),
    (lambda q, k, v: _recipe(q, k, v, swap=True),
     "return the pair in the order (output, weights), like attention_lib.calculate_attention."),
]


def _pick(fn: Callable, index: int) -> Callable:
    """``fn`` reduced to one item of the pair it returns (0: output, 1: weights)."""

    def picked(query, key, value):
        result = fn(query, key, value)
        return result if result is None or result is Ellipsis else result[index]

    return picked


def _not_a_pair(fn: Callable) -> str | None:
    """What ``fn`` returns instead of a pair of tensors, or ``None`` if it returns a pair (or fails to run)."""
    try:
        result = fn(*_inputs(0))
    except Exception:  # noqa: BLE001 - the checker reports errors and "not attempted" itself
        return None
    if result is None or result is Ellipsis:
        return None
    if isinstance(result, tuple | list):
        if len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result):
            return None
        return f"a {type(result).__name__} of {len(result)} items"
    return f"a single {type(result).__name__}"


def check_calculate_attention(fn: Callable) -> CheckResult:
    """Check a hand-written ``calculate_attention(query, key, value) -> (output, weights)``.

    The exercise of ``notebooks/06_blend.ipynb``. The learner's function is run on three fresh random batches
    (one of them square, ``L = S = E = Ev``) and compared with :func:`attention_lib.calculate_attention`:
    first the weights (steps 1 to 4), then the output (step 5). Typical slips (a missing transpose, no
    scaler, softmax over the wrong dimension, ...) get their own hint.

    Args:
        fn: ``(query (N, L, E), key (N, S, E), value (N, S, Ev)) -> (output (N, L, Ev), weights (N, L, S))``.

    Returns:
        A :class:`~attention_lib.exercises.checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> import attention_lib as al
        >>> check_calculate_attention(al.calculate_attention).status
        'passed'
        >>> def stub(query, key, value):
        ...     raise NotImplementedError
        >>> check_calculate_attention(stub).status
        'not attempted'
    """
    found = _not_a_pair(fn)
    if found is not None:
        return CheckResult("failed", f"❌ calculate_attention: expected the pair (output, weights), but your "
                           f"function returned {found}. End it with `return output, weights`.")
    parts = (
        (1, "weights", "weights are (N, L, S), one row per query and one column per key: "
                       "scores = query @ key.transpose(-2, -1)."),
        (0, "output", "the output is (N, L, Ev): blend with weights @ value, (N, L, S) @ (N, S, Ev)."),
    )
    for index, part, shape_hint in parts:
        result = check_function(
            _pick(fn, index), _pick(_reference, index), _inputs, name=f"calculate_attention ({part})",
            mistakes=[(_pick(wrong, index), hint) for wrong, hint in _MISTAKES], shape_hint=shape_hint,
        )
        if not result.passed:
            return result
    return CheckResult("passed", f"✅ calculate_attention: output and weights correct on {len(_SHAPES)} random "
                       f"inputs. Well done!")
