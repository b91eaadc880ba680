"""The exercise of ``notebooks/05_percentages.ipynb``: the log of the weights, by hand, without ever overflowing.

The lesson makes the softmax safe by subtracting each row's max. Training needs the **log** of the weights (the
cross-entropy loss takes it), and ``log(softmax(s))`` breaks where the lesson's fix does not reach: a weight that
rounded to 0 has log ``-inf``. The exercise applies the same idea one step further, with
``log softmax(s) = (s - m) - log Σ exp(s - m)`` for each row's max ``m``, on scores far beyond float32's and
float64's ``exp`` (about 88 and 709).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._allowed import PLAIN, Allowed
from ._checker import CheckResult, check_function
from ._hints import HINTS

#: (N, L, S, dtype, how far the far rows lie) per trial. The first has N = 1 and L = S, so that a max without
#: keepdim=True still broadcasts (wrongly) and earns its own hint; the last is float64 with rows 1,000 away, so that
#: moving to float64 does not rescue a softmax that skips the max (exp overflows float64 above about 709).
_TRIALS = ((1, 4, 4, torch.float32, 200.0), (2, 4, 6, torch.float32, 200.0), (3, 5, 7, torch.float64, 1000.0))

#: Whole rows moved far up or down (in units of the trial's distance): one far above the others, one far below.
_ROW_OFFSETS = (0.0, 1.0, -1.0, 0.0, 0.15)

#: Row 3 spreads over 1.5 distances (300 in float32, 1,500 in float64): its smallest weights round to exactly 0,
#: so the log of a softmax is -inf there, and subtracting the row's min or mean overflows.
_SPREAD_ROW = 3


def _inputs(seed: int) -> tuple[torch.Tensor]:
    n, L, S, dtype, far = _TRIALS[seed % len(_TRIALS)]
    g = torch.Generator().manual_seed(500 + seed)
    offsets = far * torch.tensor(_ROW_OFFSETS[:L], dtype=torch.float64).reshape(L, 1)  # (L, 1): along each row
    scores = 3.0 * torch.randn(n, L, S, generator=g, dtype=torch.float64) + offsets
    spread = torch.linspace(-0.75 * far, 0.75 * far, S, dtype=torch.float64)
    scores[:, _SPREAD_ROW] += spread[torch.randperm(S, generator=g)]
    return (scores.to(dtype),)


def _reference(scores: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(scores.double(), dim=-1).to(scores.dtype)


def _log_softmax(s: torch.Tensor, shift, *, add_back: bool = True, sum_keepdim: bool = True,
                 sum_dim: int = -1) -> torch.Tensor:
    """(s - shift) - log Σ exp(s - shift): the log of the weights with a slip switched on."""
    shifted = s - shift
    total = shifted.exp().sum(dim=sum_dim, keepdim=True) if sum_keepdim else shifted.exp().sum(dim=sum_dim)
    return (shifted if add_back else s) - total.log()


def _row_max(s: torch.Tensor) -> torch.Tensor:
    return s.amax(dim=-1, keepdim=True)  # (N, L, S) -> (N, L, 1)


def _stable_softmax(s: torch.Tensor) -> torch.Tensor:
    e = (s - _row_max(s)).exp()
    return e / e.sum(dim=-1, keepdim=True)


LOG_OF_ZERO = ("the log of a weight that rounded to 0 is -inf: in float32 a score 104 or more below its row's max "
               "gets weight 0 (745 in float64), so log(softmax(s)) cannot be fixed afterwards. Never compute the "
               "weights: log(exp(s - m) / Σ exp(s - m)) = (s - m) - log Σ exp(s - m), with m each row's max.")
NAIVE = ("exp of a large score overflows to inf (above about 88 in float32 and 709 in float64), and the log of "
         "that sum is inf too. Subtract each row's max m first: log softmax(s) = (s - m) - log Σ exp(s - m).")
NOT_ADDED_BACK = ("you subtracted the max inside the sum but not from the scores: (s - m) - log Σ exp(s - m), both "
                  "with the same m = s.amax(dim=-1, keepdim=True).")
GLOBAL_MAX = ("subtract each row's own max, scores.amax(dim=-1, keepdim=True), not the max of the whole tensor: in a "
              "row far below it every exp underflows to 0, and log 0 = -inf.")
COLUMN_MAX = ("subtract each row's max (dim=-1, over the keys), not each column's (dim=-2): in a row far below its "
              "column's max every exp underflows to 0, and log 0 = -inf.")
SUM_DIM = ("add up each row, exp(s - m).sum(dim=-1, keepdim=True): each query's weights add up to 1 over the keys. "
           "A sum over dim=-2 adds up each column instead.")
MIN_OR_MEAN = ("subtract each row's max, not its min or its mean: the largest score can still lie far above either "
               "(more than 88 in float32, 709 in float64), and its exp overflows to inf.")
WEIGHTS = "those are the weights; this exercise returns their log, every number at most 0."
LOG_CALL = ("this exercise builds the log of the weights by hand from amax, exp, sum and log, but your function "
            "called {call}, which does it for you.")

#: Typical wrong answers and the hint each deserves.
MISTAKES = [
    (lambda s: torch.log(_stable_softmax(s)), LOG_OF_ZERO),
    (lambda s: torch.log(_stable_softmax(s.double())), LOG_OF_ZERO),  # float64 only moves the edge to 745
    (lambda s: _log_softmax(s, 0.0), NAIVE),
    (lambda s: _log_softmax(s.double(), 0.0), NAIVE),  # and the overflow to 709
    (lambda s: _log_softmax(s, _row_max(s), add_back=False), NOT_ADDED_BACK),
    (lambda s: _log_softmax(s, s.max()), GLOBAL_MAX),
    (lambda s: _log_softmax(s, s.amax(dim=-2, keepdim=True)), COLUMN_MAX),
    (lambda s: _log_softmax(s, s.amin(dim=-1, keepdim=True)), MIN_OR_MEAN),
    (lambda s: _log_softmax(s, s.amax(dim=-1)), HINTS["max_no_keepdim"]),
    (lambda s: _log_softmax(s, _row_max(s), sum_keepdim=False), HINTS["sum_no_keepdim"]),
    (lambda s: _log_softmax(s, _row_max(s), sum_dim=-2), SUM_DIM),
    (lambda s: _log_softmax(s, s.amax(dim=-2, keepdim=True), sum_dim=-2), HINTS["softmax_dim_-2"]),
    (_stable_softmax, WEIGHTS),
]

#: The shortcuts that get :data:`LOG_CALL` as their hint: PyTorch's softmax and log-softmax, its log-sum-exp in
#: several spellings, its losses and its fused attention (whose weights are a softmax). Anything else outside
#: :data:`ALLOWED` is refused too, with the general hint.
SHORTCUTS = ("softmax", "log_softmax", "special_softmax", "special_log_softmax", "_softmax", "_log_softmax",
             "_safe_softmax", "logsumexp", "special_logsumexp", "logcumsumexp", "logaddexp", "logaddexp2",
             "cross_entropy", "nll_loss", "scaled_dot_product_attention")

#: What the exercise may use: amax, exp, sum and log, with plain arithmetic, indexing and comparisons (and clamp,
#: whose slip has its own hint).
ALLOWED = Allowed(PLAIN | {"clamp", "clip"}, said="amax, exp, sum and log, with plain arithmetic, indexing and "
                  "comparisons", instead=dict.fromkeys(SHORTCUTS, LOG_CALL), library_hint=LOG_CALL, own_helpers=False)


def _clamped(args: tuple, run) -> str | None:
    """The clamp hint, only when the learner's clamp changed a number (a clamp that cut nothing is not the slip)."""
    if not run.clamped:
        return None
    floors = [named.get("min", plain[0] if plain else None) for op in ("clamp", "clip", "clamp_min")
              for plain, named in run.arguments.get(op, [])]
    if any(isinstance(f, float) and 0 < f <= 1e-3 for f in floors):  # a tiny floor: the weights were clamped
        return ("clamping the weights changes them (every weight below the floor becomes the floor, so its log is "
                "the floor's, not the weight's): never take the log of a weight. Compute the log-weights from the "
                "scores, s - max - log(sum(exp(s - max))), each row's max subtracted first.")
    return HINTS["clamp"]


