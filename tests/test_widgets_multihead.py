"""The detective-team explorer (lesson 09): its render function and the explorer's wiring."""

import pytest
import torch

from attention_lib.widgets import detective_team_explorer, render_detective_team

TOKENS = ["the", "cat", "purred", "softly"]



@pytest.fixture
def weights():
    """Two heads with different focus: head 0 looks at 'cat', head 1 at 'purred'."""
    scores = torch.zeros(2, 4, 4)
    scores[0, :, 1] = 3.0
    scores[1, :, 2] = 3.0
    scores[1, 3, 3] = 1.0
    return scores.softmax(dim=-1)


def drawn(fig):
    """The heatmap and the bar heights drawn on the figure."""
    heatmap = fig.axes[0].images[0].get_array().data.copy()
    bars = [bar.get_height() for bar in fig.axes[1].patches]
    return heatmap, torch.tensor(bars)


def test_render_draws_the_head_and_the_word_row(weights):
    fig = render_detective_team(weights, TOKENS, head=1, word="softly", head_names=["who?", "what?"])
    heatmap, bars = drawn(fig)
    torch.testing.assert_close(torch.from_numpy(heatmap).float(), weights[1])
    torch.testing.assert_close(bars, weights[1, 3].double())
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == TOKENS
    assert fig.axes[0].get_title() == "what?"
    assert fig.axes[1].get_title() == "'softly' looks most at 'purred' (0.81)"
    framed = [p for p in fig.axes[0].patches if p.get_edgecolor()[0] > 0.5]
    assert len(framed) == 1
    assert framed[0].get_y() == pytest.approx(2.5)  # the row of 'softly'


def test_render_changes_with_its_parameters(weights):
    heat0, bars0 = drawn(render_detective_team(weights, TOKENS, head=0, word="the"))
    heat1, bars1 = drawn(render_detective_team(weights, TOKENS, head=1, word="the"))
    assert (heat0 != heat1).any()
    assert not torch.equal(bars0, bars1)
    _, bars_softly = drawn(render_detective_team(weights, TOKENS, head=1, word="softly"))
    assert not torch.equal(bars1, bars_softly)


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((torch.ones(1, 2, 4, 4), TOKENS), {}, r"\(H, L, S\), but got \(1, 2, 4, 4\).*weights\[0\]"),
    ((torch.ones(2, 4, 4), TOKENS[:3]), {}, "one token per word"),
    ((torch.ones(2, 4, 4), TOKENS), {"head": 2}, r"head must be an index in 0..1, but head=2"),
    ((torch.ones(2, 4, 4), TOKENS), {"word": "dog"}, "word must be one of"),
    ((torch.ones(2, 4, 4), TOKENS), {"head_names": ["a"]}, "2 heads but 1 names"),
])
def test_render_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        render_detective_team(*args, **kwargs)


def test_explorer_builds_and_redraws(weights):
    box = detective_team_explorer(weights, TOKENS, head_names=["who?", "what?"])
    assert sorted(box.controls) == ["head", "word"]
    assert [label for label, _ in box.controls["head"].options] == ["who?", "what?"]
    first = box.figure
    box.controls["head"].value = 1
    second = box.figure
    assert second is not first
    assert (drawn(first)[0] != drawn(second)[0]).any()
    box.controls["word"].value = "purred"
    assert box.figure.axes[0].get_title() == "what?"
    assert box.figure.axes[1].get_title().startswith("'purred' looks most at")


def test_render_names_no_favourite_for_an_even_row():
    from attention_lib.widgets.multihead import render_detective_team

    weights = torch.full((1, 4, 4), 0.25)
    fig = render_detective_team(weights, ["the", "cat", "purred", "softly"], head=0, word="the")
    assert fig.axes[1].get_title() == "'the' spreads its attention evenly"
