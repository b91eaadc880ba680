"""Checkers for ``notebooks/11_word_order.ipynb``: the sinusoidal encoding and a cross-attention call.

The lesson's predict-then-check on what shuffling the words does is checked in
:mod:`attention_lib.exercises.word_order.shuffles`.
"""

from __future__ import annotations

import torch

from ...attention import calculate_attention
from ...positions import sinusoidal_encoding
from .._checker import CheckResult, check_function

# -- Exercise 1: the sinusoidal encoding --------------------------------------------------------------------


def _sizes(seed: int) -> tuple[int, int]:
    """``(length, dim)`` for one trial: a few positions and an even number of features."""
    g = torch.Generator().manual_seed(110 + seed)
    length = int(torch.randint(3, 40, (1,), generator=g))
    dim = 2 * int(torch.randint(2, 9, (1,), generator=g))
    return length, dim


def _angles(length: int, dim: int, *, first: int = 0, exponent=lambda two_i, dim: two_i / dim):
    position = torch.arange(first, first + length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)  # (E / 2,)
    return position / 10000.0 ** exponent(two_i, dim)  # (L, E / 2)


def _interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    # two (L, E / 2) -> (L, E / 2, 2) -> (L, E): column 2i from even, 2i + 1 from odd
    return torch.stack([even, odd], dim=-1).flatten(-2).float()


def _swapped(length, dim):
    angle = _angles(length, dim)
    return _interleave(torch.cos(angle), torch.sin(angle))


def _concatenated(length, dim):
    angle = _angles(length, dim)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1).float()


def _pair_index(length, dim):
    angle = _angles(length, dim, exponent=lambda two_i, dim: (two_i / 2) / dim)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _own_column(length, dim):
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    column = torch.arange(dim, dtype=torch.float64)  # (E,)
    angle = position / 10000.0 ** (column / dim)  # (L, E)
    out = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, 1::2])
    return out.float()


def _multiplied(length, dim):
    angle = _angles(length, dim, exponent=lambda two_i, dim: -two_i / dim)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _base_1000(length, dim):
    angle = _angles(length, dim) * 10.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # base 1000
    return _interleave(torch.sin(angle), torch.cos(angle))


