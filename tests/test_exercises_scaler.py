"""The scaled-scores checker (lesson 04) passes the reference, spots the stub, and names each typical mistake."""

import math

import pytest

from attention_lib import matchmaker, scaler
from attention_lib.exercises.scaler import check_scaled_scores


def raw(q, k):
    return q @ k.transpose(-2, -1)


def stub(query, key):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [
    lambda q, k: raw(q, k) / math.sqrt(q.size(-1)),
    lambda q, k: scaler(matchmaker(q, k), q.size(-1)),
    lambda q, k: raw(q, k) * q.shape[-1] ** -0.5,
])
def test_passes_correct_answers(fn):
    result = check_scaled_scores(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_stub_is_not_attempted():
    assert check_scaled_scores(stub).status == "not attempted"


def test_none_is_not_attempted():
    assert check_scaled_scores(lambda q, k: None).status == "not attempted"


@pytest.mark.parametrize(("wrong", "phrase"), [
    (raw, "now divide them by math.sqrt(d_k)"),
    (lambda q, k: raw(q, k) / q.size(-1), "not by d_k itself"),
    (lambda q, k: raw(q, k) * math.sqrt(q.size(-1)), "you multiplied"),
    (lambda q, k: raw(q, k) / math.sqrt(k.size(-2)), "not the number of keys S"),
    (lambda q, k: raw(q, k) / math.sqrt(q.size(-2)), "not the number of queries L"),
    (lambda q, k: raw(q, k) / math.sqrt(q.size(0)), "size(0) is the batch size"),
])
def test_catches_typical_mistakes(wrong, phrase):
    result = check_scaled_scores(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_wrong_shape_gets_the_shape_hint():
    result = check_scaled_scores(lambda q, k: k @ q.transpose(-2, -1) / math.sqrt(q.size(-1)))
    assert result.status == "failed"
    assert "(N, L, S)" in result.message
