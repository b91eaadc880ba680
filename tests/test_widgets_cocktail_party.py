"""Lesson 01's explorer: the render function draws the right numbers, and the explorer redraws on change."""

import pytest
import torch
from figures import bar_heights

from attention_lib import calculate_attention
from attention_lib.lessons.data import TOKENS, toy_sentence
from attention_lib.widgets import cocktail_party_explorer, render_cocktail_party


@pytest.mark.parametrize("word", TOKENS)
def test_weights_panel_shows_the_words_row(word):
    fig = render_cocktail_party(word, focus=2.0)
    x = toy_sentence().embeddings
    expected = torch.softmax(2.0 * x @ x.T, dim=-1)[TOKENS.index(word)]
    torch.testing.assert_close(bar_heights(fig.axes[0]), expected.double())
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(TOKENS)


def test_meaning_panel_shows_before_and_after():
    fig = render_cocktail_party("purred", focus=1.0)
    x = toy_sentence().embeddings
    new, _ = calculate_attention(x, x, x, scale=1.0)
    heights = bar_heights(fig.axes[1])  # 4 "before" bars, then 4 "after" bars
    torch.testing.assert_close(heights[:4], x[2].double())
    torch.testing.assert_close(heights[4:], new[2].double())


def test_more_focus_sharpens_the_weights():
    blurred = bar_heights(render_cocktail_party("cat", focus=0.0).axes[0])
    sharp = bar_heights(render_cocktail_party("cat", focus=10.0).axes[0])
    torch.testing.assert_close(blurred, torch.full((4,), 0.25, dtype=torch.float64))
    assert sharp.max() > 0.99
    assert TOKENS[int(sharp.argmax())] == "cat"


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"word": "dog"}, ValueError, "one of the sentence's tokens"),
    ({"focus": -1.0}, ValueError, "finite number >= 0"),
    ({"focus": float("nan")}, ValueError, "finite number >= 0"),
    ({"focus": "high"}, TypeError, "focus must be a number"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        render_cocktail_party(**kwargs)
    with pytest.raises(error, match=match):
        cocktail_party_explorer(**kwargs)


def test_explorer_redraws_when_a_control_changes():
    box = cocktail_party_explorer("the", focus=1.0)
    first = box.figure
    first_heights = bar_heights(first.axes[0])
    box.controls["word"].value = "softly"
    assert box.figure is not first
    assert not torch.equal(bar_heights(box.figure.axes[0]), first_heights)
    second = box.figure
    box.controls["focus"].value = 5.0
    assert box.figure is not second
    assert "focus 5" in box.figure.axes[0].get_title()
