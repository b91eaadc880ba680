"""The word-order checkers (lesson 11) pass correct answers, spot the stub, and name each typical mistake.

Wrong answers caught with their own hint: for the sinusoidal encoding, sine and cosine swapped, sines and
cosines in two halves, ``i / dim`` in the exponent, a cosine with its own frequency, multiplying instead of
dividing, positions from 1, a transposed table; for cross-attention, question and sentence swapped,
self-attention on either one, no scaling, the softmax over the queries, only the output returned, the weights
transposed, values from the question (an error that says why); for the predictions, each wrong outcome of
each experiment, an unknown answer or experiment, and a non-dict.
"""

import math

import pytest
import torch

from attention_lib import calculate_attention, sinusoidal_encoding
from attention_lib.exercises import check_cross_attention, check_shuffle_predictions, check_sinusoidal_encoding
from attention_lib.exercises.word_order import EXPERIMENTS, OUTCOMES, measure_shuffles


def stub(*args):
    raise NotImplementedError


# -- check_sinusoidal_encoding ------------------------------------------------------------------------------


def by_hand(length, dim):
    position = torch.arange(length).float()[:, None]  # (L, 1)
    frequency = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)  # (E / 2,)
    enc = torch.zeros(length, dim)
    enc[:, 0::2] = torch.sin(position * frequency)
    enc[:, 1::2] = torch.cos(position * frequency)
    return enc


