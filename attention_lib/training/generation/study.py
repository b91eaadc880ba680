"""What lesson 15's recipe gives on many seeds: the figures ``notebooks/15_generation.ipynb`` reads off its shipped
models, measured on the models of seeds 0-9 trained the same way (600 steps, weights rounded as shipped).

The lesson reads the shipped models (seed 0, and seeds 0-2 for the key/value-head variants); what it says of the
recipe it quotes from this study, read from :mod:`.study_measured` (written by ``python3 course.py remake
study-15``, about 8 minutes on one core: two trainings per seed). Per seed: the bug gallery of the MHA model
(:func:`~attention_lib.experiments.generation.bug_gallery`, 100 prompts), the completions that do not agree for 4
and 1 key/value heads (:func:`~attention_lib.training.generation.quality`, 300 prompts), and the MHA model's verb
agreement by how far back the subject is. (The 2-head and sliding-window models ship for a few seeds only: the
lesson says whose its figures are.) The band figures' seeds are measured by the band system (:mod:`.band_figures`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..seed_study import SeedStudy, load_study, study_main
from .recipe import quality, train_lm, verb_agreement
from .shipped import KV_HEADS, round_weights
from .texts import make_texts, subject_position, verb_position

#: The seeds of the study.
STUDY_SEEDS = tuple(range(10))
STORED = Path(__file__).with_name("study_measured.py")
#: The key/value-head variants trained for each seed: 4 key/value heads, and 1 (MQA, the smallest cache); the 2-head
#: variant ships for seeds 0-2 only, and the lesson says so.
STUDIED = ("mha", "mqa")
#: How far back the subject is, as the lesson groups it.
DISTANCES = {"1-3": (1, 3), "4-7": (4, 7), "8+": (8, 99)}


def by_distance(model) -> dict[str, float]:
    """The verb's agreement on 3,000 texts of six structures, by how far back its subject is (section 7)."""
    far = make_texts(3000, seed=999, structures=["S P P V", "S P P P V", "P S P P V", "S P V", "S V", "P S V"])
    distance = verb_position(far) - subject_position(far)
    right = verb_agreement(model, far)
    return {name: float(right[(distance >= lo) & (distance <= hi)].float().mean())
            for name, (lo, hi) in DISTANCES.items()}


def seed_figures(seed: int) -> dict[str, float]:
    """Every figure of the study for the recipe trained with ``seed``."""
    from ...experiments.generation import bug_gallery

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    found = {}
    models = {}
    for variant in STUDIED:
        kv = KV_HEADS[variant]
        models[variant] = round_weights(train_lm(kv, seed=seed).model)
        measured = quality(models[variant])
        found[f"{variant}: completions that do not agree, of 300"] = float(round((1 - measured["agreeing"]) * 300))
        found[f"{variant}: well-formed"] = measured["well-formed"]
    with torch.no_grad():
        for bug, measured in bug_gallery(models["mha"], n=100).items():
            for what in ("well-formed", "agreeing", "text changed", "top word flips"):
                found[f"gallery, {bug}: {what}"] = measured[what]
        for distance, share in by_distance(models["mha"]).items():
            found[f"no window: agreement, subject {distance} back"] = share
    return found


def load() -> SeedStudy:
    """The stored study (:data:`STORED`)."""
    return load_study(STORED)


def main(argv=None) -> None:  # pragma: no cover - run by hand (``python3 course.py remake study-15``), about 8 minutes
    note = (f"Lesson 15's recipe on seeds {STUDY_SEEDS[0]}-{STUDY_SEEDS[-1]}: what the lesson reads off its "
            f"shipped models, one run each on this machine's own CPU path (torch "
            f"{torch.__version__}, one thread).\n\nWritten by `python3 course.py remake study-15`.")
    study_main(seed_figures, STUDY_SEEDS, STORED, note, argv)


if __name__ == "__main__":  # pragma: no cover
    main()
