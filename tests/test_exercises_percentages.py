"""The stable-softmax checker (lesson 05) passes correct softmaxes, spots the stub, and names each mistake."""

import pytest
import torch

from attention_lib import percentages
from attention_lib.exercises.percentages import check_stable_softmax


def by_hand(s):
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def stub(scores):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [by_hand, percentages, lambda s: torch.softmax(s, dim=-1),
                                lambda s: (s - torch.logsumexp(s, dim=-1, keepdim=True)).exp()])
def test_passes_correct_answers(fn):
    result = check_stable_softmax(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_stub_is_not_attempted():
    assert check_stable_softmax(stub).status == "not attempted"


def test_inputs_really_overflow_a_naive_softmax():
    from attention_lib.exercises.percentages import _inputs

    (scores,) = _inputs(0)
    naive = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
    assert bool(naive.isnan().any())
    assert not bool(by_hand(scores).isnan().any())


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda s: s.exp() / s.exp().sum(dim=-1, keepdim=True), "subtract each row's max first"),
    (lambda s: (s - s.max()).exp() / (s - s.max()).exp().sum(dim=-1, keepdim=True), "not the max of the whole"),
    (lambda s: (s - s.amax(dim=-1)).exp() / (s - s.amax(dim=-1)).exp().sum(dim=-1, keepdim=True),
     "is (..., L, 1)"),
    (lambda s: (s - s.amax(dim=-1, keepdim=True)).exp(), "divide by each row's sum"),
    (lambda s: (s - s.amax(dim=-1, keepdim=True)).exp() / (s - s.amax(dim=-1, keepdim=True)).exp().sum(dim=-1),
     "keep the reduced dimension when you sum"),
    (lambda s: torch.softmax(s, dim=-2), "the last dimension (dim=-1)"),
    (lambda s: torch.softmax(s, dim=0), "not over the batch"),
])
def test_catches_typical_mistakes(wrong, phrase):
    result = check_stable_softmax(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_wrong_shape_gets_the_shape_hint():
    result = check_stable_softmax(lambda s: torch.softmax(s, dim=-1).sum(dim=-1))
    assert result.status == "failed"
    assert "same shape as the scores" in result.message
