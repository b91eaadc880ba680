"""The trained figures of lesson 13, computed as the lesson computes them, for one seed of its recipe.

Used by the band system (:mod:`attention_lib.training.bands`), which runs :func:`figures` for every seed on every
CPU path and keeps the range of each figure. It repeats the trainings and measurements of
``notebooks/13_induction_heads.ipynb``, with ``seed`` in place of the lesson's seed 0: when the lesson changes how it
computes a trained figure, the function here changes with it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...attention_only import phase_change
from ..bands import declare
from .recipe import evaluate_induction, make_repeats, train_induction

#: The lesson these figures are of.
LESSON = 13
#: ``name: (kind, digits, seeds)`` of every figure (see :class:`attention_lib.training.bands.Band`).
KINDS: dict[str, tuple[str, int, str]] = {}
SHORTCUT_FIXED = declare(KINDS, "shortcut: accuracy on the repeated part, k = 16")
SHORTCUT_MOVED = declare(KINDS, "shortcut: accuracy on the repeated part, k from 6 to 15")
SHORTCUT_BACK = declare(KINDS, "shortcut: share of copy queries whose strongest key is 15 back, in the layer-1 "
                                "head that does it most")
LOSS_BEFORE = declare(KINDS, "induction: loss on the repeated part, first 20 steps", "number", 1)
LOSS_AFTER = declare(KINDS, "induction: loss on the repeated part, last 20 steps", "number", 1)
HALFWAY = declare(KINDS, "induction: step where the loss is halfway down", "step")
BEGINS = declare(KINDS, "induction: step where the middle half of the fall begins", "step")
LASTS = declare(KINDS, "induction: steps the middle half of the fall takes", "step")
REPEATED = declare(KINDS, "induction: accuracy on the repeated part")
OTHER = declare(KINDS, "induction: accuracy on the rest")
REPEATED_LOSS = declare(KINDS, "induction: loss on the repeated part", "number", 2)
OTHER_LOSS = declare(KINDS, "induction: loss on the rest", "number", 2)
OTHER_LOWEST = declare(KINDS, "induction: loss on the rest, lowest 20-step moving average", "number", 2)
OTHER_RISE = declare(KINDS, "induction: rise of the loss on the rest, from its lowest moving average to its last 20 "
                            "steps", "number", 2)
PREVIOUS_UP = declare(KINDS, "induction: step where the previous-token score is halfway up", "step")
INDUCTION_UP = declare(KINDS, "induction: step where the induction score is halfway up", "step")
PREVIOUS_LAG = declare(KINDS, "induction: steps from the loss halfway down to the previous-token score halfway up",
                       "step")
INDUCTION_LAG = declare(KINDS, "induction: steps from the loss halfway down to the induction score halfway up", "step")
#: The seeds each band is measured over (on every CPU path); the seeds whose runs set its margin (one run each); and
#: the seeds it is checked on afterwards, which played no part in it (``training/induction_heads/study_measured.py``
#: holds the first, :mod:`.study`; ``python -m attention_lib.training.bands --held-out --lesson 13`` writes the
#: others to ``HELD_OUT_STUDY``).
SEEDS = tuple(range(5))
MARGIN_SEEDS = tuple(range(5, 10))
MARGIN_STUDY = Path(__file__).with_name("study_measured.py")
HELD_OUT = tuple(range(10, 15))
HELD_OUT_STUDY = Path(__file__).with_name("bands_held_out.py")


def halfway(steps, curve) -> int:
    """The first recorded step at which a score is at least halfway from its first value to its last."""
    target = curve[0] + 0.5 * (curve[-1] - curve[0])
    return next(s for s, v in zip(steps, curve, strict=True) if v >= target)


def lowest_and_last(losses, window: int = 20) -> tuple[float, float]:
    """The lowest ``window``-step moving average of a loss curve, and the mean of its last ``window`` steps.

    Used by ``notebooks/13_induction_heads.ipynb`` on the loss on the unrepeated part, which falls and then rises.

    Example:
        >>> lowest_and_last([3.0] * 20 + [2.0] * 20 + [2.5] * 20)
        (2.0, 2.5)
    """
    y = torch.as_tensor(losses, dtype=torch.float64)
    return float(y.unfold(0, window, 1).mean(-1).min()), float(y[-window:].mean())


def figures(seed: int = 0, only: str = "") -> dict[str, float]:
    """The trained figures of ``notebooks/13_induction_heads.ipynb``, with ``seed`` for every training (``only=
    "shortcut:"``: the shortcut's figures alone, without the long training)."""
    return measure(seed, shortcut_only=only == "shortcut:")[0]


def measure(seed: int = 0, shortcut_only: bool = False):
    """``(figures, run, shortcut)``: :func:`figures`, and the two trainings they were measured on (``run`` is
    ``None`` with ``shortcut_only``)."""
    found = {}
    shortcut = train_induction(2, seed=seed, steps=100, min_repeat=16, max_repeat=16)
    found[SHORTCUT_FIXED] = evaluate_induction(shortcut.model, min_repeat=16, max_repeat=16)["repeated accuracy"]
    found[SHORTCUT_MOVED] = evaluate_induction(shortcut.model, min_repeat=6, max_repeat=15)["repeated accuracy"]
    probe = make_repeats(500, seed=7, max_repeat=15)
    with torch.no_grad():
        strongest = shortcut.model(probe.tokens).attentions[1].argmax(-1)  # (N, H, L)
    i, k = torch.arange(32), probe.lengths[:, None, None]
    copy = (i >= k) & (i < 2 * k) & (i >= 15)
    shares = ((strongest == i - 15) & copy).sum(dim=(0, 2)) / copy.sum()  # (H,)
    found[SHORTCUT_BACK] = float(shares.max())
    if shortcut_only:
        return found, None, shortcut

    run = train_induction(2, seed=seed, track_every=25)
    phase = phase_change(run.repeated_losses)
    found |= {LOSS_BEFORE: phase.before, LOSS_AFTER: phase.after, HALFWAY: phase.step, BEGINS: phase.begins,
                LASTS: phase.ends - phase.begins}
    lowest, last = lowest_and_last(run.other_losses)
    found |= {OTHER_LOWEST: lowest, OTHER_RISE: last - lowest}
    scores = evaluate_induction(run.model)
    found |= {REPEATED: scores["repeated accuracy"], OTHER: scores["other accuracy"],
                REPEATED_LOSS: scores["repeated loss"], OTHER_LOSS: scores["other loss"]}
    steps = sorted(run.scores)
    previous = int(run.scores[steps[-1]]["previous token"][0].argmax())  # the run's own previous-token head
    found[PREVIOUS_UP] = halfway(steps, [float(run.scores[s]["previous token"][0, previous]) for s in steps])
    found[INDUCTION_UP] = halfway(steps, [float(run.scores[s]["induction"][1].mean()) for s in steps])
    found[PREVIOUS_LAG] = found[PREVIOUS_UP] - phase.step
    found[INDUCTION_LAG] = found[INDUCTION_UP] - phase.step
    return found, run, shortcut
