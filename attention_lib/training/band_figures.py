"""The trained figures of lessons 12 and 13, computed as the lessons compute them, for one seed of each recipe.

Used by ``python -m attention_lib.training.bands`` (see :mod:`attention_lib.training.bands`), which runs each
lesson's function for every seed on every CPU path and keeps the range of each figure. Each function repeats the
trainings and measurements of its lesson, with ``seed`` in place of the lesson's seed 0: when a lesson changes how
it computes a trained figure, the function here changes with it.
"""

from __future__ import annotations

import torch

#: ``name: (lesson, kind, digits, seeds)`` of every figure (see :class:`attention_lib.training.bands.Band`).
KINDS: dict[str, tuple[int, str, int, str]] = {}


def _figure(lesson: int, name: str, kind: str = "share", digits: int = 2, seeds: str = "all") -> str:
    KINDS[name] = (lesson, kind, digits, seeds)
    return name


def _largest_difference(mine, shipped, inputs: torch.Tensor, **kwargs) -> float:
    """The largest difference between two models' attention weights on ``inputs``, over every layer."""
    with torch.no_grad():
        return max(float((a - b).abs().max()) for a, b in zip(mine(inputs, **kwargs).attention,
                                                               shipped(inputs, **kwargs).attention, strict=True))


# -- lesson 13 ----------------------------------------------------------------------------------------------------
SHORTCUT_FIXED = _figure(13, "shortcut: accuracy on the repeated part, k = 16")
SHORTCUT_MOVED = _figure(13, "shortcut: accuracy on the repeated part, k from 6 to 15")
SHORTCUT_BACK = _figure(13, "shortcut: share of copy queries whose strongest key is 15 back, in the lower layer-1 head")
LOSS_BEFORE = _figure(13, "induction: loss on the repeated part, first 20 steps", "number", 1)
LOSS_AFTER = _figure(13, "induction: loss on the repeated part, last 20 steps", "number", 1)
HALFWAY = _figure(13, "induction: step where the loss is halfway down", "step")
BEGINS = _figure(13, "induction: step where the middle half of the fall begins", "step")
LASTS = _figure(13, "induction: steps the middle half of the fall takes", "step")
REPEATED = _figure(13, "induction: accuracy on the repeated part")
OTHER = _figure(13, "induction: accuracy on the rest")
REPEATED_LOSS = _figure(13, "induction: loss on the repeated part", "number", 2)
OTHER_LOSS = _figure(13, "induction: loss on the rest", "number", 2)
PREVIOUS_UP = _figure(13, "induction: step where the previous-token score is halfway up", "step")
INDUCTION_UP = _figure(13, "induction: step where the induction score is halfway up", "step")
PREVIOUS_LAG = _figure(13, "induction: steps from the loss halfway down to the previous-token score halfway up", "step")
INDUCTION_LAG = _figure(13, "induction: steps from the loss halfway down to the induction score halfway up", "step")
INDUCTION_MAPS = _figure(13, "induction: largest difference from the shipped model's maps", "number", 2, "0")


def halfway(steps, curve) -> int:
    """The first recorded step at which a score is at least halfway from its first value to its last."""
    target = curve[0] + 0.5 * (curve[-1] - curve[0])
    return next(s for s, v in zip(steps, curve, strict=True) if v >= target)


