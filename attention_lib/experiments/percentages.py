"""Lesson 05's experiment: the toy sentence's weights at a softmax temperature."""

from __future__ import annotations

import torch

from ..attention import matchmaker, percentages, scaler
from ..toy_data import toy_sentence
from ..validation import check_number


def temperature_weights(temperature: float = 1.0) -> torch.Tensor:
    """The toy sentence's attention weights ``(L, S)`` with the scaled scores divided by ``temperature``.

    Built step by step in ``notebooks/05_percentages.ipynb``.

    Args:
        temperature: a positive number; ``1`` is plain attention.

    Returns:
        The weights ``(4, 4)``, one row per word of "the cat purred softly", each summing to 1.

    Raises:
        TypeError: if ``temperature`` is not a number.
        ValueError: if it is not a finite positive number.

    Example:
        >>> temperature_weights(1.0)[2].round(decimals=2)  # "purred" looks at "cat"
        tensor([0.0600, 0.7700, 0.1000, 0.0600])
    """
    temperature = check_number(temperature, "temperature", positive=True, fix="use 1.0 for plain softmax.")
    s = toy_sentence()
    scores = scaler(matchmaker(s.query, s.key), s.query.size(-1))  # (L, S)
    return percentages(scores / temperature)
