"""The checkers of lesson 00 (scores_shape) and of the predict-then-check tasks (lessons 01, 04, 08)."""

import pytest
import torch

from attention_lib.exercises import check_prediction, check_scores_shape
from attention_lib.exercises.welcome import MISTAKES


def solution(query_shape, key_shape):
    return (*query_shape[:-1], key_shape[-2])


def stub(query_shape, key_shape):
    raise NotImplementedError


def test_shape_checker_passes_the_solution_and_a_list():
    assert check_scores_shape(solution).status == "passed"
    assert check_scores_shape(lambda q, k: [*q[:-1], k[-2]]).status == "passed"


def test_shape_checker_spots_the_stub():
    assert check_scores_shape(stub).status == "not attempted"


@pytest.mark.parametrize(("wrong", "hint"), MISTAKES, ids=[f"mistake {i}" for i in range(len(MISTAKES))])
def test_shape_checker_gives_each_mistake_its_hint(wrong, hint):
    result = check_scores_shape(wrong)
    assert result.status == "failed"
    assert hint in result.message


def test_shape_checker_turns_an_error_into_a_message():
    result = check_scores_shape(lambda q, k: q[5])
    assert result.status == "error"


@pytest.mark.parametrize(("guess", "status"), [(0.25, "passed"), (0.27, "passed"), (torch.tensor(0.25), "passed"),
                                               (0.5, "failed"), (None, "not attempted"), (..., "not attempted"),
                                               ("a quarter", "failed"), (float("nan"), "failed"), (True, "failed")])
def test_prediction_checker(guess, status):
    result = check_prediction(guess, torch.tensor(0.25), question="a weight", why="1 / 4.")
    assert result.status == status
    if status != "not attempted":
        assert "a weight" in result.message


def test_prediction_checker_always_explains_and_shows_both_numbers():
    result = check_prediction(256.0, 266.2, question="var(q·k)", why="variances add up.")
    assert result.status == "passed"  # within 20 %
    assert "266.2" in result.message
    assert "variances add up." in result.message
    wrong = check_prediction(16.0, 266.2, question="var(q·k)", why="variances add up.")
    assert wrong.status == "failed"
    assert "you predicted 16" in wrong.message
    assert "variances add up." in wrong.message
