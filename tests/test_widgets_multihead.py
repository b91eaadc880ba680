"""The detective-team explorer (lesson 09): it recomputes the heads from the projections the learner picks."""

import numpy as np
import pytest
import torch

from attention_lib.lessons.experiments import detective_team
from attention_lib.widgets import detective_team_explorer, render_detective_team

TOKENS = ["the", "cat", "purred", "softly"]


def heatmaps(fig):
    """The weights drawn on each head's heatmap."""
    return [torch.from_numpy(np.ma.filled(ax.images[0].get_array(), 0.0)).float() for ax in fig.axes if ax.images]


def bars(fig):
    """The bar heights of the last panel (the chosen word's weights, head by head)."""
    (ax,) = [ax for ax in fig.axes if ax.get_title().startswith("where")]
    return torch.tensor([bar.get_height() for bar in ax.patches])


def test_render_draws_each_head_from_the_package():
    fig = render_detective_team("softly", "animal", "action", 5.0, 2)
    _, weights = detective_team(("animal", "action"), 5.0, 2)
    drawn = heatmaps(fig)
    assert len(drawn) == 2
    for h in range(2):
        torch.testing.assert_close(drawn[h], weights[h])
    torch.testing.assert_close(bars(fig), weights[:, 3].reshape(-1).double())  # head 0's bars, then head 1's
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == TOKENS
    assert fig.axes[0].get_title() == "detective 0: animal?"
    framed = [p for p in fig.axes[0].patches if p.get_width() == len(TOKENS)]
    assert len(framed) == 1
    assert framed[0].get_y() == pytest.approx(2.5)


def test_one_lone_detective_splits_its_attention():
    fig = render_detective_team("purred", num_heads=1)
    (lone,) = heatmaps(fig)
    team = detective_team()[1]
    assert fig.axes[0].get_title() == "lone detective: animal + action"
    assert lone[2].max() < team[:, 2].max(dim=-1).values.min()  # no head of the team is that undecided


def test_changing_a_clue_changes_where_the_detective_looks():
    before = heatmaps(render_detective_team("purred", clue_0="animal"))[0]
    after = heatmaps(render_detective_team("purred", clue_0="gentle"))[0]
    assert int(before[2].argmax()) == TOKENS.index("cat")
    assert int(after[2].argmax()) == TOKENS.index("softly")  # the gentlest word


def test_loudness_zero_spreads_every_row_evenly():
    for head in heatmaps(render_detective_team("the", loudness=0.0)):
        torch.testing.assert_close(head, torch.full((4, 4), 0.25))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"word": "dog"}, "word must be one of"),
    ({"clue_0": "colour"}, "clues must be two of"),
    ({"loudness": -1.0}, "loudness must be a number >= 0"),
    ({"num_heads": 3}, "embed_dim must be divisible by num_heads"),
])
def test_render_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        render_detective_team(**kwargs)


def test_explorer_builds_and_redraws():
    box = detective_team_explorer()
    assert sorted(box.controls) == ["clue_0", "clue_1", "loudness", "num_heads", "word"]
    first = box.figure
    box.controls["clue_1"].value = "grammar"
    second = box.figure
    assert second is not first
    assert not torch.equal(heatmaps(first)[1], heatmaps(second)[1])
    box.controls["num_heads"].value = 1
    assert len(heatmaps(box.figure)) == 1
