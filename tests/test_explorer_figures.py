"""The figures and small experiments that the explorers draw (tests/test_widgets.py tests the explorers themselves).

Lesson 04's random weights, lesson 05's temperature, lesson 06's mix of values, lesson 08's masks of a padded batch,
lesson 10's online softmax step by step and its causal tiles, lesson 12's maps of a trained model and its loss curves.
"""

import math

import matplotlib
import pytest
import torch
from figures import bar_heights

from attention_lib import calculate_attention
from attention_lib.experiments import batch_mask, scaler_weights, temperature_weights
from attention_lib.memory_efficient.forward import key_blocks
from attention_lib.plotting import (
    online_softmax_steps,
    plot_attention_grid,
    plot_attention_over_training,
    plot_causal_tiles,
    plot_loss_curves,
    plot_mix,
    plot_online_softmax_steps,
)
from attention_lib.plotting.memory_efficient.softmax_backward import plot_softmax_backward, softmax_jacobian
from attention_lib.plotting.memory_efficient.tiles import TILE_KINDS, causal_tile_kinds
from attention_lib.toy_data import sentence_batch, toy_sentence
from attention_lib.widgets.memory_efficient import EXAMPLE_SCORES, EXAMPLE_VALUES


def heatmap(fig, title):
    """The numbers of the heatmap whose axes has this title."""
    ax = next(ax for ax in fig.axes if ax.get_title() == title)
    return torch.from_numpy(ax.images[0].get_array().data.copy()).float()


# -- lesson 04: random queries and keys, with and without the scaler ---------------------------------------------
def test_scaler_weights_are_rows_that_sum_to_one_and_are_reproducible():
    w = scaler_weights(32, queries=10, keys=6)
    assert w.shape == (10, 6)
    torch.testing.assert_close(w.sum(-1), torch.ones(10))
    torch.testing.assert_close(w, scaler_weights(32, queries=10, keys=6))


@pytest.mark.parametrize("d_k", [4, 64, 1024])
def test_scaling_keeps_the_softmax_from_saturating(d_k):
    scaled = scaler_weights(d_k, scaled=True).amax(-1).mean().item()
    raw = scaler_weights(d_k, scaled=False).amax(-1).mean().item()
    assert scaled < raw
    assert 0.2 < scaled < 0.5  # about the same for every d_k


def test_without_scaling_the_top_weight_grows_with_d_k():
    tops = [scaler_weights(d_k, scaled=False).amax(-1).mean().item() for d_k in (4, 64, 1024)]
    assert tops == sorted(tops)
    assert tops[-1] > 0.95


# -- lesson 05: the temperature --------------------------------------------------------------------------------
def test_temperature_one_is_plain_attention():
    s = toy_sentence()
    torch.testing.assert_close(temperature_weights(1.0), calculate_attention(s.query, s.key, s.value)[1])


def test_low_temperature_sharpens_and_high_temperature_flattens():
    cold, warm, hot = (temperature_weights(t).amax(-1) for t in (0.1, 1.0, 10.0))
    assert bool((cold > warm).all())
    assert bool((warm > hot).all())
    assert bool((cold > 0.99).all())
    assert bool((hot < 0.3).all())


# -- lesson 06: the mix of values ------------------------------------------------------------------------------
def test_plot_mix_slices_are_weight_times_value_and_stack_to_the_output():
    g = torch.Generator().manual_seed(0)
    weights = torch.softmax(torch.randn(3, generator=g), dim=0)  # (S,)
    value = torch.rand(3, 2, generator=g)  # (S, Ev), non-negative
    fig = plot_mix(weights, value, ["a", "b", "c"], ["x", "y"])
    assert isinstance(fig, matplotlib.figure.Figure)
    slices = bar_heights(fig.axes[0], torch.float32).reshape(3, 2)  # one row of bars per word
    torch.testing.assert_close(slices, weights[:, None] * value)
    torch.testing.assert_close(slices.sum(0), weights @ value)


def test_plot_mix_stacks_negative_values_below_zero_and_leaves_room_above():
    fig = plot_mix(torch.tensor([0.5, 0.5]), torch.tensor([[2.0, -2.0], [2.0, -4.0]]), ["a", "b"], ["x", "y"])
    assert [float(p.get_y()) for p in fig.axes[0].patches] == [0.0, 0.0, 1.0, -1.0]  # b's slices stack on a's
    fig = plot_mix(torch.tensor([0.2, 0.8]), torch.tensor([[1.0, 0.0], [1.0, 0.5]]), ["a", "b"], ["x", "y"])
    low, high = fig.axes[0].get_ylim()
    assert low == 0.0
    assert high > 1.0  # the "x" stack reaches 0.2 + 0.8 = 1.0


