"""Lesson 17's trained models (``notebooks/17_latent_and_paged.ipynb``): multi-head latent attention learning lesson
15's grammar, at the cache sizes of lesson 15's MHA, GQA and MQA.

- :mod:`~attention_lib.training.latent_and_paged.shipped`: the model (:func:`build_latent_lm`), its training
  (lesson 15's recipe), the shipped models over the same seeds (``python3 course.py remake weights-17`` remakes
  them) and the safe way to load them (:func:`load_latent_lm`), and the loss both families are compared by
  (:func:`fresh_text_loss`).
"""

from .shipped import CACHE_NUMBERS, LATENT, SEEDS, build_latent_lm, fresh_text_loss, load_latent_lm, train_latent_lm

__all__ = ["CACHE_NUMBERS", "LATENT", "SEEDS", "build_latent_lm", "fresh_text_loss", "load_latent_lm",
           "train_latent_lm"]
