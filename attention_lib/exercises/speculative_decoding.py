"""Checkers for ``notebooks/18_speculative_decoding.ipynb``: the residual distribution that speculative sampling
draws from after a rejection, and predictions of what each bug of the greedy loop does to the target's text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..speculative import residual_distribution
from ._again import Awkward
from ._allowed import PLAIN, SOFTMAX, Allowed
from ._checker import CheckResult, check_function
from .predictions import AMOUNTS, grade_amounts

#: (rows, vocab) per trial: a few rows of a small vocabulary, one row, a larger vocabulary.
_SIZES = ((3, 5), (1, 4), (4, 12))


def _pq_inputs(seed: int, sizes: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1800 + seed)
    rows, vocab = sizes or _SIZES[seed % len(_SIZES)]
    def distribution():  # uneven, as a model's probabilities are; 1,024 draws counted, so that each row sums to
        # exactly 1 in float32 and float64 alike (an answer may rely on it, as 1 - sum(min(p, q)) does)
        weights = torch.rand(rows, vocab, generator=g) ** 3
        draws = torch.multinomial(weights, 1024, replacement=True, generator=g)  # (rows, 1024)
        return torch.zeros(rows, vocab).scatter_add_(1, draws, torch.ones(rows, 1024)) / 1024
    return distribution(), distribution()


def _reference(p, q):
    return residual_distribution(p, q)


def _by_hand(p, q):  # the answer in plain arithmetic, for the example
    shortfall = (p - q).clamp(min=0)
    return shortfall / shortfall.sum(dim=-1, keepdim=True)


#: The slips of the residual, each with the hint that names it.
MISTAKES: list[tuple[Callable, str]] = [
    (lambda p, q: (p - q).clamp(min=0),
     "the shortfall max(0, p - q) is right, but it does not sum to 1: divide each row by its sum (keepdim=True), so "
     "that it is a distribution to draw from. torch.multinomial would forgive it; a draw by hand (a uniform number "
     "against the running sum) would not."),
    (lambda p, q: (q - p).clamp(min=0) / (q - p).clamp(min=0).sum(-1, keepdim=True),
     "this is max(0, q - p): the tokens the draft over-proposed. After a rejection the target needs the tokens the "
     "draft under-proposed, where p is above q: max(0, p - q)."),
    (lambda p, q: (p - q) / (p - q).sum(-1, keepdim=True),
     "p - q has negative entries (where the draft proposed a token more often than the target writes it), and its "
     "rows sum to 0: clamp the negatives to 0 first, max(0, p - q), then divide by the sum."),
    (lambda p, q: torch.softmax(p - q, dim=-1),
     "a softmax of p - q gives every token some weight, even those where p < q; the residual is max(0, p - q) "
     "divided by its sum, which gives those tokens exactly 0."),
    (lambda p, q: (p - q).clamp(min=0) / (p - q).clamp(min=0).sum(),
     "the division used the sum of the whole tensor: each row is one position's distribution, so divide by its "
     "own sum, .sum(dim=-1, keepdim=True)."),
    (lambda p, q: (p - q).abs() / (p - q).abs().sum(-1, keepdim=True),
     "|p - q| also counts the tokens the draft over-proposed (q above p): after a rejection the target needs only "
     "those the draft under-proposed, max(0, p - q), divided by its sum."),
    (lambda p, q: p.clone(),
     "that is p itself: a rejected token was drawn from q, and p alone would count the tokens q already covered "
     "twice. Draw from what q missed, max(0, p - q), divided by its sum: accepted and corrected draws then give p."),
    (lambda p, q: (p / q).clamp(max=1) / (p / q).clamp(max=1).sum(-1, keepdim=True),
     "min(1, p / q) is the chance to accept a drafted token, not the distribution to draw from after a rejection: "
     "that is max(0, p - q), divided by its sum."),
    (lambda p, q: (p - q).clamp(min=0) / (p - q).clamp(min=0).sum(0, keepdim=True),
     "the division used each column's sum (.sum(0), or dim=-2): one token's shortfall over every row. Each row is "
     "one position's distribution, so divide by its own sum, over the vocabulary: .sum(dim=-1, keepdim=True)."),
]


#: Arithmetic, comparisons, sums and maxima (a softmax too, so that its slip gets its hint); the package's
#: :func:`~attention_lib.speculative.residual_distribution` is the answer.
ALLOWED = Allowed(PLAIN | SOFTMAX | {"relu"}, said="arithmetic, comparisons, sums and maxima",
                  library_hint="this exercise asks you to write the residual yourself; your function called {call}, "
                               "which computes it for you: use (p - q).clamp(min=0) and a sum instead.")


def check_residual(fn: Callable) -> CheckResult:
    """Check ``fn(p, q)``: the distribution to draw from after the target rejects a drafted token.

    Built step by step in ``notebooks/18_speculative_decoding.ipynb``. ``p`` and ``q`` are ``(rows, vocab)``, the
    target's and the draft's probabilities (each row sums to 1, and the two differ); ``fn`` must return
    ``max(0, p - q)`` divided by its sum over the vocabulary, ``(rows, vocab)``. Three fixed inputs are tried, and
    the first again in float64.

    Example:
        >>> check_residual(_by_hand).status
        'passed'
        >>> check_residual(lambda p, q: (p - q).clamp(min=0)).message[:60]
        '❌ the residual distribution: not quite. Hint: the shortfall '
    """
    # The course's automatic later calls scale their inputs, and p and q must stay distributions (an answer may
    # rely on each row summing to 1, as 1 - sum(min(p, q)) does): so the later calls are the exercise's own.
    again = [Awkward("the second call (the first input's shape, new distributions)", _pq_inputs(3)),
             Awkward("a transposed view", tuple(t.mT.contiguous().mT for t in _pq_inputs(5))),
             Awkward("the third call (the first input's shape, new distributions)", _pq_inputs(6)),
             Awkward("as many rows as tokens (rows = vocab = 5), where a sum over the wrong dimension still has the "
                     "right shape", _pq_inputs(0, sizes=(5, 5)),
                     "the sum ran over the rows, or lost its dimension (keepdim=False) and broadcast along the wrong "
                     "one: with as many rows as tokens it still fits. Divide each row by its own sum, "
                     ".sum(dim=-1, keepdim=True).")]
    return check_function(fn, _reference, _pq_inputs, name="the residual distribution", mistakes=MISTAKES,
                          atol=1e-6, rtol=1e-5, float64=True, keep_inputs=True, allowed=ALLOWED, awkward=again,
                          again=False,
                          shape_hint="return one distribution per row of p: the shape of p, (rows, vocab).")


#: Why each greedy bug does what it does to the text.
WHY = {
    "draft cache not rolled back": "the draft keeps its rejected proposals and writes after them, as if they had been "
                                   "kept; it proposes worse, so fewer drafts are accepted, but the target still "
                                   "checks every token: the text is the target's.",
    "bonus token forgotten": "when every draft is accepted the target's own next token, already computed, is thrown "
                             "away and recomputed next round: such a round writes one token fewer for its target "
                             "call, and the text is unchanged.",
    "top-left mask in the verify pass": "the verify pass reads its new tokens as if they stood at the start of the "
                                        "text (lesson 15's chunked-prefill bug): the target's logits are wrong, it "
                                        "accepts and corrects by wrong scores, and the text changes.",
}


def check_gallery_predictions(predictions: Mapping[str, str] | None, gallery: Mapping[str, Mapping[str, float]]
                              ) -> CheckResult:
    """Check predictions, made before measuring, of how many texts each greedy bug leaves equal to the target's.

    Built step by step in ``notebooks/18_speculative_decoding.ipynb``. ``predictions[bug]`` is one of
    :data:`~attention_lib.exercises.predictions.AMOUNTS`' words (``"all"``: 90 % or more of the texts, ``"most"``,
    ``"some"``, ``"none"``: under 10 %); ``gallery`` is what
    :func:`attention_lib.experiments.speculative_decoding.greedy_gallery` measured.

    Example:
        >>> gallery = {"no bug": {"same text": 1.0}, "bonus token forgotten": {"same text": 1.0}}
        >>> check_gallery_predictions({"bonus token forgotten": "all"}, gallery).status
        'passed'
    """
    name = "which bugs change the text"
    shares = {bug: measured["same text"] for bug, measured in gallery.items() if bug != "no bug"}
    return grade_amounts(name, predictions, shares, WHY, f"📝 {name}: no predictions yet. Fill in `my_predictions` "
                         f"with one of {list(AMOUNTS)} for each bug (the share of texts still equal to the "
                         f"target's), run it, then run this cell again.")
