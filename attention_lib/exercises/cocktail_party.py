"""The exercise of lesson 01: every word tunes in to all the words, each with its own focus.

The learner writes ``tune_in(x, focus)``: scores ``x @ xᵀ`` (dot products of the word vectors), each listener's
row multiplied by that listener's focus, turned into weights by a softmax over each row, and each word's new
meaning is the weighted average ``weights @ x``. The lesson's ``listen(x, focus)`` takes one focus for the whole
room; here ``focus`` has one number per word, and it belongs to the word's row (the listener), not its column.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import calculate_attention
from ._again import loud
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, check_function
from ._hints import HINTS

#: The (L, E) sizes and the focus of each listener, per trial: L != E, so that returning the weights shows up as a
#: shape error; focuses that differ from word to word (one of them 0), so that a focus put on the columns (the
#: speakers) gives other numbers than a focus on the rows (the listeners).
_TRIALS = ((4, 3, (2.0, 0.5, 1.0, 3.0)), (5, 4, (0.0, 1.5, 4.0, 0.5, 2.0)), (3, 6, (3.0, 1.0, 0.25)))


def _inputs(trial: int) -> tuple[torch.Tensor, torch.Tensor]:
    L, E, focus = _TRIALS[trial % len(_TRIALS)]
    g = torch.Generator().manual_seed(100 + trial)
    return torch.randn(L, E, generator=g), torch.tensor(focus)


def _reference(x: torch.Tensor, focus: torch.Tensor) -> torch.Tensor:
    # focus[i] * (x_i · x_j) = (focus[i] x_i) · x_j: each query scaled by its own focus, no further scaling
    return calculate_attention(focus[:, None] * x, x, x, scale=1.0)[0]


def _scores(x: torch.Tensor) -> torch.Tensor:
    return x @ x.transpose(-2, -1)  # (L, E) @ (E, L) -> (L, L)


def _rows(focus: torch.Tensor) -> torch.Tensor:
    return focus[:, None]  # (L, 1): listener i's focus on row i


#: A focus that lines up with the last dimension scales the columns: the speakers, not the listeners.
FOCUS_ON_COLUMNS = ("each listener has its own focus, and a listener is a row of the scores. `focus * scores` "
                    "lines the (L,) focus up with the last dimension, the columns (the speakers), so word j's "
                    "focus scales what everybody hears from j. Give the focus a column shape, focus[:, None] "
                    "(L, 1), so that it scales each row.")

#: Typical wrong answers and the hint each deserves.
MISTAKES = [
    (lambda x, focus: torch.softmax(focus * _scores(x), dim=-1) @ x, FOCUS_ON_COLUMNS),
    (lambda x, focus: (_rows(focus) * _scores(x)) @ x, HINTS["no_softmax"]),
    (lambda x, focus: torch.softmax(_rows(focus) * _scores(x), dim=0) @ x, HINTS["softmax_dim_0"]),
    (lambda x, focus: torch.softmax(_scores(x), dim=-1) @ x, HINTS["focus_missing"]),
    (lambda x, focus: torch.softmax(_scores(x) / _rows(focus), dim=-1) @ x, HINTS["focus_divided"]),
    (lambda x, focus: _rows(focus) * (torch.softmax(_scores(x), dim=-1) @ x), HINTS["focus_outside"]),
    (lambda x, focus: torch.softmax(_scores(x) / math.sqrt(x.size(-1)), dim=-1) @ x, HINTS["focus_and_scale"]),
    (lambda x, focus: torch.softmax(_rows(focus) * _scores(x) / math.sqrt(x.size(-1)), dim=-1) @ x,
     HINTS["focus_extra_scale"]),
    (lambda x, focus: torch.softmax(_rows(focus) * _scores(x), dim=-1).T @ x,
     "the weights were transposed before the blend: row i of the weights is listener i's attention over every "
     "word, so the output is weights @ x, not weights.T @ x."),
    (lambda x, focus: torch.softmax(focus.mean() * _scores(x), dim=-1) @ x,
     "you gave every word the same focus, the average. Each listener's row gets its own: focus[:, None] * scores."),
]


#: Plain PyTorch operations; the package's attention and PyTorch's fused attention are the answer itself.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX, said=PLAIN_SAID, library_hint=HINTS["library_shortcut"],
                  instead={"scaled_dot_product_attention": HINTS["library_shortcut"]}, own_helpers=False)


def _shape_hint(args: tuple, got: tuple | None) -> str:
    x, _ = args
    L = x.size(0)
    if got == (L, L):
        return ("(L, L) is the weights: each word's new meaning is the weighted average of all the words, "
                "weights @ x, which is (L, E) like x.")
    if got == (L, L, L) or got == (L, L, x.size(1)):
        return ("a dimension too many: did the focus get shape (L, 1, 1) or (1, L, 1)? focus[:, None] is (L, 1) "
                "and lines up with the rows of the (L, L) scores.")
    return "each word gets a new vector of the same size as before, so the result is (L, E): weights @ x."


def check_tune_in(tune_in: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check the learner's ``tune_in(x, focus)`` of ``notebooks/01_cocktail_party.ipynb``.

    Built step by step in ``notebooks/01_cocktail_party.ipynb``; the worked solution is in
    ``notebooks/solutions/01_cocktail_party_solution.ipynb``. Three fixed inputs, each with ``L != E`` and a
    different focus for every word (one of them 0), and the first again in float64. Only plain PyTorch operations
    are allowed: the library's attention (``al.calculate_attention`` and the rest), PyTorch's
    ``scaled_dot_product_attention`` and a detour out of PyTorch are refused: the exercise is to write it.

    Args:
        tune_in: ``(x, focus) -> new meanings``, with ``x`` of shape ``(L, E)`` (one vector per word) and
            ``focus`` of shape ``(L,)``, one non-negative number per listener; it must return
            ``softmax(focus[:, None] * x @ xᵀ, dim=-1) @ x``, shape ``(L, E)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` that reads "✅ ..." when correct, or says what to fix.

    Example:
        >>> check_tune_in(lambda x, focus: torch.softmax(focus[:, None] * x @ x.T, dim=-1) @ x).status
        'passed'
        >>> print(check_tune_in(lambda x, focus: torch.softmax(focus * (x @ x.T), dim=-1) @ x))
        ❌ tune_in: not quite. Hint: each listener has its own focus, ...
    """
    return check_function(
        tune_in, _reference, _inputs, name="tune_in", mistakes=MISTAKES, shape_hint=_shape_hint,
        allowed=ALLOWED, float64=True, keep_inputs=True,
        awkward=[loud(_inputs(0), 12.0, 0, hint=HINTS["naive_exp"])],
        inputs_said="3 fixed test inputs, each with a different focus for every word",
    )
