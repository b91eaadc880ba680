"""Training the tiny models of lessons 12 and 13, and the models shipped with the package.

- :mod:`~attention_lib.training.task`: what a task is, an object that carries its own behaviour;
- :mod:`~attention_lib.training.tasks`: the toy tasks, generated and seeded here (no downloads), and
  :mod:`~attention_lib.training.grammar`, the agreement sentences and their structures;
- :mod:`~attention_lib.training.probes`: what an agreement model does, measured per sentence structure;
- :mod:`~attention_lib.training.recipe`: the training recipe and the held-out evaluation;
- :mod:`~attention_lib.training.shipped`: the shipped weights (``trained/*.pt``) and the one safe way to load them;
- :mod:`~attention_lib.training.induction_heads`: lesson 13's repeated sequences, the recipe that grows induction heads
  and its shipped models (``notebooks/13_induction_heads.ipynb``).
"""

from .grammar import AGREEMENT, HELDOUT_STRUCTURES, SUBJECT_FIRST
from .induction_heads import load_induction, make_repeats, train_induction
from .probes import format_probes, probe_agreement, subject_head
from .recipe import evaluate, train
from .shipped import TrainedModel, load_trained
from .tasks import REVERSAL, get_task, make_batch

__all__ = ["AGREEMENT", "HELDOUT_STRUCTURES", "REVERSAL", "SUBJECT_FIRST", "TrainedModel", "evaluate", "format_probes",
           "get_task", "load_induction", "load_trained", "make_batch", "make_repeats", "probe_agreement",
           "subject_head", "train", "train_induction"]
