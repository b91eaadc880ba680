"""Training the tiny models of the lessons that train, one folder per lesson, and what they share.

One folder per lesson, named after its notebook:

- :mod:`~attention_lib.training.learning_to_attend` (lesson 12): toy tasks, the training recipe, probes, the
  attraction study and the shipped models;
- :mod:`~attention_lib.training.induction_heads` (lesson 13): repeated sequences, the recipe that grows induction
  heads and its shipped models;
- :mod:`~attention_lib.training.generation` (lesson 15): texts, a tiny Llama's recipe and its shipped models;
- :mod:`~attention_lib.training.linear_attention` (lesson 19): lessons 13's and 15's models and recipes with linear
  attention, the gated delta rule or a hybrid, and the study of what each learns.

Shared, named for what it is:

- :mod:`~attention_lib.training.task`: what a toy task is, an object that carries its own behaviour;
- :mod:`~attention_lib.training.vocabulary`: a task's tokens, and the one way to encode and decode them;
- :mod:`~attention_lib.training.grammar`: the agreement sentences and their structures (lesson 12's task, lesson
  15's texts);
- :mod:`~attention_lib.training.bands`: what training gives, as a band over seeds and CPU paths, and the statement
  a lesson prints about its own run (the measured bands: ``bands_measured``);
- :mod:`~attention_lib.training.seed_study`: what a recipe gives over many seeds, per seed and as min-max, what holds
  on how many seeds, and a band checked on seeds it was not fitted on;
- :mod:`~attention_lib.training.shipped`: the shipped weights (``trained/*.pt``) and the one loader,
  :func:`load_shipped`.
"""

from .bands import band_text, within_band
from .seed_study import SeedStudy, load_study, run_study
from .shipped import Shipped, load_shipped, shipped_models
from .task import IGNORE, Task
from .vocabulary import Vocabulary

__all__ = ["IGNORE", "SeedStudy", "Shipped", "Task", "Vocabulary", "band_text", "load_shipped", "load_study",
           "run_study", "shipped_models", "within_band"]
