"""Lesson 18's drafts: small models that propose tokens for lesson 15's shipped model to verify
(``notebooks/18_speculative_decoding.ipynb``).

- :mod:`~attention_lib.training.speculative_decoding.drafts`: a draft trained on the texts, a draft distilled from
  the target, how often the target accepts what each proposes, and the shipped drafts (``python3 course.py
  remake weights-18`` remakes them);
- :mod:`~attention_lib.training.speculative_decoding.table`: a draft of no layers, a bigram table distilled from the
  target's own greedy texts;
- lesson 15's texts and shipped models, which the lesson reads (``load_lm``, ``make_texts``, ``encode``, ...).
"""

from ..generation import decode, encode, load_lm, make_texts, prompts_before_the_verb
from .drafts import (
    DRAFT_SIZES,
    KINDS,
    SEEDS,
    acceptance,
    build_draft,
    distill_draft,
    load_draft,
    sentence_length,
    train_draft,
)
from .table import TableDraft, table_draft

__all__ = ["DRAFT_SIZES", "KINDS", "SEEDS", "TableDraft", "acceptance", "build_draft", "decode", "distill_draft",
           "encode", "load_draft", "load_lm", "make_texts", "prompts_before_the_verb", "sentence_length", "table_draft",
           "train_draft"]
