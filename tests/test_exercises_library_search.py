"""The checker of lesson 02's exercise, soft_lookup: passes the solution, spots the stub and typical mistakes."""

import math

import pytest
import torch

from attention_lib.exercises import check_soft_lookup
from attention_lib.exercises.library_search import MISTAKES


def solution(query, key, value):
    scores = key @ query  # (S, E) @ (E,) -> (S,)
    weights = torch.softmax(scores / math.sqrt(query.size(-1)), dim=-1)
    return weights @ value  # (S,) @ (S, Ev) -> (Ev,)


def stub(query, key, value):
    raise NotImplementedError


def test_passes_the_solution():
    result = check_soft_lookup(solution)
    assert result.status == "passed"
    assert result.message.startswith("✅ soft_lookup")


def test_passes_calculate_attention_with_one_query():
    from attention_lib import calculate_attention

    assert check_soft_lookup(lambda q, k, v: calculate_attention(q[None], k, v)[0][0]).status == "passed"


def test_stub_is_not_attempted():
    result = check_soft_lookup(stub)
    assert result.status == "not attempted"
    assert "not attempted yet" in result.message


def test_returning_none_is_not_attempted():
    assert check_soft_lookup(lambda q, k, v: None).status == "not attempted"


@pytest.mark.parametrize(("index", "phrase"), [
    (0, "you mixed the keys"),
    (1, "divide the scores by sqrt(d_k)"),
    (2, "not by d_k itself"),
    (3, "torch.softmax(scores, dim=-1)"),
    (4, "that is the hard lookup"),
])
def test_each_typical_mistake_gets_its_hint(index, phrase):
    wrong, _ = MISTAKES[index]
    result = check_soft_lookup(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_returning_the_weights_gets_the_shape_hint():
    result = check_soft_lookup(lambda q, k, v: torch.softmax(k @ q / math.sqrt(q.size(-1)), dim=-1))
    assert result.status == "failed"
    assert "expected shape (3,), but got (4,)" in result.message
    assert "weights (S,) @ value (S, Ev)" in result.message
