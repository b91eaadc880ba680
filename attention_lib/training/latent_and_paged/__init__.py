"""Lesson 17's trained models (``notebooks/17_latent_and_paged.ipynb``): multi-head latent attention learning lesson
15's grammar, at the cache sizes of lesson 15's MHA, GQA and MQA.

- :mod:`~attention_lib.training.latent_and_paged.shipped`: the model (:func:`build_latent_lm`), its training
  (lesson 15's recipe), the shipped models over the same seeds (``python3 course.py remake weights-17`` remakes
  them) and the safe way to load them (:func:`load_latent_lm`), and what both families are compared by: the loss
  on texts a model never saw (:func:`fresh_text_loss`, :func:`unseen_texts`) and agreement with a subject far back
  (:func:`subject_far_back`).
"""

from .shipped import (
    CACHE_NUMBERS,
    FAR_STRUCTURES,
    HELDOUT_SEED,
    LATENT,
    SEEDS,
    build_latent_lm,
    fresh_text_loss,
    load_latent_lm,
    subject_far_back,
    train_latent_lm,
    unseen_texts,
)

__all__ = ["CACHE_NUMBERS", "FAR_STRUCTURES", "HELDOUT_SEED", "LATENT", "SEEDS", "build_latent_lm", "fresh_text_loss",
           "load_latent_lm", "subject_far_back", "train_latent_lm", "unseen_texts"]
