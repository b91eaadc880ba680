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


def slip(no_guard=False, no_correction=False, block_shift=False, old_max=False, softmax_block=False,
         output_not_corrected=False, divided=False):
    def update(running_max, running_sum, running_output, scores, value):
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        shift = new_max if no_guard else new_max.masked_fill(new_max == float("-inf"), 0.0)
        weights = torch.exp(scores - (scores.amax(dim=-1, keepdim=True) if block_shift else shift))
        if softmax_block:
            weights = torch.softmax(scores, dim=-1)
        correction = 1.0 if no_correction else torch.exp(running_max - shift)
        new_sum = running_sum * correction + weights.sum(-1, keepdim=True)
        new_output = running_output * (1.0 if output_not_corrected else correction) + weights @ value
        if divided:
            new_output = new_output / new_sum
        return (running_max if old_max else new_max), new_sum, new_output
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
    (slip(output_not_corrected=True), "multiply running_output by the same correction"),
    (slip(divided=True), "not divided by the running sum"),
])
def test_typical_slips_get_their_hint(wrong, phrase):
    result = check_online_softmax_update(wrong)
    assert result.status == "failed"
    assert phrase in result.message


def _reference_with(change):
    def update(*args):
        return change(*solution(*args))
    return update


@pytest.mark.parametrize(("wrong", "phrase"), [
    (_reference_with(lambda m, s, o: (m.squeeze(-1), s, o)),
     "the new max (result 1 of 3) should have shape (N, L, 1) = (2, 3, 1), but it has shape (2, 3)"),
    (_reference_with(lambda m, s, o: (m, s.squeeze(-1), o)), "the new sum (result 2 of 3) should have shape"),
    (_reference_with(lambda m, s, o: (m, s * 1.5, o)), "the new sum (result 2 of 3) is wrong: largest difference"),
    (_reference_with(lambda m, s, o: (m, s, o + 1)), "the new output (result 3 of 3) is wrong"),
    (_reference_with(lambda m, s, o: (m + 1, s, o)), "the new max (result 1 of 3) is wrong"),
    (_reference_with(lambda m, s, o: (m, s)), "expected a tuple of three tensors (new_max, new_sum, new_output), "
                                              "but got a tuple of 2"),
    (_reference_with(lambda m, s, o: (m, s.tolist(), o)), "the new sum (result 2 of 3) should be a tensor"),
])
def test_the_wrong_result_is_named_with_its_expected_shape(wrong, phrase):
    result = check_online_softmax_update(wrong)
    assert result.status == "failed"
    assert phrase in result.message
    assert "unknown" not in result.message


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
