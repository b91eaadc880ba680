"""Lesson 13's repeated sequences, the recipe that grows induction heads, and its shipped models
(``notebooks/13_induction_heads.ipynb``).

- :mod:`~attention_lib.training.induction_heads.repeats`: the sequences whose first tokens repeat, and their
  vocabulary;
- :mod:`~attention_lib.training.induction_heads.recipe`: training an attention-only model on them, and measuring it;
- :mod:`~attention_lib.training.induction_heads.shipped`: the shipped one- and two-layer models
  (``python3 course.py remake weights-13`` remakes them);
- :mod:`~attention_lib.training.induction_heads.band_figures`: the lesson's trained figures, for its bands;
- :mod:`~attention_lib.training.induction_heads.study`: the lesson's claims on ten seeds of the recipe, each
  intervention beside its control (``python3 course.py remake study-13``).
"""

from .band_figures import lowest_and_last
from .recipe import HELDOUT_SEED, RECIPE, InductionRun, build_model, evaluate_induction, train_induction
from .repeats import MAX_REPEAT, MIN_REPEAT, SEQ_LEN, VOCAB, RepeatBatch, decode, encode, make_repeats, repeated_part
from .shipped import load_induction, save_induction

__all__ = ["HELDOUT_SEED", "MAX_REPEAT", "MIN_REPEAT", "RECIPE", "SEQ_LEN", "VOCAB", "InductionRun", "RepeatBatch",
           "build_model", "decode", "encode", "evaluate_induction", "load_induction", "lowest_and_last", "make_repeats",
           "repeated_part", "save_induction", "train_induction"]
