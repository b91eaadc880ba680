"""The exercise of ``notebooks/06_blend.ipynb``: write the whole five-step ``calculate_attention`` yourself.

The learner's function takes ``query (N, ..., L, E)``, ``key (N, ..., S, E)`` and ``value (N, ..., S, Ev)``
and returns the pair ``(output (N, ..., L, Ev), weights (N, ..., L, S))``, like
:func:`attention_lib.calculate_attention` without a mask.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import blend, calculate_attention, matchmaker, percentages, scaler
from ..loops import loop_attention
from ._checker import CheckResult, check_function
from ._hints import HINTS, recipe_mistakes

#: Trial 0 is square (L = S = E = Ev) so that a missing transpose runs and earns its hint; the others are not.
_SHAPES = ((2, 4, 4, 4, 4), (3, 5, 7, 6, 2), (2, 3, 6, 8, 5))  # (N, L, S, E, Ev)


#: How much larger than the keys the queries are, per trial: in the last, scores reach the hundreds, where exp
#: overflows float32, so a softmax written by hand must subtract each row's max first (lesson 05).
_LOUDNESS = (1.0, 1.0, 100.0)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, L, S, E, Ev = _SHAPES[seed % len(_SHAPES)]
    g = torch.Generator().manual_seed(1000 + seed)
    query = _LOUDNESS[seed % 3] * torch.randn(n, L, E, generator=g)  # (N, L, E)
    return query, torch.randn(n, S, E, generator=g), torch.randn(n, S, Ev, generator=g)  # (N, S, E), (N, S, Ev)


def _reference(query, key, value):
    return calculate_attention(query, key, value)


#: Typical wrong answers, each as the pair (output, weights): every slip of the recipe, and the pair swapped.
MISTAKES = [
    *recipe_mistakes(("no_transpose", "reversed_scores", "no_scale", "scale_by_d_k", "scale_multiplied",
                      "scale_by_S", "scale_by_L", "scale_by_Ev", "scale_by_N", "softmax_dim_-2", "softmax_dim_0",
                      "blend_scores", "blend_keys", "no_softmax", "scale_after_softmax", "naive_exp"),
                     result=lambda r: (r.output, r.weights)),
    (lambda q, k, v: calculate_attention(q, k, v)[::-1], HINTS["swap_pair"]),
]


#: The exercise asks for the five steps in plain PyTorch: the library's steps, its whole recipe and PyTorch's fused
#: attention all fail the check (caught also when called through a helper), like the stable softmax's rule.
FORBIDDEN = {**dict.fromkeys((calculate_attention, matchmaker, scaler, percentages, blend, loop_attention),
                             HINTS["recipe_call"]),
             "scaled_dot_product_attention": HINTS["recipe_call"]}


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
    scaler, √S or √Ev in place of √E, softmax over the wrong dimension, blending the keys, ...) get their own
    hint. The steps are written with plain PyTorch operations: a call to the library's steps or recipe, or to
    ``torch.nn.functional.scaled_dot_product_attention``, fails the check.

    Args:
        fn: ``(query (N, L, E), key (N, S, E), value (N, S, Ev)) -> (output (N, L, Ev), weights (N, L, S))``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> import attention_lib as al
        >>> import math
        >>> def by_hand(query, key, value):
        ...     weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), dim=-1)
        ...     return weights @ value, weights
        >>> check_calculate_attention(by_hand).status
        'passed'
        >>> check_calculate_attention(al.calculate_attention).status
        'failed'
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
            mistakes=[(_pick(wrong, index), hint) for wrong, hint in MISTAKES], shape_hint=shape_hint,
            forbidden=FORBIDDEN,
        )
        if not result.passed:
            return result
    return CheckResult("passed", f"✅ calculate_attention: output and weights correct on {len(_SHAPES)} random "
                       f"inputs. Well done!")
