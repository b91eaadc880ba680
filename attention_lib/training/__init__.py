"""Training the tiny transformers of ``notebooks/12_learning_to_attend.ipynb``, and the models shipped with the package.

- :mod:`~attention_lib.training.task`: what a task is, an object that carries its own behaviour;
- :mod:`~attention_lib.training.tasks`: the toy tasks, generated and seeded here (no downloads), and
  :mod:`~attention_lib.training.grammar`, the agreement sentences and their structures;
- :mod:`~attention_lib.training.probes`: what an agreement model does, measured per sentence structure;
- :mod:`~attention_lib.training.recipe`: the training recipe and the held-out evaluation;
- :mod:`~attention_lib.training.shipped`: the shipped weights (``trained/*.pt``) and the one safe way to load them.
"""

from .probes import format_probes, probe_agreement, subject_head
from .recipe import evaluate, train
from .shipped import TrainedModel, load_trained
from .tasks import get_task, make_batch

__all__ = ["TrainedModel", "evaluate", "format_probes", "get_task", "load_trained", "make_batch", "probe_agreement",
           "subject_head", "train"]
