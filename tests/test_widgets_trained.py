"""The explorer of the trained models (lesson 12), and the pictures of a trained model."""

import pytest
import torch

from attention_lib.plotting import plot_attention_grid, plot_attention_over_training, plot_loss_curves
from attention_lib.training import load_trained
from attention_lib.widgets import render_trained, trained_explorer

SENTENCE = "the cat near the dogs purr(s)"


def heatmap(fig, index=0):
    return torch.from_numpy(fig.axes[index].images[0].get_array().data.copy()).float()


def test_render_draws_the_chosen_head_with_tokens_on_both_axes():
    trained = load_trained("agreement")
    _, _, attention = trained.run(SENTENCE)
    for head in (0, 1):
        fig = render_trained(trained, SENTENCE, head=head)
        torch.testing.assert_close(heatmap(fig), attention[0][head])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == SENTENCE.split()
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "purr(s) → purrs"
    assert ax.get_title() == "layer 0, head 1 · answer: the cat near the dogs purrs"


def test_render_accepts_a_task_name_and_shows_the_answer():
    fig = render_trained("reversal", "3 1 4 1 5 9 2 6")
    assert fig.axes[0].get_title().endswith("answer: 6 2 9 5 1 4 1 3")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][0] == "3 → 6"


@pytest.mark.parametrize(("text", "kwargs", "match"), [
    (SENTENCE, {"head": 2}, r"head must be an index in 0..1, but head=2"),
    (SENTENCE, {"layer": 2}, r"layer must be an index in 0..1, but layer=2"),
    ("the cat near the mouse purr(s)", {}, r"\['mouse'\] are not in the agreement vocabulary; allowed"),
])
def test_render_errors(text, kwargs, match):
    with pytest.raises(ValueError, match=match):
        render_trained("agreement", text, **kwargs)


def test_explorer_builds_and_redraws():
    box = trained_explorer("agreement")
    assert sorted(box.controls) == ["head", "layer", "text"]
    assert list(box.controls["head"].options) == [0, 1]
    first = box.figure
    box.controls["head"].value = 1
    assert box.figure is not first
    assert not torch.equal(heatmap(first), heatmap(box.figure))
    box.controls["text"].value = "a small cat with the black dogs behind the dogs sit(s)"
    assert heatmap(box.figure).shape == (11, 11)
    assert box.figure.axes[0].get_title().endswith("dogs sits")


def test_explorer_opens_on_the_chosen_layer_and_head():
    trained = load_trained("agreement")
    box = trained_explorer(trained, layer=1, head=0)
    assert (box.controls["layer"].value, box.controls["head"].value) == (1, 0)
    text = box.controls["text"].value
    torch.testing.assert_close(heatmap(box.figure), trained.run(text)[2][1][0])
    with pytest.raises(ValueError, match=r"head must be an index in 0..1, but head=5"):
        trained_explorer(trained, head=5)


def test_explorer_explains_an_input_it_cannot_read():
    box = trained_explorer(load_trained("reversal"))
    box.controls["text"].value = "1 2 3"
    texts = [t.get_text() for t in box.figure.axes[0].texts]
    assert len(texts) == 1
    assert "exactly 8 digits, but got 3" in texts[0]
    box.controls["text"].value = "1 2 3 4 5 6 7 8"
    assert box.figure.axes[0].get_title().endswith("answer: 8 7 6 5 4 3 2 1")


def test_explorer_offers_examples():
    box = trained_explorer("reversal", examples=["0 1 2 3 4 5 6 7"])
    assert list(box.controls["text"].options) == ["0 1 2 3 4 5 6 7"]
    assert box.controls["text"].value == "0 1 2 3 4 5 6 7"


# --- plots -----------------------------------------------------------------------------------------------------

def test_attention_grid_draws_every_layer_and_head():
    maps = (torch.rand(2, 3, 3).softmax(-1), torch.rand(2, 3, 3).softmax(-1))
    fig = plot_attention_grid(maps, ["a", "b", "c"], query_labels=["x", "y", "z"], title="grid")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["layer 0, head 0", "layer 0, head 1", "layer 1, head 0", "layer 1, head 1"]
    torch.testing.assert_close(heatmap(fig, [ax.get_title() for ax in fig.axes].index("layer 1, head 0")),
                               maps[1][0])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["x", "y", "z"]


def test_attention_grid_errors():
    with pytest.raises(ValueError, match=r"one \(H, L, L\) map per layer.*\[\(1, 2, 3, 3\)\]"):
        plot_attention_grid((torch.rand(1, 2, 3, 3),), ["a", "b", "c"])


def test_attention_over_training_draws_one_map_per_step():
    snaps = {0: (torch.full((2, 1, 3, 3), 1 / 3),), 5: (torch.eye(3).expand(2, 1, 3, 3),)}
    fig = plot_attention_over_training(snaps, ["a", "b", "c"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title().startswith("after")]
    assert titles == ["after 0 steps", "after 5 steps"]
    torch.testing.assert_close(heatmap(fig, [ax.get_title() for ax in fig.axes].index("after 5 steps")), torch.eye(3))
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


def test_block_diagram_draws_every_part_of_every_block():
    from attention_lib.plotting.blocks import plot_block_diagram
    from attention_lib.training.recipe import build_model

    texts = [t.get_text() for t in plot_block_diagram(build_model("agreement")).axes[0].texts]
    for part, count in (("token embedding", 1), ("+ position", 1), ("multi-head attention", 2), ("MLP", 2),
                        ("layer norm", 5), ("+", 4), ("read-out", 1), ("block 1", 1)):
        assert texts.count(part) == count, part
    with pytest.raises(ValueError, match="num_layers must be a positive int, but num_layers=0"):
        plot_block_diagram(num_layers=0)


def test_shipped_overview_shows_the_verb_head_on_a_moved_subject():
    from attention_lib.plotting.trained import plot_shipped_overview
    from attention_lib.training.probes import subject_head

    fig = plot_shipped_overview()
    agreement = load_trained("agreement")
    layer, head = subject_head(agreement.model)
    sentence = "near the dogs the small cat purr(s)"
    torch.testing.assert_close(heatmap(fig, 1), agreement.run(sentence)[2][layer][head])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][:2] == ["0: 3", "1: 1"]
