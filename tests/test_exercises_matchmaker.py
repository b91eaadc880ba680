"""The matchmaker checker (lesson 03) passes the reference, spots the stub, and names each typical mistake."""

import pytest
import torch

from attention_lib import matchmaker
from attention_lib.exercises.matchmaker import check_matchmaker


def stub(query, key):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [matchmaker, lambda q, k: q @ k.transpose(-2, -1), lambda q, k: q @ k.mT,
                                lambda q, k: torch.matmul(q, k.transpose(-1, -2)),
                                lambda q, k: torch.einsum("...le,...se->...ls", q, k)])
def test_passes_correct_answers(fn):
    result = check_matchmaker(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_stub_is_not_attempted():
    result = check_matchmaker(stub)
    assert result.status == "not attempted"
    assert "📝" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda q, k: q @ k, "did you transpose the key?"),
    (lambda q, k: k @ q.transpose(-2, -1), "put the query first"),
    (lambda q, k: q @ k.permute(*range(k.dim() - 1, -1, -1)), "key.T reverses every dimension"),
    (lambda q, k: q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, "the scaler's job"),
])
def test_catches_typical_mistakes(wrong, phrase):
    result = check_matchmaker(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_missing_transpose_that_crashes_gets_the_transpose_hint():
    def no_transpose_on_rectangles(q, k):
        if q.shape[-2] == k.shape[-2] == q.shape[-1]:
            return q @ k.transpose(-2, -1)  # right on the square trial, then crashes on the others
        return q @ k

    result = check_matchmaker(no_transpose_on_rectangles)
    assert result.status == "error"
    assert "did you transpose the key?" in result.message


def test_wrong_shape_gets_the_shape_hint():
    result = check_matchmaker(lambda q, k: (q * k[..., : q.shape[-2], :]).sum(-1))
    assert result.status == "failed"
    assert "one row per query and one column per key" in result.message


def test_other_errors_are_reported_without_a_transpose_hint():
    def broken(q, k):
        raise ValueError("oops")

    result = check_matchmaker(broken)
    assert result.status == "error"
    assert "oops" in result.message
    assert "transpose" not in result.message