def lesson_13(seed: int = 0) -> dict[str, float]:
    """The trained figures of ``notebooks/13_induction_heads.ipynb``, with ``seed`` for every training."""
    from ..attention_only import phase_change
    from .induction_heads import evaluate_induction, load_induction, make_repeats, train_induction

    figures = {}
    shortcut = train_induction(2, seed=seed, steps=100, min_repeat=16, max_repeat=16)
    figures[SHORTCUT_FIXED] = evaluate_induction(shortcut.model, min_repeat=16, max_repeat=16)["repeated accuracy"]
    figures[SHORTCUT_MOVED] = evaluate_induction(shortcut.model, min_repeat=6, max_repeat=15)["repeated accuracy"]
    probe = make_repeats(500, seed=7, max_repeat=15)
    with torch.no_grad():
        strongest = shortcut.model(probe.tokens).attention[1].argmax(-1)  # (N, H, L)
    i, k = torch.arange(32), probe.lengths[:, None, None]
    copy = (i >= k) & (i < 2 * k) & (i >= 15)
    figures[SHORTCUT_BACK] = float((((strongest == i - 15) & copy).sum(dim=(0, 2)) / copy.sum()).min())

    run = train_induction(2, seed=seed, track_every=25)
    phase = phase_change(run.repeated_losses)
    figures |= {LOSS_BEFORE: phase.before, LOSS_AFTER: phase.after, HALFWAY: phase.step, BEGINS: phase.begins,
                LASTS: phase.ends - phase.begins}
    scores = evaluate_induction(run.model)
    figures |= {REPEATED: scores["repeated accuracy"], OTHER: scores["other accuracy"],
                REPEATED_LOSS: scores["repeated loss"], OTHER_LOSS: scores["other loss"]}
    steps = sorted(run.scores)
    previous = int(run.scores[steps[-1]]["previous token"][0].argmax())  # the run's own previous-token head
    figures[PREVIOUS_UP] = halfway(steps, [float(run.scores[s]["previous token"][0, previous]) for s in steps])
    figures[INDUCTION_UP] = halfway(steps, [float(run.scores[s]["induction"][1].mean()) for s in steps])
    figures[PREVIOUS_LAG] = figures[PREVIOUS_UP] - phase.step
    figures[INDUCTION_LAG] = figures[INDUCTION_UP] - phase.step
    fresh = make_repeats(2000, seed=2024)
    figures[INDUCTION_MAPS] = _largest_difference(run.model, load_induction(2)[0], fresh.tokens)
    return figures


# -- lesson 12 ----------------------------------------------------------------------------------------------------
SNAPSHOTS = (0, 20, 30, 40, 60, 250)
REVERSAL_ACCURACY = _figure(12, "reversal: held-out sequence accuracy")
MIRROR = _figure(12, "reversal: share of rows on the mirror position, lower head")
ON_MIRROR = {step: _figure(12, f"reversal: mean weight on the mirror position after {step} steps", "number", 2)
             for step in SNAPSHOTS}
NO_POSITIONS = _figure(12, "reversal without positions: held-out sequence accuracy")
NO_POSITIONS_DIGITS = _figure(12, "reversal without positions: digit accuracy")
SUBJECT_FIRST_ACCURACY = _figure(12, "subject-first: held-out accuracy")
AGREEMENT_ACCURACY = _figure(12, "agreement: held-out accuracy")
MAPS = {task: _figure(12, f"{task}: largest difference from the shipped model's maps", "number", 2, "0")
        for task in ("reversal", "agreement_subject_first", "agreement")}


def lesson_12(seed: int = 0) -> dict[str, float]:
    """The trained figures of ``notebooks/12_learning_to_attend.ipynb``, with ``seed`` for every training."""
    from .recipe import evaluate, train
    from .shipped import load_trained
    from .tasks import make_batch

    figures = {}
    run = train("reversal", seed=seed, snapshot_steps=SNAPSHOTS)
    figures[REVERSAL_ACCURACY] = evaluate(run.model, "reversal")["sequence_accuracy"]
    x, _ = make_batch("reversal", 2000, seed=1234, split="heldout")
    mirror = torch.arange(7, -1, -1)
    with torch.no_grad():
        figures[MIRROR] = float((run.model(x).attention[0].argmax(-1) == mirror).float().mean(dim=(0, 2)).min())
    for step in SNAPSHOTS:
        figures[ON_MIRROR[step]] = float(run.snapshots[step][0][:, :, torch.arange(8), mirror].mean())
    no_positions = evaluate(train("reversal", seed=seed, use_positions=False).model, "reversal")
    figures[NO_POSITIONS] = no_positions["sequence_accuracy"]
    figures[NO_POSITIONS_DIGITS] = no_positions["token_accuracy"]
    runs = {"reversal": run.model}
    for task, name in (("agreement_subject_first", SUBJECT_FIRST_ACCURACY), ("agreement", AGREEMENT_ACCURACY)):
        runs[task] = train(task, seed=seed).model
        figures[name] = evaluate(runs[task], task)["sequence_accuracy"]
    for task, mine in runs.items():
        x, _ = make_batch(task, 500, seed=99, split="heldout")
        figures[MAPS[task]] = _largest_difference(mine, load_trained(task).model, x)
    return figures


#: Each lesson's function, by lesson number.
FIGURES = {12: lesson_12, 13: lesson_13}
