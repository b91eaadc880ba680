"""Lesson 12's tasks, training recipe, probes, attraction study and shipped models
(``notebooks/12_learning_to_attend.ipynb``).

- :mod:`~attention_lib.training.learning_to_attend.tasks`: the toy tasks by name (reversal here; agreement in the
  shared :mod:`attention_lib.training.grammar`), generated and seeded (no downloads);
- :mod:`~attention_lib.training.learning_to_attend.recipe`: the training recipe and the held-out evaluation;
- :mod:`~attention_lib.training.learning_to_attend.probes`: what an agreement model does, per sentence structure;
- :mod:`~attention_lib.training.learning_to_attend.attraction`: agreement attraction by the number of attractors,
  and a training change against it, measured over seeds (its stored study: ``attraction_measured``);
- :mod:`~attention_lib.training.learning_to_attend.shipped`: the shipped models, by task
  (``python3 course.py remake weights-12`` remakes them);
- :mod:`~attention_lib.training.learning_to_attend.band_figures`: the lesson's trained figures, for its bands;
- :mod:`~attention_lib.training.learning_to_attend.causes`: what the verb-to-subject head causes, measured by
  intervention (forced, stripped of attractors, zeroed), and the accuracy by where the attractors stand;
- :mod:`~attention_lib.training.learning_to_attend.controls`: its controls: agreeing counterparts, patching the
  head's weights and output from them, the accuracy by attractor slot, and every head zeroed in turn;
- :mod:`~attention_lib.training.learning_to_attend.over_seeds`: the interventions and their controls (control
  position, donors, placebo, the reverse test) on twelve seeds of both recipes, and its stored study.
"""

from ..grammar import AGREEMENT, ATTRACTORS, HELDOUT_STRUCTURES, STRUCTURES, SUBJECT_FIRST, AgreementTask
from .attraction import BEYOND, HELDOUT_THREE, TRAINING_THREE, by_attractors, format_attraction, load_study, spread
from .causes import (
    Intervened,
    attractor_keys,
    by_attractor_position,
    format_interventions,
    format_positions,
    intervene_by_attractors,
)
from .controls import Patched, agreeing_counterpart, by_attractor_slot, head_by_head, patch_by_attractors
from .over_seeds import (
    accuracy_band,
    differences,
    load_seed_studies,
    measure_controls,
    renamed,
    seed_claims,
    seed_table,
    within_seed_band,
)
from .probes import format_probes, probe_agreement, probe_attraction, subject_head, subject_shares
from .recipe import build_model, evaluate, train
from .shipped import TrainedModel, load_trained, save_trained
from .tasks import REVERSAL, TASKS, get_task, make_batch

__all__ = ["AGREEMENT", "ATTRACTORS", "BEYOND", "HELDOUT_STRUCTURES", "HELDOUT_THREE", "REVERSAL", "STRUCTURES",
           "SUBJECT_FIRST", "TASKS", "TRAINING_THREE", "AgreementTask", "TrainedModel", "build_model", "by_attractors",
           "evaluate", "format_attraction", "format_probes", "get_task", "load_study", "load_trained", "make_batch",
           "probe_agreement", "probe_attraction", "save_trained", "spread", "subject_head", "subject_shares", "train"]
__all__ += ["Intervened", "attractor_keys", "by_attractor_position", "format_interventions", "format_positions",
            "intervene_by_attractors"]
__all__ += ["Patched", "agreeing_counterpart", "by_attractor_slot", "head_by_head", "patch_by_attractors"]
__all__ += ["accuracy_band", "differences", "load_seed_studies", "measure_controls", "renamed", "seed_claims",
            "seed_table", "within_seed_band"]