@pytest.mark.parametrize(("weights", "value", "tokens", "features", "match"), [
    (torch.ones(2, 2), torch.ones(2, 3), ["a", "b"], ["x", "y", "z"], r"weights.shape=\(2, 2\)"),
    (torch.ones(3), torch.ones(2, 3), ["a", "b"], ["x", "y", "z"], r"pick one row"),
    (torch.ones(2), torch.ones(2, 3), ["a"], ["x", "y", "z"], "needs 2 tokens and 3 features, but got 1 tokens"),
    (torch.ones(2), torch.ones(2, 3), ["a", "b"], ["x"], "but got 2 tokens and 1 features"),
])
def test_plot_mix_explains_bad_shapes(weights, value, tokens, features, match):
    with pytest.raises(ValueError, match=match):
        plot_mix(weights, value, tokens, features)


# -- lesson 08: the masks of a padded batch ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "causal + padding"])
def test_batch_mask_follows_its_definition_cell_by_cell(kind):
    """[n, i, j] is True exactly when j is a real word (padding) and not after i (causal)."""
    _, lengths = sentence_batch()  # lengths 4, 3, 3
    S = 4
    mask = batch_mask(kind, lengths, S)
    assert mask.shape == (3, S, S)
    assert mask.dtype == torch.bool
    for n, length in enumerate(lengths.tolist()):
        for i in range(S):
            for j in range(S):
                allowed = ("causal" not in kind or j <= i) and ("padding" not in kind or j < length)
                assert bool(mask[n, i, j]) == allowed, (kind, n, i, j)


def test_batch_mask_rejects_unknown_kind():
    with pytest.raises(ValueError, match=r"kind must be one of .* but kind='future'"):
        batch_mask("future", torch.tensor([2]), 2)


# -- lesson 10: the online softmax, block by block ---------------------------------------------------------------
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
        assert step.running_sum == pytest.approx(float(torch.exp(seen - seen.max()).sum()))
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
    with pytest.raises(ValueError, match="block_size must be positive, but block_size=0"):
        online_softmax_steps(scores, value, 0)


def test_steps_figure_draws_the_running_numbers():
    steps = online_softmax_steps(*example(), 2)
    fig = plot_online_softmax_steps(steps)
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == [s.running_max for s in steps]
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


# -- lesson 12: a trained model's maps and loss curves -----------------------------------------------------------
def test_attention_grid_draws_every_layer_and_head():
    maps = (torch.rand(2, 3, 3).softmax(-1), torch.rand(2, 3, 3).softmax(-1))
    fig = plot_attention_grid(maps, ["a", "b", "c"], query_labels=["x", "y", "z"], title="grid")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["layer 0, head 0", "layer 0, head 1", "layer 1, head 0", "layer 1, head 1"]
    torch.testing.assert_close(heatmap(fig, "layer 1, head 0"), maps[1][0])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["x", "y", "z"]
    with pytest.raises(ValueError, match=r"one \(H, L, L\) map per layer.*\[\(1, 2, 3, 3\)\]"):
        plot_attention_grid((torch.rand(1, 2, 3, 3),), ["a", "b", "c"])


def test_attention_over_training_draws_one_map_per_step():
    snaps = {0: (torch.full((2, 1, 3, 3), 1 / 3),), 5: (torch.eye(3).expand(2, 1, 3, 3),)}
    fig = plot_attention_over_training(snaps, ["a", "b", "c"])
    assert [ax.get_title() for ax in fig.axes if ax.get_title().startswith("after")] == ["after 0 steps",
                                                                                         "after 5 steps"]
    torch.testing.assert_close(heatmap(fig, "after 5 steps"), torch.eye(3))
    with pytest.raises(ValueError, match=r"head must be an index in 0..0, but head=1"):
        plot_attention_over_training(snaps, ["a", "b", "c"], head=1)
    with pytest.raises(ValueError, match="snapshots is empty"):
        plot_attention_over_training({}, ["a"])


def test_loss_curves():
    fig = plot_loss_curves({"a": [2.0, 1.0, 0.1], "b": [2.0, 1.9, 1.8]})
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["a", "b"]
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    assert list(lines[0].get_ydata()) == [2.0, 1.0, 0.1]
    assert fig.axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="at least one non-empty curve"):
        plot_loss_curves({"a": []})


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


def test_steps_figure_says_every_running_number():
    from attention_lib.plotting import alt_text

    steps = online_softmax_steps(*example(), 2)
    text = alt_text(plot_online_softmax_steps(steps))
    assert "4 panels" in text
    assert "0 (nothing to correct yet)" in text
    assert "lands on the exact output after the last block" in text
    assert f"(exact {steps[-1].estimate[0].item():.3g})" in text
    assert "curve 2" not in text  # the dotted reference lines are not read out as curves


def test_softmax_backward_figure_says_each_keys_gradient():
    from attention_lib.plotting import alt_text

    p = torch.softmax(torch.tensor([0.0, 0.0, 2.0, 0.6]), -1)
    text = alt_text(plot_softmax_backward(p, torch.tensor([1.0, 1.3, 2.0, 1.4]), ["the", "cat", "purred", "softly"]))
    assert "D = 1.75" in text
    assert "purred (weight 0.659): dP 2, dP - D 0.249, dS 0.164" in text
    assert "Positive score gradient for: purred." in text
    assert "\n" not in text
