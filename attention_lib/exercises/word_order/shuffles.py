"""The predict-then-check of ``notebooks/11_word_order.ipynb``: what shuffling words does to the outputs of
self- and cross-attention, with a causal mask, and with positions on one side or carried along.

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

#: Each experiment of the exercise, as the notebook states it. None is one the lesson runs before the exercise.
EXPERIMENTS = {
    "causal self-attention": "self-attention over the sentence with a causal mask (is_causal=True), no positions: "
                             "the outputs of the sentence's words, after shuffling the sentence",
    "question shuffled": "a question attends to the sentence, no positions; this time the question's words are "
                         "shuffled and the sentence stays as it is: the question's outputs",
    "positions on the question": "a question attends to the sentence; the sinusoidal encoding is added to the "
                                 "question's vectors only (the sentence keeps its bare vectors); the sentence is "
                                 "shuffled: the question's outputs",
    "positions travel": "self-attention, no mask; every word's vector gets the position vector of its place in the "
                        "original sentence, and then the sentence (vectors, positions included) is shuffled: the "
                        "outputs of the sentence's words",
}

_WHY = {
    "same": "the outputs do not change at all, not even their order",
    "shuffled": "the outputs are the same vectors as before, in the new order of the words",
    "changed": "some outputs become different vectors",
}

_HINTS = {
    "causal self-attention": "with a causal mask a word sees only itself and the words before it. After the shuffle "
                             "a word has other words before it, so it blends another set of values: a causal mask "
                             "is a sense of order of its own, even without positions.",
    "question shuffled": "the question's words are the queries, one row each of the weights and of the output. "
                         "Shuffling them shuffles those rows; the sentence, its keys and its values, did not change.",
    "positions on the question": "only the queries carry positions, and the question did not move. The sentence's "
                                 "keys and values are bare vectors, and a softmax followed by a weighted sum does not "
                                 "care in which order the key-value pairs come.",
    "positions travel": "each word carries its position vector with it, so the shuffled sentence is the very same set "
                        "of vectors in a new order. Positions break the symmetry only when they belong to the "
                        "places, not to the words.",
}


def _outcome(before: torch.Tensor, after: torch.Tensor, order: torch.Tensor) -> str:
    if torch.allclose(after, before, atol=1e-5):
        return "same"
    if before.shape[0] == order.shape[0] and torch.allclose(after, before[order], atol=1e-5):
        return "shuffled"
    return "changed"


def _derangement(n: int, g: torch.Generator) -> torch.Tensor:
    order = torch.randperm(n, generator=g)
    while bool((order == torch.arange(n)).any()):  # every word moves
        order = torch.randperm(n, generator=g)
    return order


def measure_shuffles(seed: int = 0) -> dict[str, str]:
    """Run the four experiments of :data:`EXPERIMENTS` on random vectors and say what shuffling did to each.

    Used by :func:`check_shuffle_predictions` (``notebooks/11_word_order.ipynb``): the answers are measured,
    not stored.

    Example:
        >>> measure_shuffles()["question shuffled"]
        'shuffled'
    """
    g = torch.Generator().manual_seed(seed)
    S, L, E = 5, 3, 8
    sentence, question = torch.randn(S, E, generator=g), torch.randn(L, E, generator=g)
    order, question_order = _derangement(S, g), _derangement(L, g)
    positions = sinusoidal_encoding(S, E)

    def attend(queries, x, **kwargs):
        return calculate_attention(queries, x, x, **kwargs)[0]

    shuffled = sentence[order]
    travelled = (sentence + positions)[order]  # each word keeps its own position vector
    with_positions = question + sinusoidal_encoding(L, E)
    return {
        "causal self-attention": _outcome(attend(sentence, sentence, is_causal=True),
                                          attend(shuffled, shuffled, is_causal=True), order),
        "question shuffled": _outcome(attend(question, sentence), attend(question[question_order], sentence),
                                      question_order),
        "positions on the question": _outcome(attend(with_positions, sentence), attend(with_positions, shuffled),
                                              order),
        "positions travel": _outcome(attend(sentence + positions, sentence + positions),
                                     attend(travelled, travelled), order),
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
        otherwise it says how many were right and, prediction by prediction, which were right and, for each
        wrong one, what it would mean and a hint (not the measured outcome).

    Example:
        >>> answers = {"causal self-attention": "changed", "question shuffled": "shuffled",
        ...            "positions on the question": "same", "positions travel": "shuffled"}
        >>> check_shuffle_predictions(answers).status
        'passed'
        >>> print(check_shuffle_predictions({**answers, "positions travel": "changed"}))
        ❌ predictions: 3 of 4 right.
        ✔ 'causal self-attention': right.
        ✔ 'question shuffled': right.
        ✔ 'positions on the question': right.
        ✘ 'positions travel' is not 'changed' (some outputs become different vectors). Hint: each word carries ...
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
    verdicts, right = [], 0
    for key in EXPERIMENTS:
        guess = predictions[key].strip().lower()
        if guess == measured[key]:
            right += 1
            verdicts.append(f"✔ {key!r}: right.")
        else:
            verdicts.append(f"✘ {key!r} is not {guess!r} ({_WHY[guess]}). Hint: {_HINTS[key]}")
    if right < len(EXPERIMENTS):
        return CheckResult("failed", f"❌ {name}: {right} of {len(EXPERIMENTS)} right.\n" + "\n".join(verdicts))
    summary = "; ".join(f"{key}: {measured[key]}" for key in EXPERIMENTS)
    return CheckResult("passed", f"✅ {name}: all {len(EXPERIMENTS)} right, and measured ({summary}). Well done!")
