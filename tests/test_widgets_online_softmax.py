"""The online softmax, block by block: its recorded steps, its figures and the explorer of lesson 10."""

import math

import pytest
import torch

from attention_lib.memory_efficient.forward import key_blocks
from attention_lib.plotting import online_softmax_steps, plot_causal_tiles, plot_online_softmax_steps
from attention_lib.plotting.softmax_backward import plot_softmax_backward, softmax_jacobian
from attention_lib.plotting.tiles import TILE_KINDS, causal_tile_kinds
from attention_lib.widgets import online_softmax_explorer, render_online_softmax
from attention_lib.widgets.online_softmax import EXAMPLE_SCORES, EXAMPLE_VALUES


def example():
    return torch.tensor(EXAMPLE_SCORES, dtype=torch.float64), torch.tensor(EXAMPLE_VALUES, dtype=torch.float64)


@pytest.mark.parametrize("block_size", [1, 2, 3, 8, 20])
def test_steps_record_the_running_numbers(block_size):
    scores, value = example()
    steps = online_softmax_steps(scores, value, block_size)
    assert len(steps) == math.ceil(8 / block_size)
    assert [s.first for s in steps] == list(range(0, 8, block_size))
    for step in steps:
        seen = scores[:step.last + 1]
        assert step.running_max == float(seen.max())
        assert step.block_max == float(scores[step.first:step.last + 1].max())
        assert step.correction == pytest.approx(math.exp(step.old_max - step.running_max))
        assert step.running_sum == pytest.approx(step.old_sum * step.correction + step.block_sum)
        torch.testing.assert_close(step.running_output, step.old_output * step.correction + step.block_output)
        torch.testing.assert_close(step.estimate, torch.softmax(seen, -1) @ value[:step.last + 1])
    torch.testing.assert_close(steps[-1].estimate, torch.softmax(scores, -1) @ value)


def test_the_example_moves_the_maximum_twice_and_then_keeps_it():
    corrections = [s.correction for s in online_softmax_steps(*example(), 2)]
    assert corrections[0] == 0.0  # nothing to correct before the first block
    assert 0 < corrections[1] < 1
    assert 0 < corrections[2] < 1
    assert corrections[3] == 1.0


def test_steps_reject_bad_shapes_and_block_sizes():
    scores, value = example()
    with pytest.raises(ValueError, match=r"scores of one query \(S,\) and values \(S, Ev\)"):
        online_softmax_steps(scores[None], value, 2)
    with pytest.raises(ValueError, match="block_size must be a positive int, but block_size=0"):
        online_softmax_steps(scores, value, 0)


def test_steps_figure_draws_the_running_numbers():
    steps = online_softmax_steps(*example(), 2)
    fig = plot_online_softmax_steps(steps)
    running_max = fig.axes[0].get_lines()[0].get_ydata()
    assert list(running_max) == [s.running_max for s in steps]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0-1", "2-3", "4-5", "6-7"]
    estimates = [line.get_ydata() for line in fig.axes[3].get_lines()[::2]]  # each curve, then its dotted line
    assert [list(e) for e in estimates] == [[float(s.estimate[i]) for s in steps] for i in range(2)]


@pytest.mark.parametrize(("n", "block"), [(1000, 256), (9, 2), (8, 8), (7, 3)])
def test_causal_tiles_follow_the_blocks_the_attention_computes(n, block):
    kinds = causal_tile_kinds(n, block)
    for i, q0 in enumerate(range(0, n, block)):
        computed = {k0 // block for k0, _ in key_blocks(q0, min(q0 + block, n), n, block, is_causal=True)}
        assert computed == {j for j in range(kinds.shape[1]) if kinds[i, j] < 2}


def test_causal_tiles_figure_has_a_legend_for_each_kind():
    fig = plot_causal_tiles(1000, 256)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == list(TILE_KINDS)
    assert "10 of 16 tiles computed" in fig.axes[0].get_title()
    assert sorted(t.get_text() for t in fig.axes[0].texts).count("skipped") == 6


def test_render_writes_out_the_step():
    fig = render_online_softmax(3, 2)
    text = fig.axes[1].texts[0].get_text()
    assert "new running max m    = max(1.500, 3.000) = 3.000" in text
    assert "correction = exp(1.500 - 3.000) = 0.223" in text
    bars = fig.axes[0].patches
    assert [bar.get_hatch() for bar in bars[:4]] == ["", "", "", ""]  # folded in already
    assert len({bar.get_hatch() for bar in bars[4:6]}) == 1 != len({bar.get_hatch() for bar in bars[4:]})
    last = render_online_softmax(4, 2).axes[1].texts[0].get_text()
    assert "(m did not move)" in last
    assert "(equal: all keys seen)" in last


def test_render_rejects_a_block_out_of_range():
    with pytest.raises(ValueError, match=r"block must be between 1 and 4 \(the number of blocks of 2 keys\)"):
        render_online_softmax(5, 2)


def test_explorer_redraws_and_keeps_the_slider_in_range():
    box = online_softmax_explorer()
    first = box.figure
    box.controls["block"].value = 4
    assert box.figure is not first
    assert "after block 4 of 4" in box.figure.axes[0].get_title()
    box.controls["block_size"].value = 4  # two blocks now: the slider follows
    assert box.controls["block"].max == 2
    assert "after block 2 of 2" in box.figure.axes[0].get_title()


def test_steps_figure_gives_each_running_number_its_own_labelled_axis():
    fig = plot_online_softmax_steps(online_softmax_steps(*example(), 2))
    assert [ax.get_ylabel() for ax in fig.axes] == ["score", "correction exp(old m - new m)", "running sum l",
                                                    "output so far o / l"]
    corrections = list(fig.axes[1].get_lines()[0].get_ydata())
    assert corrections == [s.correction for s in online_softmax_steps(*example(), 2)]
    assert fig.axes[1].get_ylim()[1] <= 1.1  # the correction (0..1) no longer shares its axis with the sum


def test_softmax_backward_figure_draws_the_jacobian_and_ds():
    p = torch.softmax(torch.tensor([0.0, 0.0, 2.0, 0.6], dtype=torch.float64), -1)
    dp = torch.tensor([1.0, 1.3, 2.0, 1.4], dtype=torch.float64)
    jacobian = softmax_jacobian(p)
    s = torch.tensor([0.0, 0.0, 2.0, 0.6], dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(jacobian, torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s))
    fig = plot_softmax_backward(p, dp, ["the", "cat", "purred", "softly"])
    (ds,) = torch.autograd.grad(torch.softmax(s, -1), s, dp)
    heights = [bar.get_height() for bar in fig.axes[1].patches]
    assert heights[:4] == pytest.approx(dp.tolist())
    assert heights[8:] == pytest.approx(ds.tolist())
    assert "purred\np = 0.659" in [t.get_text() for t in fig.axes[1].get_xticklabels()]


@pytest.mark.parametrize(("args", "match"), [
    ((torch.ones(2, 2), torch.ones(2, 2)), r"the weights of one query, a tensor \(S,\)"),
    ((torch.ones(3), torch.ones(2)), r"grad_weights must have the shape of weights, \(3,\)"),
    ((torch.ones(2), torch.ones(2), ["a"]), "expected 2 labels, one per key"),
])
def test_softmax_backward_figure_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        plot_softmax_backward(*args)
