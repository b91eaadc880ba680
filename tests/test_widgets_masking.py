"""The masking explorer (lesson 08): its mask builder, its render function, and the explorer's wiring."""

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex

from attention_lib.lessons.data import sentence_batch
from attention_lib.lessons.experiments import MASK_KINDS, batch_mask
from attention_lib.plotting.masks import ALLOWED_STYLE
from attention_lib.widgets import masking_explorer, render_masking


def images(fig):
    """The (mask, weights) arrays drawn on the figure: the mask's cells (1 = may attend), then the heatmap."""
    cells = fig.axes[0].patches  # one square per (query, key), row by row
    allowed = [to_hex(cell.get_facecolor()) == to_hex(ALLOWED_STYLE["facecolor"]) for cell in cells]
    size = int(len(cells) ** 0.5)
    mask = np.array(allowed, dtype=float).reshape(size, size)
    weights = fig.axes[1].images[0].get_array()
    return [mask, np.ma.filled(weights, 0.0)]


def test_blocked_weights_are_drawn_as_blocked_not_as_zero():
    fig = render_masking(1, "causal + padding")
    weights_ax = fig.axes[1]
    hidden = np.ma.getmaskarray(weights_ax.images[0].get_array())
    mask = images(fig)[0]
    assert (hidden == (mask == 0)).all()  # exactly the blocked cells are left out of the colour scale
    assert sum(t.get_text() == "✗" for t in weights_ax.texts) == int((mask == 0).sum())
    assert "blocked" in weights_ax.get_xlabel()
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["may attend", "blocked"]



def test_batch_mask_kinds():
    _, lengths = sentence_batch()  # lengths 4, 3, 3
    S = 4
    assert bool(batch_mask("none", lengths, S).all())
    causal = batch_mask("causal", lengths, S)
    assert torch.equal(causal[1], torch.ones(S, S, dtype=torch.bool).tril())
    padding = batch_mask("padding", lengths, S)
    assert padding.shape == (3, S, S)
    assert not bool(padding[1, :, 3].any())
    assert bool(padding[0].all())
    assert torch.equal(batch_mask("causal + padding", lengths, S), causal & padding)


def test_batch_mask_rejects_unknown_kind():
    with pytest.raises(ValueError, match=r"kind must be one of .* but kind='future'"):
        batch_mask("future", torch.tensor([2]), 2)


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_render_draws_the_mask_and_weights_with_labels(kind):
    fig = render_masking(2, kind)
    mask, weights = images(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "cat", "sat", "<pad>"]
    assert mask.shape == weights.shape == (4, 4)
    assert ((weights > 0) <= (mask > 0)).all()  # no weight where the mask blocks
    assert abs(weights.sum(-1) - 1).max() < 1e-5


def test_render_changes_with_its_parameters():
    none_mask, none_weights = images(render_masking(1, "none"))
    padded_mask, padded_weights = images(render_masking(1, "padding"))
    assert (none_mask != padded_mask).any()
    assert (none_weights != padded_weights).any()
    assert (padded_weights[:, 3] == 0).all()  # nobody attends to the <pad> of 'the dog barked'
    other = images(render_masking(0, "padding"))[1]
    assert (other != padded_weights).any()


def test_render_rejects_bad_sentence():
    with pytest.raises(ValueError, match="sentence must be an index in 0..2, but sentence=3"):
        render_masking(3, "causal")


def test_explorer_redraws_when_a_control_changes():
    box = masking_explorer()
    first = box.figure
    before = images(first)[0]
    box.controls["kind"].value = "none"
    assert box.figure is not first
    assert (images(box.figure)[0] != before).any()
    second = box.figure
    box.controls["sentence"].value = 1
    assert box.figure is not second
    assert [t.get_text() for t in box.figure.axes[0].get_xticklabels()][-1] == "<pad>"