def _integer_division(length, dim):
    angle = _angles(length, dim, exponent=lambda two_i, dim: two_i // dim)  # 0 for every pair: 2i < dim
    return _interleave(torch.sin(angle), torch.cos(angle))


def _from_one(length, dim):
    angle = _angles(length, dim, first=1)
    return _interleave(torch.sin(angle), torch.cos(angle))


SINUSOIDAL_MISTAKES = [
    (_swapped, "sine and cosine are swapped: the even columns (0, 2, 4, ...) hold the sines and the odd columns "
               "the cosines, so the first row is [0, 1, 0, 1, ...]."),
    (_concatenated, "all the sines come first and all the cosines after them. Some libraries (tensor2tensor) lay "
                    "it out that way; the paper interleaves them: column 2i is a sine, column 2i + 1 the cosine "
                    "of the same frequency (e.g. enc[:, 0::2] = sin, enc[:, 1::2] = cos)."),
    (_pair_index, "the frequencies fall too slowly: the exponent is 2i / dim, where i counts the pairs (so 2i is "
                  "the even column number 0, 2, 4, ...), not i / dim."),
    (_own_column, "the cosine column 2i + 1 must share the frequency of the sine column 2i before it: use the "
                  "even column number 2i in the exponent for both."),
    (_multiplied, "divide the position by 10000 ** (2i / dim); multiplying makes the waves faster and faster "
                  "instead of slower and slower."),
    (_from_one, "positions count from 0: the first row is sin(0) = 0 and cos(0) = 1 in every pair."),
    (_base_1000, "the base is 10000 (ten thousand), not 1000: sin(pos / 10000 ** (2i / dim)). With 1000 the "
                 "pairs turn faster than the paper's (the slowest nearly ten times faster)."),
    (_integer_division, "2 * i // dim is integer (floor) division: 2i is always smaller than dim, so it rounds to "
                        "0 and every pair gets the same frequency, one radian per position. Use true division, "
                        "2 * i / dim (e.g. torch.arange(0, dim, 2) / dim gives floats)."),
]


def check_sinusoidal_encoding(fn) -> CheckResult:
    """Check ``fn(length, dim)``, which should return the ``(length, dim)`` encoding of
    :func:`attention_lib.sinusoidal_encoding` (base 10000).

    Built step by step in ``notebooks/11_word_order.ipynb``.

    Args:
        fn: ``(length, dim) -> (length, dim)`` tensor; ``dim`` is always even.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (sine and cosine
        swapped, the sines and cosines in two halves, ``i / dim`` in the exponent, a cosine with its own
        frequency, multiplying instead of dividing, positions counted from 1, a transposed table).

    Example:
        >>> check_sinusoidal_encoding(sinusoidal_encoding).status
        'passed'
        >>> print(check_sinusoidal_encoding(_swapped))
        ❌ sinusoidal encoding: not quite. Hint: sine and cosine are swapped: ...
    """
    return check_function(fn, sinusoidal_encoding, _sizes, name="sinusoidal encoding",
                          mistakes=SINUSOIDAL_MISTAKES,
                          shape_hint="one row per position and one column per feature: (length, dim). If you "
                                     "got (dim, length), build the angles as positions[:, None] / frequencies"
                                     "[None, :].")


# -- Exercise 2: a cross-attention call ---------------------------------------------------------------------


def _question_and_sentence(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A question ``(N, L, E)`` and a sentence ``(N, S, E)`` with ``L != S``."""
    g = torch.Generator().manual_seed(120 + seed)
    N, L, E = (int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in ((1, 4), (2, 5), (3, 7)))
    S = L + int(torch.randint(1, 4, (1,), generator=g))
    question, sentence = torch.randn(N, L, E, generator=g), torch.randn(N, S, E, generator=g)
    return question, sentence


def _reference_cross(question, sentence):
    return calculate_attention(question, sentence, sentence)


def _unscaled(question, sentence):
    weights = torch.softmax(question @ sentence.transpose(-2, -1), dim=-1)  # (N, L, E) @ (N, E, S) -> (N, L, S)
    return weights @ sentence, weights


def _scaled_by_length(which: int):
    def attend(question, sentence):
        length = (question, sentence)[which].shape[-2]  # L (the question's words) or S (the sentence's)
        weights = torch.softmax(question @ sentence.transpose(-2, -1) / length ** 0.5, dim=-1)  # (N, L, S)
        return weights @ sentence, weights
    return attend


def _wrong_dim(question, sentence):
    scores = question @ sentence.transpose(-2, -1) / question.shape[-1] ** 0.5  # (N, L, S)
    weights = torch.softmax(scores, dim=-2)
    return weights @ sentence, weights


CROSS_MISTAKES = [
    (lambda question, sentence: calculate_attention(sentence, question, question),
     "queries and keys/values are swapped: the question asks (query = question) and the sentence answers "
     "(key = value = sentence). The weights must be (N, L, S), one row per question word."),
    (lambda question, sentence: calculate_attention(question, question, question),
     "that is self-attention on the question: its keys and values must come from the *other* sequence, the "
     "sentence."),
    (lambda question, sentence: calculate_attention(sentence, sentence, sentence),
     "that is self-attention on the sentence: the queries must come from the question."),
    (_unscaled, "divide the scores by sqrt(E) before the softmax (or let calculate_attention do it)."),
    (_scaled_by_length(1), "divide the scores by sqrt(E), the size of each word's vector (question.size(-1)), not "
                           "by sqrt(S), the number of sentence words (sentence.size(-2)): the scaling undoes the "
                           "growth of a dot product of E numbers, whatever the length of the sentence."),
    (_scaled_by_length(0), "divide the scores by sqrt(E), the size of each word's vector (question.size(-1)), not "
                           "by sqrt(L), the number of question words (question.size(-2))."),
    (_wrong_dim, "the softmax runs over the keys, the sentence's words (dim=-1), so each question word's "
                 "weights add up to 1."),
]


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, tuple | list):
        return f"a {type(x).__name__} of {len(x)}: ({', '.join(_describe(item) for item in x)})"
    return f"a {type(x).__name__}"


def check_cross_attention(fn) -> CheckResult:
    """Check ``fn(question, sentence)``: cross-attention from ``question (N, L, E)`` to ``sentence (N, S, E)``,
    returning ``(output (N, L, E), weights (N, L, S))`` like :func:`attention_lib.calculate_attention`.

    Built step by step in ``notebooks/11_word_order.ipynb``. The queries come from the question, the keys and
    the values from the sentence; it is tried with ``L != S``.

    Args:
        fn: ``(question (N, L, E), sentence (N, S, E)) -> (output, weights)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (question and sentence
        swapped, self-attention on either sequence, values from the wrong sequence, no scaling, the softmax
        over the wrong dimension, returning only one tensor). Values taken from the question raise an error that
        says why (every key needs a value).

    Example:
        >>> check_cross_attention(lambda q, s: calculate_attention(q, s, s)).status
        'passed'
        >>> print(check_cross_attention(lambda q, s: calculate_attention(s, q, q)))
        ❌ cross-attention: not quite. Hint: queries and keys/values are swapped: ...
    """
    name = "cross-attention"
    result = check_function(fn, _reference_cross, _question_and_sentence, name=name, mistakes=CROSS_MISTAKES)
    if result.status != "failed" or "not quite" in result.message:
        return result
    question, sentence = _question_and_sentence(0)
    try:
        got = fn(question, sentence)  # it already ran on these inputs in check_function
    except Exception:  # noqa: BLE001 - a function that fails only now keeps the verdict it has
        return result
    if not (isinstance(got, tuple | list) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)):
        return CheckResult("failed", f"❌ {name}: return two tensors, (output, weights), as "
                           f"calculate_attention does; you returned {_describe(got)}.")
    N, L, E = question.shape
    S = sentence.shape[1]
    expected = {"output": (N, L, E), "weights": (N, L, S)}
    for what, tensor in zip(expected, got, strict=True):
        if tuple(tensor.shape) != expected[what]:
            return CheckResult("failed", f"❌ {name}: the {what} should be (N, L, {'E' if what == 'output' else 'S'})"
                               f" = {expected[what]} for a question of {L} words and a sentence of {S}, but it "
                               f"is {tuple(tensor.shape)}. Hint: one row per question word (query); one column "
                               f"per sentence word (key).")
    if "largest difference unknown" in result.message:  # a pair: say how far each of the two is off
        reference = _reference_cross(question, sentence)
        gaps = [(g.detach().double() - r.double()).abs().max().item() for g, r in zip(got, reference, strict=True)]
        return CheckResult("failed", result.message.replace(
            "largest difference unknown", f"the output is off by up to {gaps[0]:.3g}, the weights by up to "
                                          f"{gaps[1]:.3g}"))
    return result
