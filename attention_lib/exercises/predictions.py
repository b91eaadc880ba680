"""Predict, then check: the learner writes down a number before running an experiment, and the checker compares.

Used in lessons 01, 04, 05, 08 and 09: a cell asks for a prediction (``my_prediction = None``), the next cell
measures and calls :func:`check_prediction`, which says how close the guess was and, right or wrong, why the
measured value is what it is; the experiment's printout comes after the check. Lessons 15 and 17 predict a share
for each bug of a gallery in words (:data:`AMOUNTS`) and grade them with :func:`grade_amounts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ..validation import is_number
from ._checker import CheckResult


def check_prediction(prediction, measured, *, question: str, why: str, rel_tol: float = 0.05,
                     abs_tol: float = 0.005) -> CheckResult:
    """Compare the learner's ``prediction`` (a number) with the ``measured`` value, and explain the answer.

    Built for the predict-then-check tasks of lessons 01, 04, 05, 08 and 09. A prediction counts as right when it
    is within ``abs_tol + rel_tol * |measured|`` of the measured value: close enough for a number reasoned out
    (0.25 for "a quarter", 256 for a variance measured as 266), too close for a different reasoning (0.2 for a
    quarter fails). The measured value and the reason are shown only once there is a prediction, so a lesson
    can run the experiment's printout after the check without giving the answer away.

    Args:
        prediction: the learner's number; ``None`` or ``...`` means "not predicted yet".
        measured: the value the experiment measured (a number or a one-element tensor).
        question: what was predicted, e.g. ``"purred's weight on cat at focus 0"``.
        why: one or two sentences explaining the measured value, shown whatever the prediction.
        rel_tol, abs_tol: how close counts as right.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult`: "passed", "not attempted" or "failed" (never raises).

    Example:
        >>> check_prediction(0.25, 0.25, question="a weight", why="1 / 4 words.").status
        'passed'
        >>> check_prediction(0.2, 0.25, question="a weight", why="1 / 4 words.").status
        'failed'
        >>> check_prediction(None, 0.25, question="a weight", why="1 / 4 words.").status
        'not attempted'
    """
    value = float(measured.item() if isinstance(measured, torch.Tensor) else measured)
    if prediction is None or prediction is Ellipsis:
        return CheckResult("not attempted", f"📝 {question}: no prediction yet. Write your guess as a number in "
                           f"`my_prediction` (the cell above), run it, then run this cell again. The measurement "
                           f"and the reason appear here once you have predicted.")
    if isinstance(prediction, torch.Tensor) and prediction.numel() == 1:
        prediction = prediction.item()
    if not is_number(prediction):
        return CheckResult("failed", f"❌ {question}: a prediction is one finite number, but got "
                           f"{prediction!r} ({type(prediction).__name__}); e.g. my_prediction = 0.5.")
    close = abs(float(prediction) - value) <= abs_tol + rel_tol * abs(value)
    said, says = f"{float(prediction):.4g}", f"{value:.4g}"
    if not close and said == says:  # different numbers that look the same at 4 digits: show them whole
        said, says = repr(float(prediction)), repr(value)
    shown = f"you predicted {said}, the measurement says {says}."
    if close:
        return CheckResult("passed", f"✅ {question}: {shown} Well reasoned! Why: {why}")
    percent = 0 < abs(value) <= 1 and abs(float(prediction) / 100 - value) <= abs_tol + rel_tol * abs(value)
    hint = (f" Hint: {said} reads as a percentage; a weight is a share of 1, so {said}% is written "
            f"{float(prediction) / 100:.4g}.") if percent else ""
    return CheckResult("failed", f"❌ {question}: {shown}{hint} Why: {why}")


#: The words a gallery's predictions are made in, and the shares each stands for: ``word: (low, high)``.
AMOUNTS = {"all": (0.9, 1.01), "most": (0.5, 0.9), "some": (0.1, 0.5), "none": (0.0, 0.1)}


def amount(share: float) -> str:
    """The word of :data:`AMOUNTS` for ``share``: ``amount(0.4) == "some"``."""
    return next(word for word, (low, high) in AMOUNTS.items() if low <= share < high)


def grade_amounts(name: str, predictions, shares: Mapping[str, float], why: Mapping[str, str], ask: str
                  ) -> CheckResult:
    """Grade a prediction in words of :data:`AMOUNTS` for each key of ``shares`` (the measured shares), with ``why``.

    A word counts whatever its case and surrounding spaces (``"All "`` is ``"all"``), as lesson 11's outcomes do.
    ``ask`` is the "not attempted" message; the measurements and the reasons are shown only once every key has a
    prediction.

    Example:
        >>> result = grade_amounts("bugs", {"a": "some"}, {"a": 0.4}, {"a": "because."}, "predict")
        >>> result.status, result.message.splitlines()
        ('passed', ['✅ bugs: 1 of 1 right.', "  ✓ a: you said 'some', measured 40% ('some'). because."])
    """
    keys: Sequence[str] = list(shares)
    if predictions is not None and predictions is not Ellipsis and not isinstance(predictions, Mapping):
        return CheckResult("failed", f"❌ {name}: give the predictions as a dict, each bug's name to one of "
                           f"{list(AMOUNTS)} (e.g. {{{keys[0]!r}: 'some'}}), but got a {type(predictions).__name__}.")
    if not isinstance(predictions, Mapping) or all(predictions.get(k) in (None, Ellipsis, "") for k in keys):
        return CheckResult("not attempted", ask)
    missing = [k for k in keys if predictions.get(k) in (None, Ellipsis, "")]
    if missing:
        return CheckResult("failed", f"❌ {name}: predict every bug first; missing: {missing}.")
    said = {k: p.strip().lower() if isinstance(p, str) else p for k, p in predictions.items()}  # "All" is "all"
    unknown = {k: predictions[k] for k, p in said.items() if k in keys and not (isinstance(p, str) and p in AMOUNTS)}
    if unknown:
        return CheckResult("failed", f"❌ {name}: a prediction is one of {list(AMOUNTS)}, but got {unknown}.")
    lines, right = [], 0
    for key in keys:
        truth = amount(shares[key])
        right += said[key] == truth
        lines.append(f"  {'✓' if said[key] == truth else '✗'} {key}: you said {said[key]!r}, measured "
                     f"{shares[key]:.0%} ({truth!r}). {why.get(key, '')}")
    head, verdict = ("✅", "passed") if right == len(keys) else ("❌", "failed")
    return CheckResult(verdict, f"{head} {name}: {right} of {len(keys)} right.\n" + "\n".join(lines))
