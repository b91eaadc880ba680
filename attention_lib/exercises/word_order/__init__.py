"""The exercises of ``notebooks/11_word_order.ipynb``: the sinusoidal encoding
(:mod:`~attention_lib.exercises.word_order.encoding`), cross-attention to a padded batch
(:mod:`~attention_lib.exercises.word_order.cross_attention`), and the predict-then-check shuffle experiments
(:mod:`~attention_lib.exercises.word_order.shuffles`)."""

from .cross_attention import check_cross_attention
from .encoding import check_sinusoidal_encoding
from .shuffles import EXPERIMENTS, OUTCOMES, check_shuffle_predictions, measure_shuffles

__all__ = ["EXPERIMENTS", "OUTCOMES", "check_cross_attention", "check_shuffle_predictions", "check_sinusoidal_encoding",
           "measure_shuffles"]