def with_loops(length, dim):
    return torch.tensor([[(math.sin if j % 2 == 0 else math.cos)(p / 10000 ** ((j // 2 * 2) / dim))
                          for j in range(dim)] for p in range(length)])


def angles(length, dim, exponent=lambda two_i, dim: two_i / dim, first=0):
    position = torch.arange(first, first + length, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)
    return position / 10000.0 ** exponent(two_i, dim)


def interleave(even, odd):
    return torch.stack([even, odd], dim=-1).flatten(-2).float()


@pytest.mark.parametrize("fn", [sinusoidal_encoding, by_hand, with_loops,
                                lambda L, E: sinusoidal_encoding(L, E, dtype=torch.float64)])
def test_sinusoidal_passes_correct_answers(fn):
    result = check_sinusoidal_encoding(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_sinusoidal_stub_is_not_attempted():
    result = check_sinusoidal_encoding(stub)
    assert result.status == "not attempted"
    assert "📝" in result.message


def own_column(length, dim):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position / 10000.0 ** (torch.arange(dim, dtype=torch.float64) / dim)
    out = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, 1::2])
    return out.float()


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda L, E: interleave(torch.cos(angles(L, E)), torch.sin(angles(L, E))), "sine and cosine are swapped"),
    (lambda L, E: torch.cat([torch.sin(angles(L, E)), torch.cos(angles(L, E))], -1).float(), "interleaves them"),
    (lambda L, E: interleave(torch.sin(a := angles(L, E, lambda t, d: t / 2 / d)), torch.cos(a)), "not i / dim"),
    (own_column, "share the frequency of the sine column"),
    (lambda L, E: interleave(torch.sin(a := angles(L, E, lambda t, d: -t / d)), torch.cos(a)), "divide the position"),
    (lambda L, E: interleave(torch.sin(a := angles(L, E, first=1)), torch.cos(a)), "positions count from 0"),
    (lambda L, E: sinusoidal_encoding(L, E).T, "If you got (dim, length)"),
    (lambda L, E: sinusoidal_encoding(L, E, base=1000.0), "the values differ from the reference"),
])
def test_sinusoidal_catches_typical_mistakes(wrong, phrase):
    result = check_sinusoidal_encoding(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_sinusoidal_reports_a_crash():
    result = check_sinusoidal_encoding(lambda L, E: torch.zeros(L, E)[:, None] @ torch.zeros(3))
    assert result.status == "error"
    assert "💥" in result.message


# -- check_cross_attention ----------------------------------------------------------------------------------


def cross_by_hand(question, sentence):
    scores = question @ sentence.transpose(-2, -1) / math.sqrt(question.shape[-1])  # (N, L, S)
    weights = torch.softmax(scores, dim=-1)
    return weights @ sentence, weights


@pytest.mark.parametrize("fn", [
    lambda q, s: calculate_attention(q, s, s),
    cross_by_hand,
    lambda q, s: [torch.nn.functional.scaled_dot_product_attention(q, s, s), cross_by_hand(q, s)[1]],
])
def test_cross_passes_correct_answers(fn):
    result = check_cross_attention(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_cross_stub_is_not_attempted():
    assert check_cross_attention(stub).status == "not attempted"
    assert check_cross_attention(lambda q, s: None).status == "not attempted"


def unscaled(q, s):
    weights = torch.softmax(q @ s.transpose(-2, -1), dim=-1)
    return weights @ s, weights


def over_queries(q, s):
    weights = torch.softmax(q @ s.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return weights @ s, weights


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda q, s: calculate_attention(s, q, q), "queries and keys/values are swapped"),
    (lambda q, s: calculate_attention(q, q, q), "self-attention on the question"),
    (lambda q, s: calculate_attention(s, s, s), "self-attention on the sentence"),
    (unscaled, "divide the scores by sqrt(E)"),
    (over_queries, "the softmax runs over the keys"),
    (lambda q, s: calculate_attention(q, s, s)[0], "return two tensors, (output, weights)"),
    (lambda q, s: calculate_attention(q, s, s)[1], "return two tensors, (output, weights)"),
    (lambda q, s: tuple(calculate_attention(q, s, s)) + (q,), "return two tensors, (output, weights)"),
    (lambda q, s: (calculate_attention(q, s, s)[0], calculate_attention(q, s, s)[1].transpose(-2, -1)),
     "the weights should be (N, L, S)"),
    (lambda q, s: (calculate_attention(q, s, s)[0].transpose(-2, -1), calculate_attention(q, s, s)[1]),
     "the output should be (N, L, E)"),
    (lambda q, s: (calculate_attention(q, s, s)[0], calculate_attention(q, s, s)[1] * 2),
     "the values differ from the reference"),
])
def test_cross_catches_typical_mistakes(wrong, phrase):
    result = check_cross_attention(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_cross_values_from_the_question_get_the_error_that_says_why():
    result = check_cross_attention(lambda q, s: calculate_attention(q, s, q))
    assert result.status == "error"
    assert "every key needs exactly one value" in result.message


# -- check_shuffle_predictions ------------------------------------------------------------------------------

RIGHT = {"self-attention": "shuffled", "self-attention + positions": "changed", "cross-attention": "same",
         "cross-attention + positions": "changed"}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_answers_are_measured_not_stored(seed):
    assert measure_shuffles(seed) == RIGHT


def test_predictions_pass_when_right_whatever_the_spelling():
    assert check_shuffle_predictions(RIGHT).status == "passed"
    assert check_shuffle_predictions({k: f" {v.upper()}" for k, v in RIGHT.items()}).status == "passed"


@pytest.mark.parametrize("predictions", [
    dict.fromkeys(EXPERIMENTS, ...),
    {**RIGHT, "cross-attention": ...},
    {k: v for k, v in RIGHT.items() if k != "self-attention"},
    {},
])
def test_predictions_not_made_are_not_attempted(predictions):
    result = check_shuffle_predictions(predictions)
    assert result.status == "not attempted"
    assert "📝" in result.message


@pytest.mark.parametrize(("experiment", "wrong"), [
    (experiment, outcome) for experiment in EXPERIMENTS for outcome in OUTCOMES if outcome != RIGHT[experiment]
])
def test_each_wrong_prediction_gets_its_reason(experiment, wrong):
    hints = {"self-attention": "each word keeps its output, in its new place",
             "self-attention + positions": "gets a different position vector",
             "cross-attention": "does not care in which order",
             "cross-attention + positions": "not only in a different order"}
    result = check_shuffle_predictions({**RIGHT, experiment: wrong})
    assert result.status == "failed"
    assert f"{experiment!r} is not {wrong!r}" in result.message
    assert hints[experiment] in result.message


@pytest.mark.parametrize(("predictions", "phrase"), [
    ({**RIGHT, "cross-attention": "reversed"}, "choose one of ['same', 'shuffled', 'changed']"),
    ({**RIGHT, "cross-attention": 1}, "choose one of"),
    ({**RIGHT, "attention": "same"}, "unknown experiments ['attention']"),
    (["same", "shuffled"], "expected a dict"),
])
def test_predictions_that_are_not_answers_get_told_what_is_allowed(predictions, phrase):
    result = check_shuffle_predictions(predictions)
    assert result.status == "failed"
    assert phrase in result.message
