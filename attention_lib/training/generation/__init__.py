"""Lesson 15's texts, training recipe and shipped models (``notebooks/15_generation.ipynb``).

- :mod:`~attention_lib.training.generation.texts`: the grammar's sentences framed as texts to continue, and the
  checker of what a model writes (well-formed, agreeing);
- :mod:`~attention_lib.training.generation.recipe`: training a tiny Llama on them, and measuring it;
- :mod:`~attention_lib.training.generation.shipped`: the shipped models (MHA, GQA, MQA, sliding windows) and the
  safe way to load them (``python3 course.py remake weights-15`` remakes them);
- :mod:`~attention_lib.training.generation.band_figures`: the lesson's trained figures and their bands (measured
  range and margin; ``python3 course.py remake bands-15`` measures them again);
- :mod:`~attention_lib.training.generation.study`: the bug gallery and the key/value-head variants on ten seeds of the
  recipe (``python3 course.py remake study-15``).
"""

from .band_figures import AGREEING_300, band, within
from .recipe import RECIPE, build_lm, complete, quality, train_lm, verb_agreement
from .shipped import KV_HEADS, SEEDS, WINDOWS, load_lm
from .texts import (
    END,
    VOCAB,
    check_sentences,
    decode,
    encode,
    make_texts,
    prompts_before_the_verb,
    rates,
    subject_position,
    verb_position,
)

__all__ = ["AGREEING_300", "END", "KV_HEADS", "RECIPE", "SEEDS", "VOCAB", "WINDOWS", "band", "build_lm",
           "check_sentences", "complete", "decode", "encode", "load_lm", "make_texts", "prompts_before_the_verb",
           "quality", "rates", "subject_position", "train_lm", "verb_agreement", "verb_position", "within"]
