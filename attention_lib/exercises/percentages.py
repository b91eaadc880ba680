"""The exercise of ``notebooks/05_percentages.ipynb``: a softmax by hand that cannot overflow."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import percentages
from ._checker import CheckResult, check_function
from ._hints import HINTS

#: (N, L, S) per trial; the first has N = 1 and L = S, so that a max without keepdim=True still broadcasts
#: (wrongly) and earns its own hint.
_SIZES = ((1, 4, 4), (2, 4, 6), (3, 5, 7))

#: Added to whole rows: one row far above the others, one far below. exp(200) overflows float32 and
#: exp(-200) underflows to 0, so only a softmax that subtracts each row's own max gets every row right.
_ROW_OFFSETS = (0.0, 200.0, -200.0, 0.0, 30.0)

#: Row 3 spreads from -150 to +150: subtracting its min (or its mean) leaves exponents far above 88.
_SPREAD_ROW = 3


def _inputs(seed: int) -> tuple[torch.Tensor]:
    n, L, S = _SIZES[seed % len(_SIZES)]
    g = torch.Generator().manual_seed(500 + seed)
    offsets = torch.tensor(_ROW_OFFSETS[:L]).reshape(L, 1)  # (L, 1): the same offset along each row
    scores = 3.0 * torch.randn(n, L, S, generator=g) + offsets
    scores[:, _SPREAD_ROW] += torch.linspace(-150.0, 150.0, S)[torch.randperm(S, generator=g)]
    return (scores,)


def _by_hand(s: torch.Tensor, shift: torch.Tensor | float, *, sum_keepdim: bool = True,
             normalise: bool = True, sum_dim: int = -1) -> torch.Tensor:
    e = (s - shift).exp()
    if not normalise:
        return e
    return e / (e.sum(dim=sum_dim, keepdim=True) if sum_keepdim else e.sum(dim=sum_dim))


def _row_max(s: torch.Tensor) -> torch.Tensor:
    return s.amax(dim=-1, keepdim=True)  # (N, L, S) -> (N, L, 1)


#: Typical wrong answers and the hint each deserves.
MISTAKES = [
    (lambda s: _by_hand(s, 0.0), HINTS["naive_exp"]),
    (lambda s: _by_hand(s, s.max()), HINTS["global_max"]),
    (lambda s: _by_hand(s, s.amax(dim=-2, keepdim=True)), HINTS["column_max"]),
    (lambda s: _by_hand(s, s.amin(dim=-1, keepdim=True)), HINTS["row_min"]),
    (lambda s: _by_hand(s, s.mean(dim=-1, keepdim=True)), HINTS["row_mean"]),
    (lambda s: _by_hand(s, s.amax(dim=-1)), HINTS["max_no_keepdim"]),
    (lambda s: _by_hand(s, _row_max(s), normalise=False), HINTS["no_normalise"]),
    (lambda s: _by_hand(s, _row_max(s), sum_keepdim=False), HINTS["sum_no_keepdim"]),
    (lambda s: _by_hand(s, _row_max(s), sum_dim=-2), HINTS["sum_dim_-2"]),
    (lambda s: torch.softmax(s, dim=-2), HINTS["softmax_dim_-2"]),
    (lambda s: torch.softmax(s, dim=0), HINTS["softmax_dim_0"]),
]


#: torch.softmax, F.softmax, Tensor.softmax, nn.Softmax, the log_softmax family and torch.special's: all forbidden.
FORBIDDEN = {op: HINTS["softmax_call"] for op in ("softmax", "log_softmax", "special_softmax",
                                                  "special_log_softmax", "_softmax", "_log_softmax")}


def check_stable_softmax(fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(scores) -> weights`` against :func:`attention_lib.percentages`.

    Built step by step in ``notebooks/05_percentages.ipynb``. The inputs are random scores ``(N, L, S)``
    with some rows around ``+200`` and ``-200``, where a naive ``exp`` overflows or underflows in float32,
    and one row that spreads from ``-150`` to ``+150``. The softmax must be built by hand: a call to
    ``torch.softmax``, ``F.softmax``, ``Tensor.softmax`` or a ``log_softmax`` (also through a helper such as
    ``al.percentages``) fails the check.

    Args:
        fn: the learner's softmax over the last dimension.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> def stable_softmax(s):
        ...     e = (s - s.amax(dim=-1, keepdim=True)).exp()
        ...     return e / e.sum(dim=-1, keepdim=True)
        >>> check_stable_softmax(stable_softmax).status
        'passed'
        >>> print(check_stable_softmax(lambda s: s.exp() / s.exp().sum(dim=-1, keepdim=True)).message)
        ❌ stable softmax: not quite. Hint: exp of a large score overflows to inf, ...
        >>> check_stable_softmax(lambda s: torch.softmax(s, dim=-1)).status
        'failed'
    """
    return check_function(fn, percentages, _inputs, name="stable softmax", mistakes=MISTAKES,
                          forbidden=FORBIDDEN, clues={"clamp": HINTS["clamp"], "clip": HINTS["clamp"]},
                          shape_hint="the weights have the same shape as the scores, (N, L, S).")
