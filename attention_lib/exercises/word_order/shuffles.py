"""The predict-then-check of ``notebooks/11_word_order.ipynb``: what shuffling the sentence's words does to the
outputs of self- and cross-attention, with and without positions.

The learner predicts one of :data:`OUTCOMES` for each experiment of :data:`EXPERIMENTS`; the checker runs the
experiments (:func:`measure_shuffles`) and compares, so the answers are measured, not stored.
"""

from __future__ import annotations

import torch

from ...attention import calculate_attention
from ...positions import sinusoidal_encoding
from .._checker import CheckResult

#: The possible answers: what happens to the outputs when the words of the sentence are shuffled.
OUTCOMES = ("same", "shuffled", "changed")

#: Each experiment of the exercise, as the notebook states it.
EXPERIMENTS = {
    "self-attention": "self-attention over the sentence, no positions: the outputs of the sentence's words",
    "self-attention + positions": "the same, after adding the sinusoidal encoding to every word's vector",
    "cross-attention": "a question (unchanged) attends to the sentence, no positions: the question's outputs",
    "cross-attention + positions": "the same, after adding the sinusoidal encoding to the sentence's vectors",
}

_WHY = {
    "same": "the outputs do not change at all, not even their order",
    "shuffled": "the outputs are the same vectors as before, in the new order of the words",
    "changed": "some outputs become different vectors",
}

_HINTS = {
    "self-attention": "without positions, every word scores every other word by content only. Shuffling the "
                      "words shuffles the rows and the columns of the weights the same way, so each word keeps "
                      "its output, in its new place.",
    "self-attention + positions": "after the shuffle a word sits at a new position, so it gets a different "
                                  "position vector added: its query, key and value change.",
    "cross-attention": "the question's words stay where they are, and a softmax followed by a weighted sum does not "
                       "care in which order the sentence's keys and values come, as long as each key keeps "
                       "its value.",
    "cross-attention + positions": "shuffled words get new position vectors, so the sentence's keys and values "
                                   "are different vectors, not only in a different order.",
}


def _outcome(before: torch.Tensor, after: torch.Tensor, order: torch.Tensor) -> str:
    if torch.allclose(after, before, atol=1e-5):
        return "same"
    if before.shape[0] == order.shape[0] and torch.allclose(after, before[order], atol=1e-5):
        return "shuffled"
    return "changed"


def measure_shuffles(seed: int = 0) -> dict[str, str]:
    """Run the four experiments of :data:`EXPERIMENTS` on random vectors and say what shuffling did to each.

    Used by :func:`check_shuffle_predictions` (``notebooks/11_word_order.ipynb``): the answers are measured,
    not stored.

    Example:
        >>> measure_shuffles()["self-attention"]
        'shuffled'
    """
    g = torch.Generator().manual_seed(seed)
    S, L, E = 5, 3, 8
    sentence, question = torch.randn(S, E, generator=g), torch.randn(L, E, generator=g)
    order = torch.randperm(S, generator=g)
    while bool((order == torch.arange(S)).any()):  # every word moves
        order = torch.randperm(S, generator=g)
    positions = sinusoidal_encoding(S, E)

    def self_attention(x):
        return calculate_attention(x, x, x)[0]

    def cross_attention(x):
        return calculate_attention(question, x, x)[0]

    shuffled = sentence[order]
    return {
        "self-attention": _outcome(self_attention(sentence), self_attention(shuffled), order),
        "self-attention + positions": _outcome(self_attention(sentence + positions),
                                               self_attention(shuffled + positions), order),
        "cross-attention": _outcome(cross_attention(sentence), cross_attention(shuffled), order),
        "cross-attention + positions": _outcome(cross_attention(sentence + positions),
                                                cross_attention(shuffled + positions), order),
    }


def check_shuffle_predictions(predictions: dict) -> CheckResult:
    """Check the learner's predictions of what shuffling the sentence does to the outputs of attention.

    Built in ``notebooks/11_word_order.ipynb``. The checker runs each experiment of :data:`EXPERIMENTS`
    (with :func:`measure_shuffles`) and compares the outcome with the prediction.

    Args:
        predictions: a dict with one entry per experiment name in :data:`EXPERIMENTS`, each one of
            :data:`OUTCOMES`: ``"same"`` (nothing changes), ``"shuffled"`` (the same vectors in the new order)
            or ``"changed"`` (different vectors). ``...`` marks a prediction not made yet.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`: passed when every prediction matches the measurement;
        otherwise the first wrong prediction with the reason.

    Example:
        >>> answers = {"self-attention": "shuffled", "self-attention + positions": "changed",
        ...            "cross-attention": "same", "cross-attention + positions": "changed"}
        >>> check_shuffle_predictions(answers).status
        'passed'
        >>> print(check_shuffle_predictions({**answers, "cross-attention": "shuffled"}))
        ❌ predictions: 'cross-attention' is not 'shuffled' (the outputs are the same vectors ...). Hint: ...
    """
    name = "predictions"
    if not isinstance(predictions, dict):
        return CheckResult("failed", f"❌ {name}: expected a dict from experiment name to prediction, but got "
                           f"{type(predictions).__name__}.")
    missing = [key for key in EXPERIMENTS if key not in predictions]
    unknown = [key for key in predictions if key not in EXPERIMENTS]
    if unknown:
        return CheckResult("failed", f"❌ {name}: unknown experiments {unknown}; the experiments are "
                           f"{list(EXPERIMENTS)}.")
    if missing or any(value is Ellipsis or value is None for value in predictions.values()):
        open_ = missing + [key for key, value in predictions.items() if value is Ellipsis or value is None]
        return CheckResult("not attempted", f"📝 {name}: not attempted yet. Replace ... with \"same\", "
                           f"\"shuffled\" or \"changed\" for {open_}, then run this cell again.")
    for key, value in predictions.items():
        if not isinstance(value, str) or value.strip().lower() not in OUTCOMES:
            return CheckResult("failed", f"❌ {name}: the prediction for {key!r} is {value!r}; choose one of "
                               f"{list(OUTCOMES)}.")
    measured = measure_shuffles()
    for key in EXPERIMENTS:
        guess = predictions[key].strip().lower()
        if guess != measured[key]:
            return CheckResult("failed", f"❌ {name}: {key!r} is not {guess!r} ({_WHY[guess]}). "
                               f"Hint: {_HINTS[key]}")
    summary = "; ".join(f"{key}: {measured[key]}" for key in EXPERIMENTS)
    return CheckResult("passed", f"✅ {name}: all {len(EXPERIMENTS)} right, and measured ({summary}). Well done!")
