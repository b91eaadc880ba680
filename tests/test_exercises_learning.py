"""The checkers of lesson 12: the reversal target, and the prediction of where the reversal model looks."""

import torch

from attention_lib.exercises import check_reversal_target, check_where_it_looks


def not_attempted(digits):
    raise NotImplementedError


def test_reversal_target_checker():
    assert check_reversal_target(lambda d: d.flip(-1)).passed
    assert check_reversal_target(lambda d: d[:, torch.arange(d.shape[1] - 1, -1, -1)]).passed
    assert check_reversal_target(not_attempted).status == "not attempted"
    assert "flip the last dimension" in check_reversal_target(lambda d: d.flip(0)).message
    assert "the input itself" in check_reversal_target(lambda d: d).message
    assert "sorts the digits" in check_reversal_target(lambda d: d.sort(-1, descending=True).values).message
    assert "expected shape" in check_reversal_target(lambda d: d.flip(-1)[:, :-1]).message
    assert check_reversal_target(lambda d: 1 / 0).status == "error"


def test_where_it_looks_checker():
    assert check_where_it_looks([7, 6, 5, 4, 3, 2, 1, 0]).passed
    assert check_where_it_looks(torch.arange(7, -1, -1)).passed
    assert check_where_it_looks(...).status == "not attempted"
    assert "diagonal" in check_where_it_looks(list(range(8))).message
    assert "off by one" in check_where_it_looks([8, 7, 6, 5, 4, 3, 2, 1]).message
    assert "give 8 positions" in check_where_it_looks([7, 6, 5]).message
    assert "position 0 looks elsewhere" in check_where_it_looks([0, 6, 5, 4, 3, 2, 1, 7]).message
    assert "whole numbers" in check_where_it_looks("abc").message
