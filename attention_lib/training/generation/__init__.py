"""Lesson 15's texts, training recipe and shipped models (``notebooks/15_generation.ipynb``).

- :mod:`~attention_lib.training.generation.texts`: the grammar's sentences framed as texts to continue, and the
  checker of what a model writes (well-formed, agreeing);
- :mod:`~attention_lib.training.generation.recipe`: training a tiny Llama on them, and measuring it.
"""

from .recipe import RECIPE, build_lm, complete, quality, train_lm, verb_agreement
from .texts import VOCAB, check_sentences, decode, encode, make_texts, prompts_before_the_verb, rates

__all__ = ["RECIPE", "VOCAB", "build_lm", "check_sentences", "complete", "decode", "encode", "make_texts",
           "prompts_before_the_verb", "quality", "rates", "train_lm", "verb_agreement"]
