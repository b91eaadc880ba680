"""The exercise of ``notebooks/05_percentages.ipynb``: a softmax by hand that cannot overflow."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import percentages
from .checker import CheckResult, check_function

#: (N, L, S) per trial; the first is a cube so that a max without keepdim=True still broadcasts (wrongly).
_SIZES = ((3, 3, 3), (2, 3, 5), (1, 4, 6))

#: Added to whole rows: one row far above the others, one far below. exp(200) overflows float32 and
#: exp(-200) underflows to 0, so only a softmax that subtracts each row's own max gets every row right.
_ROW_OFFSETS = (0.0, 200.0, -200.0, 30.0)


def _inputs(seed: int) -> tuple[torch.Tensor]:
    n, L, S = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(500 + seed)
    offsets = torch.tensor(_ROW_OFFSETS[:L]).reshape(L, 1)  # (L, 1): the same offset along each row
    return (3.0 * torch.randn(n, L, S, generator=g) + offsets,)


def _normalise(e: torch.Tensor) -> torch.Tensor:
    return e / e.sum(dim=-1, keepdim=True)


_MISTAKES = [
    (lambda s: _normalise(s.exp()),
     "exp of a large score overflows to inf, and inf / inf is NaN: subtract each row's max first, "
     "scores - scores.amax(dim=-1, keepdim=True)."),
    (lambda s: _normalise((s - s.max()).exp()),
     "subtract each row's own max, scores.amax(dim=-1, keepdim=True), not the max of the whole tensor: "
     "rows far below it underflow to 0 / 0."),
    (lambda s: _normalise((s - s.amax(dim=-1)).exp()),
     "keep the reduced dimension: scores.amax(dim=-1, keepdim=True) is (..., L, 1) and lines up with each row."),
    (lambda s: (s - s.amax(dim=-1, keepdim=True)).exp(),
     "divide by each row's sum, e.sum(dim=-1, keepdim=True), so that every row adds up to 1."),
    (lambda s: (s - s.amax(dim=-1, keepdim=True)).exp() / (s - s.amax(dim=-1, keepdim=True)).exp().sum(dim=-1),
     "keep the reduced dimension when you sum: e.sum(dim=-1, keepdim=True)."),
    (lambda s: torch.softmax(s, dim=-2),
     "the softmax runs over the keys, the last dimension (dim=-1): each query's row must add up to 1."),
    (lambda s: torch.softmax(s, dim=0),
     "the softmax runs over the keys, the last dimension (dim=-1), not over the batch (dim=0)."),
]


def check_stable_softmax(fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(scores) -> weights`` against :func:`attention_lib.percentages`.

    Built step by step in ``notebooks/05_percentages.ipynb``. The inputs are random scores ``(N, L, S)``
    with some rows around ``+200`` and ``-200``, where a naive ``exp`` overflows or underflows in float32.

    Args:
        fn: the learner's softmax over the last dimension.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> check_stable_softmax(lambda s: torch.softmax(s, dim=-1)).status
        'passed'
        >>> print(check_stable_softmax(lambda s: s.exp() / s.exp().sum(dim=-1, keepdim=True)).message)
        ❌ stable softmax: not quite. Hint: exp of a large score overflows to inf, ...
    """
    return check_function(fn, percentages, _inputs, name="stable softmax", mistakes=_MISTAKES,
                          shape_hint="the weights have the same shape as the scores, (N, L, S).")
