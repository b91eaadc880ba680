"""The split/merge-heads checkers (lesson 09) pass correct answers, spot the stub, and name each typical mistake."""

import pytest
import torch

from attention_lib import merge_heads, split_heads
from attention_lib.exercises import check_merge_heads, check_split_heads


def stub(*args):
    raise NotImplementedError


# -- check_split_heads -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    split_heads,
    lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(0, 2, 1, 3),
    lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
    lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2).contiguous(),
])
def test_split_passes_correct_answers(fn):
    result = check_split_heads(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_split_stub_is_not_attempted():
    result = check_split_heads(stub)
    assert result.status == "not attempted"
    assert "📝" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "reads the numbers in memory order"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2), "not every H-th feature"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "the last step is missing: .transpose(1, 2)"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2) * 2, "the values differ"),
    (lambda x, h: x.tolist(), "expected a torch.Tensor"),
    (lambda x, h: x.reshape(x.shape[0], 7, h, -1), "your function raised RuntimeError"),
])
def test_split_catches_typical_mistakes(wrong, phrase):
    result = check_split_heads(wrong)
    assert result.status in {"failed", "error"}
    assert phrase in result.message


# -- check_merge_heads -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    merge_heads,
    lambda x: x.permute(0, 2, 1, 3).flatten(2),
    lambda x: torch.cat(x.unbind(dim=1), dim=-1),
])
def test_merge_passes_correct_answers(fn):
    result = check_merge_heads(fn)
    assert result.status == "passed"
    assert "✅" in result.message


def test_merge_stub_is_not_attempted():
    result = check_merge_heads(stub)
    assert result.status == "not attempted"
    assert "📝" in result.message


@pytest.mark.parametrize(("wrong", "phrase"), [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "mixes words and heads"),
    (lambda x: x.permute(0, 2, 3, 1).flatten(2), "not interleaved"),
    (lambda x: x.transpose(1, 2), "finish with .reshape(N, L, H * Dh)"),
    (lambda x: x.transpose(1, 2).flatten(2) + 1, "the values differ"),
])
def test_merge_catches_typical_mistakes(wrong, phrase):
    result = check_merge_heads(wrong)
    assert result.status == "failed"
    assert phrase in result.message
