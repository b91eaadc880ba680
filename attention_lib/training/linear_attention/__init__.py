"""Lesson 19's trainings (``notebooks/19_linear_attention.ipynb``): what the softmax buys, measured.

- :mod:`~attention_lib.training.linear_attention.recipe`: lessons 13's and 15's models and recipes with the softmax
  layers swapped for linear attention, the gated delta rule or a hybrid, and how each is scored;
- :mod:`~attention_lib.training.linear_attention.study`: the four variants on both tasks over seeds, and the sweep of
  copying against the state's size (``python3 course.py remake study-19`` stores both);
- :mod:`~attention_lib.training.linear_attention.report`: what the lesson prints and draws from the stored studies:
  tables, claims on every seed, bands checked on held-out seeds, where a variant loses, the two figures.
"""

from .recipe import VARIANTS, agreement, build_copier, build_writer, copying_accuracy, train_copying, train_writer
from .report import (
    CLAIMS,
    band_text,
    bands_report,
    claims_report,
    losses,
    plot_bands,
    plot_sweep,
    sweep_curves,
    sweep_report,
    sweep_table,
    table,
    within,
)
from .study import (
    AGREEMENT,
    COPYING,
    FAR,
    FIGURES,
    FIT_SEEDS,
    HELD_OUT,
    KEY_DIMS,
    LONG,
    MARGIN,
    REPEATS,
    SHORT,
    STUDY_SEEDS,
    SWEEP_SEEDS,
    load,
    load_sweep,
)

__all__ = ["AGREEMENT", "CLAIMS", "COPYING", "FAR", "FIGURES", "FIT_SEEDS", "HELD_OUT", "KEY_DIMS", "LONG", "MARGIN",
           "REPEATS", "SHORT", "STUDY_SEEDS", "SWEEP_SEEDS", "VARIANTS", "agreement", "band_text", "bands_report",
           "build_copier", "build_writer", "claims_report", "copying_accuracy", "load", "load_sweep", "losses",
           "plot_bands", "plot_sweep", "sweep_curves", "sweep_report", "sweep_table", "table", "train_copying",
           "train_writer", "within"]
