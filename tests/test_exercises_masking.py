"""The masking checkers (lesson 08) pass correct answers, spot the stub, and name each typical mistake."""

import pytest
import torch

from attention_lib import causal_mask, percentages
from attention_lib.exercises import check_causal_mask, check_masked_softmax


def stub(*args):
    raise NotImplementedError


# -- check_causal_mask ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    causal_mask,
    lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(),
    lambda L, S: torch.tril(torch.ones(L, S)).bool(),
    lambda L, S: torch.arange(S)[None, :] <= torch.arange(L)[:, None],
    lambda L, S: ~torch.ones(L, S, dtype=torch.bool).triu(diagonal=1),
])
def test_causal_passes_correct_answers(fn):
    result = check_causal_mask(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_causal_stub_is_not_attempted():
    result = check_causal_mask(stub)
    assert result.status == "not attempted"
    assert "📝" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).triu(), "upper triangle (triu)"),
    (lambda L, S: ~causal_mask(L, S), "True and False are swapped"),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).triu(diagonal=1), "True and False are swapped"),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=-1), "a word cannot see itself"),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L), "Align it top-left"),
    (lambda L, S: torch.zeros(L, S).masked_fill(~causal_mask(L, S), float("-inf")), "the additive form"),
    (lambda L, S: torch.ones(L, L, dtype=torch.bool).tril(), "Did you use L for both sizes?"),
    (lambda L, S: torch.ones(L, S).tril(), "Hint: return a bool tensor"),
    (lambda L, S: torch.ones(L, S, dtype=torch.bool), "the values differ from the reference"),
])
def test_causal_catches_typical_mistakes(wrong, phrase):
    result = check_causal_mask(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_causal_reports_a_crash():
    result = check_causal_mask(lambda L, S: torch.ones(L).tril())
    assert result.status == "error"
    assert "💥" in result.message


# -- check_masked_softmax ---------------------------------------------------------------------------------


def by_hand(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


@pytest.mark.parametrize("fn", [
    percentages,
    by_hand,
    lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), dim=-1),
    lambda s, m: torch.softmax(s + torch.zeros_like(s).masked_fill(~m, float("-inf")), dim=-1),
])
def test_masked_softmax_passes_correct_answers(fn):
    result = check_masked_softmax(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_masked_softmax_stub_is_not_attempted():
    assert check_masked_softmax(stub).status == "not attempted"


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda s, m: torch.softmax(s.masked_fill(m, float("-inf")), dim=-1), "you blocked the allowed keys"),
    (lambda s, m: torch.softmax(s, dim=-1).masked_fill(~m, 0.0), "mask *before* the softmax"),
    (lambda s, m: torch.softmax(s, dim=-1) * m, "mask *before* the softmax"),
    (lambda s, m: torch.softmax(s * m, dim=-1), "e^0 = 1 still gets weight"),
    (lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-2), "use dim=-1"),
    (lambda s, m: torch.softmax(s, dim=-1), "the values differ from the reference"),
    (lambda s, m: s[m], "the weights have the scores' shape"),
])
def test_masked_softmax_catches_typical_mistakes(wrong, phrase):
    result = check_masked_softmax(wrong)
    assert result.status == "failed"
    assert phrase in result.message
