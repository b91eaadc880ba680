"""Lesson 19's trainings (``notebooks/19_linear_attention.ipynb``): what the softmax buys, measured.

- :mod:`~attention_lib.training.linear_attention.recipe`: lessons 13's and 15's models and recipes with the softmax
  layers swapped for linear attention, the gated delta rule or a hybrid, and how each is scored;
- :mod:`~attention_lib.training.linear_attention.study`: the four variants on both tasks over seeds, with bands
  fitted on some seeds and checked on the others (``python3 course.py remake study-19``), and the sweep of copying
  against the state's size.
"""

from .recipe import VARIANTS, agreement, build_copier, build_writer, copying_accuracy, train_copying, train_writer

__all__ = ["VARIANTS", "agreement", "build_copier", "build_writer", "copying_accuracy", "train_copying",
           "train_writer"]
