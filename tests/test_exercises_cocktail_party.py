"""The checker of lesson 01's exercise, tune_in: passes the solution, spots the stub and each typical mistake."""

import pytest
import torch

from attention_lib.exercises import check_tune_in
from attention_lib.exercises.cocktail_party import MISTAKES


def solution(x, focus):
    scores = x @ x.T  # (L, E) @ (E, L) -> (L, L)
    weights = torch.softmax(focus * scores, dim=-1)
    return weights @ x  # (L, L) @ (L, E) -> (L, E)


def stub(x, focus):
    raise NotImplementedError


def test_passes_the_solution():
    result = check_tune_in(solution)
    assert result.status == "passed"
    assert result.message.startswith("✅ tune_in")


def test_a_loop_solution_passes_too():
    def by_hand(x, focus):
        rows = []
        for i in range(x.shape[0]):
            weights = torch.softmax(focus * (x @ x[i]), dim=0)  # (L,)
            rows.append((weights[:, None] * x).sum(0))
        return torch.stack(rows)

    assert check_tune_in(by_hand).status == "passed"


def test_stub_is_not_attempted():
    result = check_tune_in(stub)
    assert result.status == "not attempted"
    assert "not attempted yet" in result.message


@pytest.mark.parametrize(("index", "phrase"), [
    (0, "torch.softmax(..., dim=-1) before averaging"),
    (1, "softmax over dim=-1, along each row"),
    (2, "multiply the scores by `focus` before the softmax"),
    (3, "don't divide"),
    (4, "inside the softmax"),
])
def test_each_typical_mistake_gets_its_hint(index, phrase):
    wrong, _ = MISTAKES[index]
    result = check_tune_in(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_returning_the_weights_gets_the_shape_hint():
    result = check_tune_in(lambda x, focus: torch.softmax(focus * x @ x.T, dim=-1))
    assert result.status == "failed"
    assert "expected shape (4, 3), but got (4, 4)" in result.message
    assert "return weights @ x" in result.message


def test_an_error_is_reported_not_raised():
    result = check_tune_in(lambda x, focus: x @ x)  # (4, 3) @ (4, 3) does not multiply
    assert result.status == "error"
    assert "RuntimeError" in result.message


def test_an_unknown_wrong_answer_reports_the_difference():
    result = check_tune_in(lambda x, focus: solution(x, focus) + 0.5)
    assert result.status == "failed"
    assert "largest difference 0.5" in result.message
