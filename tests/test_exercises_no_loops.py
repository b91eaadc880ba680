"""The checker of lesson 07: vectorise the loop over words."""

import math

import pytest
import torch

import attention_lib as al
from attention_lib.exercises.no_loops import check_weights_no_loops


def stub(query, key):
    raise NotImplementedError


def solution(query, key):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (N, L, E) @ (N, E, S) -> (N, L, S)
    return torch.softmax(scores, dim=-1)


def scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def test_solution_passes():
    result = check_weights_no_loops(solution)
    assert result.status == "passed"
    assert result.message.startswith("✅ weights_no_loops")


def test_stub_is_not_attempted():
    result = check_weights_no_loops(stub)
    assert result.status == "not attempted"
    assert "not attempted yet" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda q, k: torch.softmax(q @ k / math.sqrt(q.size(-1)), dim=-1), "flip key sideways first"),
    (lambda q, k: torch.softmax(scaled(k, q), dim=-1), "rows are queries and columns are keys"),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1), dim=-1), "divides every dot product by math.sqrt(d_k)"),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / q.size(-1), dim=-1), "not by d_k itself"),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-2)), dim=-1), "not the number of words"),
    (lambda q, k: torch.softmax(scaled(q, k), dim=-2), "use dim=-1, not dim=-2"),
    (lambda q, k: torch.softmax(scaled(q, k), dim=0), "use dim=-1, not dim=0"),
    (scaled, "ends each row with a softmax"),
])
def test_typical_mistakes_get_their_hint(wrong, phrase):
    result = check_weights_no_loops(wrong)
    assert result.status == "failed"
    assert "Hint:" in result.message
    assert phrase in result.message


def test_forgetting_the_batch_gets_the_shape_hint():
    result = check_weights_no_loops(lambda q, k: al.loop_attention(q[0], k[0], k[0])[1])
    assert result.status == "failed"
    assert "expected shape (2, 4, 4), but got (4, 4)" in result.message
    assert "handles the batch dimension N" in result.message


def test_an_exception_becomes_a_friendly_error():
    result = check_weights_no_loops(lambda q, k: q @ k)  # fails once L, S and E differ
    assert result.status == "failed"  # trial 0 is square: caught as a missing softmax/transpose first
    result = check_weights_no_loops(lambda q, k: q.view(-1) @ k)
    assert result.status == "error"
    assert result.message.startswith("💥 weights_no_loops: your function raised")