def check_log_softmax(fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a learner's ``fn(scores) -> log of the weights`` against ``torch.log_softmax(scores, dim=-1)``.

    Built step by step in ``notebooks/05_percentages.ipynb``. Three fixed inputs ``(N, L, S)``: in float32 with
    rows around ``+200`` and ``-200`` and one that spreads over 300, and in float64 with rows around ``+1000``
    and ``-1000``, beyond float64's ``exp``; the result must keep the input's dtype, the first input runs again
    in float64 (float64-accurate), and backward runs through the answer (an in-place step that breaks autograd,
    such as ``s -= s.amax(...)``, fails). It must be built by hand from the operations of :data:`ALLOWED`:
    ``torch.softmax``, ``log_softmax``, ``logsumexp`` in any spelling, the losses that take a log-softmax,
    ``al.percentages`` and ``scaled_dot_product_attention`` all fail the check.

    Args:
        fn: the learner's log-softmax over the last dimension.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`; its message names the typical mistake found.

    Example:
        >>> def stable_log_softmax(s):
        ...     shifted = s - s.amax(dim=-1, keepdim=True)
        ...     return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
        >>> check_log_softmax(stable_log_softmax).status
        'passed'
        >>> print(check_log_softmax(lambda s: s - s.exp().sum(dim=-1, keepdim=True).log()).message)
        ❌ log softmax: not quite. Hint: exp of a large score overflows to inf ...
        >>> check_log_softmax(lambda s: torch.log_softmax(s, dim=-1)).status
        'failed'
    """
    return check_function(fn, _reference, _inputs, name="log softmax", mistakes=MISTAKES, atol=1e-3, rtol=1e-6,
                          allowed=ALLOWED, clues={"clamp": _clamped, "clip": _clamped}, keep_inputs=True,
                          float64=True, backward=True,
                          shape_hint="one log-weight per score: the same shape as the scores, (N, L, S).",
                          inputs_said="3 fixed test inputs, in float32 and float64, with scores far beyond "
                                      "where exp overflows")
