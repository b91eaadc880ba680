"""The checker of lesson 10: one step of the online softmax, and the hint for each typical slip."""

import pytest
import torch

from attention_lib.exercises import check_online_softmax_update
from attention_lib.exercises.memory import _inputs


def stub(running_max, running_sum, running_output, scores, value):
    raise NotImplementedError


def solution(running_max, running_sum, running_output, scores, value):
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    shift = new_max.masked_fill(new_max == float("-inf"), 0.0)
    correction = torch.exp(running_max - shift)
    weights = torch.exp(scores - shift)
    new_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
    new_output = running_output * correction + weights @ value  # (N, L, B) @ (N, B, Ev) -> (N, L, Ev)
    return new_max, new_sum, new_output


def slip(no_guard=False, no_correction=False, block_shift=False, old_max=False, softmax_block=False):
    def update(running_max, running_sum, running_output, scores, value):
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        shift = new_max if no_guard else new_max.masked_fill(new_max == float("-inf"), 0.0)
        weights = torch.exp(scores - (scores.amax(dim=-1, keepdim=True) if block_shift else shift))
        if softmax_block:
            weights = torch.softmax(scores, dim=-1)
        correction = 1.0 if no_correction else torch.exp(running_max - shift)
        return ((running_max if old_max else new_max), running_sum * correction + weights.sum(-1, keepdim=True),
                running_output * correction + weights @ value)
    return update


def test_solution_passes():
    result = check_online_softmax_update(solution)
    assert result.status == "passed"
    assert result.message.startswith("✅ online_softmax_update")


def test_stub_is_not_attempted():
    result = check_online_softmax_update(stub)
    assert result.status == "not attempted"
    assert "not attempted yet" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (slip(no_guard=True), "-inf - (-inf) is NaN"),
    (slip(no_correction=True), "multiply both by torch.exp(running_max - new_max)"),
    (slip(block_shift=True), "not this block's own maximum"),
    (slip(old_max=True), "return the new maximum"),
    (slip(softmax_block=True), "do not normalise the block with a softmax"),
])
def test_typical_slips_get_their_hint(wrong, phrase):
    result = check_online_softmax_update(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def test_wrong_number_of_results_and_errors_are_reported():
    assert check_online_softmax_update(lambda m, s, o, scores, v: o).status == "failed"
    crashed = check_online_softmax_update(lambda m, s, o, scores, v: scores @ scores)
    assert crashed.status == "error"
    assert "RuntimeError" in crashed.message


def test_inputs_exercise_every_case():
    running_max, _, _, scores, _ = _inputs(1)
    assert bool((running_max[:, 0] == float("-inf")).all())  # a query whose keys are all masked ...
    assert bool((scores[:, 0] == float("-inf")).all())  # ... in both blocks
    moved = scores.amax(-1, keepdim=True) > running_max
    assert bool(moved[:, 1:-1].any())  # the max moves in some rows ...
    assert not bool(moved[:, -1].any())  # ... and not in the last
