"""The trained figures of lesson 12, computed as the lesson computes them, for one seed of its recipes.

Used by the band system (:mod:`attention_lib.training.bands`), which runs :func:`figures` for every seed on every
CPU path and keeps the range of each figure. It repeats the trainings and measurements of
``notebooks/12_learning_to_attend.ipynb``, with ``seed`` in place of the lesson's seed 0: when the lesson changes how
it computes a trained figure, the function here changes with it.
"""

from __future__ import annotations

import torch

from ..bands import declare, largest_map_difference
from .recipe import evaluate, train
from .shipped import load_trained
from .tasks import make_batch

#: ``name: (kind, digits, seeds)`` of every figure (see :class:`attention_lib.training.bands.Band`).
KINDS: dict[str, tuple[str, int, str]] = {}
SNAPSHOTS = (0, 20, 30, 40, 60, 250)
REVERSAL_ACCURACY = declare(KINDS, "reversal: held-out sequence accuracy")
MIRROR = declare(KINDS, "reversal: share of rows on the mirror position, lower head")
ON_MIRROR = {step: declare(KINDS, f"reversal: mean weight on the mirror position after {step} steps", "number", 2)
             for step in SNAPSHOTS}
NO_POSITIONS = declare(KINDS, "reversal without positions: held-out sequence accuracy")
NO_POSITIONS_DIGITS = declare(KINDS, "reversal without positions: digit accuracy")
SUBJECT_FIRST_ACCURACY = declare(KINDS, "subject-first: held-out accuracy")
AGREEMENT_ACCURACY = declare(KINDS, "agreement: held-out accuracy")
MAPS = {task: declare(KINDS, f"{task}: largest difference from the shipped model's maps", "number", 2, "0")
        for task in ("reversal", "agreement_subject_first", "agreement")}


def figures(seed: int = 0) -> dict[str, float]:
    """The trained figures of ``notebooks/12_learning_to_attend.ipynb``, with ``seed`` for every training."""
    found = {}
    run = train("reversal", seed=seed, snapshot_steps=SNAPSHOTS)
    found[REVERSAL_ACCURACY] = evaluate(run.model, "reversal")["sequence_accuracy"]
    x, _ = make_batch("reversal", 2000, seed=1234, split="heldout")
    mirror = torch.arange(7, -1, -1)
    with torch.no_grad():
        found[MIRROR] = float((run.model(x).attention[0].argmax(-1) == mirror).float().mean(dim=(0, 2)).min())
    for step in SNAPSHOTS:
        found[ON_MIRROR[step]] = float(run.snapshots[step][0][:, :, torch.arange(8), mirror].mean())
    no_positions = evaluate(train("reversal", seed=seed, use_positions=False).model, "reversal")
    found[NO_POSITIONS] = no_positions["sequence_accuracy"]
    found[NO_POSITIONS_DIGITS] = no_positions["token_accuracy"]
    runs = {"reversal": run.model}
    for task, name in (("agreement_subject_first", SUBJECT_FIRST_ACCURACY), ("agreement", AGREEMENT_ACCURACY)):
        runs[task] = train(task, seed=seed).model
        found[name] = evaluate(runs[task], task)["sequence_accuracy"]
    for task, mine in runs.items():
        x, _ = make_batch(task, 500, seed=99, split="heldout")
        found[MAPS[task]] = largest_map_difference(mine, load_trained(task).model, x)
    return found
