"""Lesson 06's picture and explorer: the mix adds up to the output, and the controls redraw it."""

import matplotlib
import pytest
import torch
from figures import bar_heights

import attention_lib as al
from attention_lib.lessons.data import toy_sentence
from attention_lib.plotting import plot_mix
from attention_lib.widgets.blend import blend_explorer, render_blend


def heights(ax):
    return bar_heights(ax, torch.float32)


def test_plot_mix_slices_are_weight_times_value_and_stack_to_the_output():
    g = torch.Generator().manual_seed(0)
    weights = torch.softmax(torch.randn(3, generator=g), dim=0)  # (S,)
    value = torch.rand(3, 2, generator=g)  # (S, Ev), non-negative
    fig = plot_mix(weights, value, ["a", "b", "c"], ["x", "y"])
    assert isinstance(fig, matplotlib.figure.Figure)
    slices = heights(fig.axes[0]).reshape(3, 2)  # one row of bars per word
    torch.testing.assert_close(slices, weights[:, None] * value)
    torch.testing.assert_close(slices.sum(0), al.blend(weights[None], value)[0])


def test_plot_mix_handles_negative_values_below_zero():
    fig = plot_mix(torch.tensor([0.5, 0.5]), torch.tensor([[2.0, -2.0], [2.0, -4.0]]), ["a", "b"], ["x", "y"])
    bottoms = [float(p.get_y()) for p in fig.axes[0].patches]
    assert bottoms == [0.0, 0.0, 1.0, -1.0]  # b's slices stack on a's, upwards and downwards


@pytest.mark.parametrize(("weights", "value", "tokens", "features", "match"), [
    (torch.ones(2, 2), torch.ones(2, 3), ["a", "b"], ["x", "y", "z"], r"weights.shape=\(2, 2\)"),
    (torch.ones(3), torch.ones(2, 3), ["a", "b"], ["x", "y", "z"], r"pick one row"),
    (torch.ones(2), torch.ones(2, 3), ["a"], ["x", "y", "z"], "needs 2 tokens and 3 features, but got 1 tokens"),
    (torch.ones(2), torch.ones(2, 3), ["a", "b"], ["x"], "but got 2 tokens and 1 features"),
])
def test_plot_mix_explains_bad_shapes(weights, value, tokens, features, match):
    with pytest.raises(ValueError, match=match):
        plot_mix(weights, value, tokens, features)


def test_render_blend_draws_the_weights_of_the_chosen_word():
    fig = render_blend("purred", focus=1.0)
    sentence = toy_sentence()
    expected = al.calculate_attention(sentence.query, sentence.key, sentence.value)[1][2]
    torch.testing.assert_close(heights(fig.axes[0]), expected)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(sentence.tokens)


def test_render_blend_changes_with_focus_and_word():
    uniform = heights(render_blend("purred", focus=0.0).axes[0])
    sharp = heights(render_blend("purred", focus=3.0).axes[0])
    other = heights(render_blend("softly", focus=1.0).axes[0])
    torch.testing.assert_close(uniform, torch.full((4,), 0.25))
    assert sharp.argmax().item() == 1  # "purred" looks at "cat"
    assert sharp.max() > 0.99
    assert other.argmax().item() == 2  # "softly" looks at "purred"


@pytest.mark.parametrize(("kwargs", "match"), [({"word": "dog"}, "word must be one of"),
                                               ({"focus": -1.0}, "focus must be non-negative")])
def test_render_blend_explains_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        render_blend(**kwargs)


def test_blend_explorer_redraws_when_a_control_changes():
    box = blend_explorer()
    first = box.figure
    assert isinstance(first, matplotlib.figure.Figure)
    box.controls["focus"].value = 0.0
    assert box.figure is not first
    torch.testing.assert_close(heights(box.figure.axes[0]), torch.full((4,), 0.25))
    second = box.figure
    box.controls["word"].value = "cat"
    assert box.figure is not second
    assert box.figure.axes[0].get_title() == "weights of 'cat'"


def test_plot_mix_leaves_room_above_the_tallest_stack():
    fig = plot_mix(torch.tensor([0.2, 0.8]), torch.tensor([[1.0, 0.0], [1.0, 0.5]]), ["a", "b"], ["x", "y"])
    low, high = fig.axes[0].get_ylim()
    assert low == 0.0
    assert high > 1.0  # the "x" stack reaches 0.2 + 0.8 = 1.0
