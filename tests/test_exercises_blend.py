"""The checker of lesson 06: passes the reference, says "not attempted" for the stub, hints at each slip."""

import math

import pytest
import torch

import attention_lib as al
from attention_lib.exercises.blend import check_calculate_attention


def stub(query, key, value):
    raise NotImplementedError


def from_steps(query, key, value):
    d_k = query.size(-1)
    weights = al.percentages(al.scaler(al.matchmaker(query, key), d_k))
    return al.blend(weights, value), weights


def recipe(query, key, value, *, transpose=True, divide=None, dim=-1, softmax=True, blend_scores=False,
           swap=False):
    d_k = query.size(-1)
    scores = query @ (key.transpose(-2, -1) if transpose else key)
    scores = scores / (math.sqrt(d_k) if divide is None else divide(query, value))
    weights = torch.softmax(scores, dim=dim) if softmax else scores
    output = (scores if blend_scores else weights) @ value
    return (weights, output) if swap else (output, weights)


@pytest.mark.parametrize("solution", [al.calculate_attention, from_steps,
                                      lambda q, k, v: list(al.calculate_attention(q, k, v))])
def test_correct_solutions_pass(solution):
    result = check_calculate_attention(solution)
    assert result.status == "passed"
    assert result.message.startswith("✅ calculate_attention: output and weights correct")


def test_stub_is_not_attempted():
    result = check_calculate_attention(stub)
    assert result.status == "not attempted"
    assert "not attempted yet" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda q, k, v: recipe(q, k, v, transpose=False), "query @ key.transpose(-2, -1)"),
    (lambda q, k, v: recipe(q, k, v, divide=lambda q_, v_: 1.0), "you skipped the scaler"),
    (lambda q, k, v: recipe(q, k, v, divide=lambda q_, v_: q_.size(-1)), "not by d_k itself"),
    (lambda q, k, v: recipe(q, k, v, divide=lambda q_, v_: math.sqrt(q_.size(-2))), "not the number of words"),
    (lambda q, k, v: recipe(q, k, v, divide=lambda q_, v_: math.sqrt(v_.size(-1))), "not the size of the value"),
    (lambda q, k, v: recipe(q, k, v, dim=-2), "each query's row of weights sums to 1"),
    (lambda q, k, v: recipe(q, k, v, dim=0), "mixes different sentences"),
    (lambda q, k, v: recipe(q, k, v, softmax=False), "into percentages with torch.softmax"),
    (lambda q, k, v: recipe(q, k, v, blend_scores=True), "not with the scaled scores"),
    (lambda q, k, v: recipe(q, k, v, swap=True), "in the order (output, weights)"),
])
def test_typical_mistakes_get_their_hint(wrong, phrase):
    result = check_calculate_attention(wrong)
    assert result.status == "failed"
    assert "Hint:" in result.message
    assert phrase in result.message


def test_blend_slip_is_reported_on_the_output():
    result = check_calculate_attention(lambda q, k, v: recipe(q, k, v, blend_scores=True))
    assert result.message.startswith("❌ calculate_attention (output)")


@pytest.mark.parametrize(("wrong", "found"), [
    (lambda q, k, v: al.calculate_attention(q, k, v)[0], "a single Tensor"),
    (lambda q, k, v: (*al.calculate_attention(q, k, v), 0), "a tuple of 3 items"),
])
def test_returning_something_else_than_a_pair_is_explained(wrong, found):
    result = check_calculate_attention(wrong)
    assert result.status == "failed"
    assert found in result.message
    assert "return output, weights" in result.message


def test_wrong_shape_gets_the_shape_hint():
    def no_batch(q, k, v):  # forgets the batch dimension: uses the first sentence only
        out, weights = al.calculate_attention(q[0], k[0], v[0])
        return out, weights

    result = check_calculate_attention(no_batch)
    assert result.status == "failed"
    assert "expected shape" in result.message
    assert "weights are (N, L, S)" in result.message


def test_an_exception_becomes_a_friendly_error():
    result = check_calculate_attention(lambda q, k, v: (q.view(-1) @ k, None))  # a 1-D @ 3-D mismatch
    assert result.status == "error"
    assert result.message.startswith("💥 calculate_attention (weights): your function raised RuntimeError")


def test_completely_wrong_values_are_reported_without_hint():
    result = check_calculate_attention(lambda q, k, v: (torch.zeros(*q.shape[:-1], v.shape[-1]),
                                                        torch.zeros(*q.shape[:-1], k.shape[-2])))
    assert result.status == "failed"
    assert "Hint" not in result.message
    assert "values differ" in result.message
