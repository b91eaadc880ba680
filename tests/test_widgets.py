"""Every explorer of the lessons, tested from one table: one row per explorer (``ROWS``), four kinds of test.

1. It draws the package's numbers: what ``render`` draws equals what the tested function it wraps computes.
2. Its picture follows its parameters: two settings draw different numbers.
3. Bad arguments are explained: the error's type and message (for ``render``, and for the explorer when it takes
   the same arguments).
4. The explorer is wired: moving a control draws a new figure, and that figure shows what ``render`` draws for the
   controls' values.

To add an explorer, add a row. The behaviours that only one explorer has are tested below the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pytest
import torch
from figures import bar_heights
from matplotlib.colors import to_hex

from attention_lib import calculate_attention
from attention_lib import widgets as w
from attention_lib.experiments import batch_mask, detective_team, scaler_weights, temperature_weights
from attention_lib.plotting import online_softmax_steps
from attention_lib.plotting.masking import ALLOWED_STYLE
from attention_lib.toy_data import TOKENS, sentence_batch, toy_sentence
from attention_lib.training.learning_to_attend import load_trained
from attention_lib.widgets.memory_efficient import EXAMPLE_SCORES, EXAMPLE_VALUES

SENTENCE = "the cat near the dogs purr(s)"  # an input of the shipped agreement model


# -- reading numbers back from a figure --------------------------------------------------------------------------
def bars(*axes: int):
    """The bar heights of the figure's axes ``axes``, one after the other."""
    return lambda fig: torch.cat([bar_heights(fig.axes[i]) for i in axes])


def heatmaps(fig) -> torch.Tensor:
    """The numbers of every heatmap of the figure (blocked cells read as 0), flattened, one after the other."""
    return torch.cat([torch.from_numpy(np.ma.filled(ax.images[0].get_array(), 0.0)).double().flatten()
                      for ax in fig.axes if ax.images])


def mask_cells(fig) -> torch.Tensor:
    """The mask drawn as squares on the first axes: 1 = may attend, 0 = blocked, row by row."""
    allowed = to_hex(ALLOWED_STYLE["facecolor"])
    return torch.tensor([float(to_hex(cell.get_facecolor()) == allowed) for cell in fig.axes[0].patches])


def chosen_word_bars(fig) -> torch.Tensor:
    """The detective team's last panel: the chosen word's weights, head by head."""
    (ax,) = [ax for ax in fig.axes if ax.get_title().startswith("where")]
    return bar_heights(ax)


def running_max(fig) -> torch.Tensor:
    """The online softmax's running max, drawn as a dashed line over the scores."""
    return torch.tensor([float(fig.axes[0].get_lines()[0].get_ydata()[0])], dtype=torch.float64)


# -- what the package computes, for the rows' first kind of test ---------------------------------------------------
def cocktail_party_numbers(word: str, focus: float) -> torch.Tensor:
    x = toy_sentence().embeddings
    new, weights = calculate_attention(x, x, x, scale=focus)
    i = TOKENS.index(word)
    return torch.cat([weights[i], x[i], new[i]]).double()


def library_search_numbers(query: list[float], sharpness: float, best: str) -> torch.Tensor:
    s = toy_sentence()
    soft, weights = calculate_attention(torch.tensor([query]), s.key, s.value, scale=sharpness)
    return torch.cat([weights[0], soft[0], s.value[TOKENS.index(best)]]).double()


def blend_numbers(word: str, focus: float) -> torch.Tensor:
    s = toy_sentence()
    i = s.tokens.index(word)
    _, weights = calculate_attention(s.query[i:i + 1] * focus, s.key, s.value)  # (1, S)
    return torch.cat([weights[0], (weights[0][:, None] * s.value).flatten()]).double()


def masking_numbers(sentence: int, kind: str) -> torch.Tensor:
    x, lengths = sentence_batch()
    mask = batch_mask(kind, lengths, x.shape[1])
    _, weights = calculate_attention(x, x, x, attn_mask=mask)
    return torch.cat([mask[sentence].flatten().double(), weights[sentence].flatten().double()])


def detective_numbers(word: str) -> torch.Tensor:
    _, weights = detective_team(("animal", "action"), 5.0, 2)  # (H, L, S)
    return torch.cat([weights.flatten(), weights[:, TOKENS.index(word)].flatten()]).double()


@dataclass
class Row:
    """One explorer: its render function, its explorer, and what to check them with."""

    render: Callable
    explorer: Callable
    read: Callable  # figure -> the numbers it draws (a tensor)
    draws: tuple[dict, Callable]  # (render's arguments, () -> the numbers the package computes for them)
    differ: tuple[dict, dict]  # two settings that must draw different numbers
    bad: list[tuple[dict, type, str]] = field(default_factory=list)  # (arguments, error, message)
    moves: dict = field(default_factory=dict)  # control -> new value, moved one after the other
    explorer_takes_arguments: bool = False  # the explorer takes render's arguments (and checks them the same way)


ROWS = {
    "cocktail_party": Row(
        w.render_cocktail_party, w.cocktail_party_explorer, bars(0, 1),
        draws=({"word": "purred", "focus": 2.0}, lambda: cocktail_party_numbers("purred", 2.0)),
        differ=({"word": "cat", "focus": 0.0}, {"word": "cat", "focus": 10.0}),
        bad=[({"word": "dog"}, ValueError, "one of the sentence's tokens"),
             ({"focus": -1.0}, ValueError, "focus must be at least 0, but focus=-1.0"),
             ({"focus": float("nan")}, ValueError, "focus must be a finite number, but focus=nan"),
             ({"focus": "high"}, TypeError, "focus must be a number")],
        moves={"word": "softly", "focus": 5.0}, explorer_takes_arguments=True),
    "library_search": Row(
        w.render_library_search, w.library_search_explorer, bars(0, 1),
        draws=({"animal": 0.0, "action": 1.0, "gentle": 1.0, "grammar": 0.0, "sharpness": 2.0},
               lambda: library_search_numbers([0.0, 1.0, 1.0, 0.0], 2.0, best="purred")),
        differ=({"animal": 1.0}, {"animal": 0.0, "grammar": 1.0}),
        bad=[({"sharpness": -0.5}, ValueError, "sharpness must be at least 0, but sharpness=-0.5"),
             ({"gentle": float("inf")}, ValueError, "gentle must be a finite number"),
             ({"animal": "yes"}, TypeError, "animal must be a number"),
             ({"grammar": True}, TypeError, "grammar must be a number")],
        moves={"grammar": 2.0, "sharpness": 0.0}, explorer_takes_arguments=True),
    "scaler": Row(
        w.render_scaler, w.scaler_explorer, bars(0),
        draws=({"d_k": 16, "scaled": True}, lambda: scaler_weights(16, True)[0].double()),
        differ=({"d_k": 16}, {"d_k": 512}),
        bad=[*(({"d_k": d_k}, ValueError, "d_k must be positive") for d_k in (0, -4)),
             *(({"d_k": d_k}, TypeError, "d_k must be an int") for d_k in (2.5, True))],
        moves={"scaled": False, "d_k": 8}),
    "percentages": Row(
        w.render_percentages, w.percentages_explorer, bars(1),
        draws=({"temperature": 0.5, "word": "purred"}, lambda: temperature_weights(0.5)[2].double()),
        differ=({"temperature": 1.0, "word": "purred"}, {"temperature": 0.2, "word": "purred"}),
        bad=[({"temperature": t}, ValueError, "temperature must be positive") for t in (0.0, -1.0)]
            + [({"temperature": float("nan")}, ValueError, "temperature must be a finite number")]
            + [({"temperature": t}, TypeError, "temperature must be a number, but got") for t in ("hot", True)]
            + [({"word": "dog"}, ValueError, "word must be one of the sentence's tokens")],
        moves={"temperature": 0.3, "word": "cat"}),
    "blend": Row(
        w.render_blend, w.blend_explorer, bars(0, 1),
        draws=({"word": "softly", "focus": 2.0}, lambda: blend_numbers("softly", 2.0)),
        differ=({"word": "purred", "focus": 1.0}, {"word": "softly", "focus": 1.0}),
        bad=[({"word": "dog"}, ValueError, "word must be one of"),
             ({"focus": -1.0}, ValueError, "focus must be non-negative")],
        moves={"word": "cat", "focus": 0.0}),
    "masking": Row(
        w.render_masking, w.masking_explorer, lambda fig: torch.cat([mask_cells(fig).double(), heatmaps(fig)]),
        draws=({"sentence": 1, "kind": "causal + padding"}, lambda: masking_numbers(1, "causal + padding")),
        differ=({"sentence": 1, "kind": "none"}, {"sentence": 1, "kind": "padding"}),
        bad=[({"sentence": 3, "kind": "causal"}, ValueError, "sentence must be an index in 0..2, but sentence=3"),
             ({"kind": "future"}, ValueError, r"kind must be one of .* but kind='future'")],
        moves={"kind": "none", "sentence": 1}),
    "detective_team": Row(
        w.render_detective_team, w.detective_team_explorer,
        lambda fig: torch.cat([heatmaps(fig), chosen_word_bars(fig)]),
        draws=({"word": "softly", "clue_0": "animal", "clue_1": "action", "loudness": 5.0, "num_heads": 2},
               lambda: detective_numbers("softly")),
        differ=({"word": "purred", "clue_0": "animal"}, {"word": "purred", "clue_0": "gentle"}),
        bad=[({"word": "dog"}, ValueError, "word must be one of"),
             ({"clue_0": "colour"}, ValueError, "clues must be two of"),
             ({"loudness": -1.0}, ValueError, "loudness must be at least 0, but loudness=-1.0"),
             ({"num_heads": 3}, ValueError, "embed_dim must be divisible by num_heads")],
        moves={"clue_1": "grammar", "num_heads": 1}),
    "online_softmax": Row(
        w.render_online_softmax, w.online_softmax_explorer, running_max,
        draws=({"block": 3, "block_size": 2}, lambda: torch.tensor([online_softmax_steps(
            torch.tensor(EXAMPLE_SCORES, dtype=torch.float64), torch.tensor(EXAMPLE_VALUES, dtype=torch.float64),
            2)[2].running_max], dtype=torch.float64)),
        differ=({"block": 1, "block_size": 2}, {"block": 2, "block_size": 2}),
        bad=[({"block": 5, "block_size": 2}, ValueError,
              r"block must be between 1 and 4 \(the number of blocks of 2 keys\)")],
        moves={"block": 2, "block_size": 1}),
    "trained": Row(
        partial(w.render_trained, "agreement"), w.trained_explorer, heatmaps,
        draws=({"text": SENTENCE, "head": 1}, lambda: load_trained("agreement").run(SENTENCE)[2][0][1].double()
               .flatten()),
        differ=({"text": SENTENCE, "head": 0}, {"text": SENTENCE, "head": 1}),
        bad=[({"text": SENTENCE, "head": 2}, ValueError, r"head must be an index in 0..1, but head=2"),
             ({"text": SENTENCE, "layer": 2}, ValueError, r"layer must be an index in 0..1, but layer=2"),
             ({"text": "the cat near the mouse purr(s)"}, ValueError,
              r"\['mouse'\] are not in the agreement vocabulary; allowed")],
        moves={"head": 1, "text": "a small cat with the black dogs behind the dogs sit(s)"}),
}
NAMES = list(ROWS)
BAD = [(name, *case) for name, row in ROWS.items() for case in row.bad]


@pytest.mark.parametrize("name", NAMES)
def test_it_draws_the_packages_numbers(name):
    row = ROWS[name]
    arguments, expected = row.draws
    torch.testing.assert_close(row.read(row.render(**arguments)), expected())


@pytest.mark.parametrize("name", NAMES)
def test_its_picture_follows_its_parameters(name):
    row = ROWS[name]
    first, second = (row.read(row.render(**arguments)) for arguments in row.differ)
    assert first.shape != second.shape or not torch.allclose(first, second)


@pytest.mark.parametrize(("name", "arguments", "error", "match"), BAD,
                         ids=[f"{name}-{'-'.join(map(str, arguments.values()))}" for name, arguments, *_ in BAD])
def test_bad_arguments_are_explained(name, arguments, error, match):
    row = ROWS[name]
    with pytest.raises(error, match=match):
        row.render(**arguments)
    if row.explorer_takes_arguments:
        with pytest.raises(error, match=match):
            row.explorer(**arguments)


@pytest.mark.parametrize("name", NAMES)
def test_the_explorer_redraws_what_render_draws_for_its_controls(name):
    row = ROWS[name]
    box = row.explorer()
    assert set(row.moves) <= set(box.controls)
    for control, value in row.moves.items():
        before = box.figure
        box.controls[control].value = value
        assert box.figure is not before, f"moving {control} did not redraw"
        drawn = row.read(box.figure)
        assert drawn.shape != row.read(before).shape or not torch.allclose(drawn, row.read(before))
        values = {name: control.value for name, control in box.controls.items()}
        torch.testing.assert_close(drawn, row.read(row.render(**values)))


# -- what only one explorer does ---------------------------------------------------------------------------------
def test_cocktail_party_more_focus_sharpens_the_weights_towards_the_word_itself():
    blurred = bar_heights(w.render_cocktail_party("cat", focus=0.0).axes[0])
    sharp = bar_heights(w.render_cocktail_party("cat", focus=10.0).axes[0])
    torch.testing.assert_close(blurred, torch.full((4,), 0.25, dtype=torch.float64))
    assert sharp.max() > 0.99
    assert TOKENS[int(sharp.argmax())] == "cat"


def test_library_search_an_animal_query_finds_the_cat():
    fig = w.render_library_search(animal=1.0, sharpness=10.0)
    assert int(bar_heights(fig.axes[0]).argmax()) == TOKENS.index("cat")
    assert "'cat'" in fig.axes[0].get_title()


def test_blend_purred_looks_at_cat_and_softly_at_purred():
    sharp = bar_heights(w.render_blend("purred", focus=3.0).axes[0])
    assert TOKENS[int(sharp.argmax())] == "cat"
    assert sharp.max() > 0.99
    assert TOKENS[int(bar_heights(w.render_blend("softly", focus=1.0).axes[0]).argmax())] == "purred"


@pytest.mark.parametrize("kind", ["none", "causal", "padding", "causal + padding"])
def test_masking_draws_every_kind_and_leaves_blocked_cells_out_of_the_colour_scale(kind):
    fig = w.render_masking(2, kind)
    torch.testing.assert_close(ROWS["masking"].read(fig), masking_numbers(2, kind))
    weights_ax = fig.axes[1]
    hidden = torch.from_numpy(np.ma.getmaskarray(weights_ax.images[0].get_array())).flatten()
    blocked = mask_cells(fig) == 0
    assert torch.equal(hidden, blocked), "blocked cells are drawn as blocked, not as a weight of 0"
    assert sum(t.get_text() == "✗" for t in weights_ax.texts) == int(blocked.sum())
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "cat", "sat", "<pad>"]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["may attend", "blocked"]


def test_detective_team_clues_and_loudness_steer_the_heads():
    def weights(**kwargs):
        fig = w.render_detective_team(**kwargs)
        return [torch.from_numpy(np.ma.filled(ax.images[0].get_array(), 0.0)) for ax in fig.axes if ax.images]

    assert int(weights(word="purred", clue_0="animal")[0][2].argmax()) == TOKENS.index("cat")
    assert int(weights(word="purred", clue_0="gentle")[0][2].argmax()) == TOKENS.index("softly")
    for head in weights(word="the", loudness=0.0):
        torch.testing.assert_close(head, torch.full((4, 4), 0.25, dtype=head.dtype))
    (lone,) = weights(word="purred", num_heads=1)
    team = detective_team()[1]
    assert lone[2].max() < team[:, 2].max(dim=-1).values.min()  # no head of the team is that undecided


def test_online_softmax_writes_out_the_step_and_hatches_the_current_block():
    fig = w.render_online_softmax(3, 2)
    text = fig.axes[1].texts[0].get_text()
    assert "new running max m    = max(1.500, 3.000) = 3.000" in text
    assert "correction = exp(1.500 - 3.000) = 0.223" in text
    hatches = [bar.get_hatch() or "" for bar in fig.axes[0].patches]
    assert hatches[:4] == ["", "", "", ""]  # folded in already
    assert len(set(hatches[4:6])) == 1 != len(set(hatches[4:]))
    last = w.render_online_softmax(4, 2).axes[1].texts[0].get_text()
    assert "(m did not move)" in last
    assert "(equal: all keys seen)" in last


def test_online_softmax_explorer_keeps_the_block_slider_inside_the_blocks():
    box = w.online_softmax_explorer()
    box.controls["block"].value = 4
    box.controls["block_size"].value = 4  # two blocks now: the slider follows
    assert box.controls["block"].max == 2
    assert "after block 2 of 2" in box.figure.axes[0].get_title()


def test_trained_shows_the_answer_with_tokens_on_both_axes():
    ax = w.render_trained("agreement", SENTENCE, head=1).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == SENTENCE.split()
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "purr(s) → purrs"
    assert ax.get_title() == "layer 0, head 1 · answer: the cat near the dogs purrs"
    reversal = w.render_trained("reversal", "3 1 4 1 5 9 2 6").axes[0]
    assert reversal.get_title().endswith("answer: 6 2 9 5 1 4 1 3")
    assert [t.get_text() for t in reversal.get_yticklabels()][0] == "3 → 6"


def test_trained_explorer_explains_an_input_it_cannot_read_and_offers_examples():
    box = w.trained_explorer(load_trained("reversal"), examples=["0 1 2 3 4 5 6 7"])
    assert list(box.controls["text"].options) == ["0 1 2 3 4 5 6 7"]
    box.controls["text"].value = "1 2 3"
    (message,) = [t.get_text() for t in box.figure.axes[0].texts]
    assert "exactly 8 digits, but got 3" in message
    box.controls["text"].value = "1 2 3 4 5 6 7 8"
    assert box.figure.axes[0].get_title().endswith("answer: 8 7 6 5 4 3 2 1")


def heatmap(fig, index: int = 0) -> torch.Tensor:
    """The numbers of the heatmap on the figure's axes ``index``."""
    return torch.from_numpy(np.ma.filled(fig.axes[index].images[0].get_array(), 0.0)).float()


def test_trained_explorer_opens_on_the_chosen_layer_and_head():
    trained = load_trained("agreement")
    box = w.trained_explorer(trained, layer=1, head=0)
    assert (box.controls["layer"].value, box.controls["head"].value) == (1, 0)
    text = box.controls["text"].value
    torch.testing.assert_close(heatmap(box.figure), trained.run(text)[2][1][0])
    with pytest.raises(ValueError, match=r"head must be an index in 0..1, but head=5"):
        w.trained_explorer(trained, head=5)


def test_block_diagram_draws_every_part_of_every_block():
    from attention_lib.plotting.learning_to_attend.blocks import plot_block_diagram
    from attention_lib.training.learning_to_attend import build_model

    texts = [t.get_text() for t in plot_block_diagram(build_model("agreement")).axes[0].texts]
    for part, count in (("token embedding", 1), ("+ position", 1), ("multi-head attention", 2), ("MLP", 2),
                        ("layer norm", 5), ("+", 4), ("read-out", 1), ("block 1", 1)):
        assert texts.count(part) == count, part
    with pytest.raises(ValueError, match="num_layers must be positive, but num_layers=0"):
        plot_block_diagram(num_layers=0)


def test_shipped_overview_shows_the_verb_head_on_a_moved_subject():
    from attention_lib.plotting.learning_to_attend.trained import plot_shipped_overview
    from attention_lib.training.learning_to_attend import subject_head

    fig = plot_shipped_overview()
    agreement = load_trained("agreement")
    layer, head = subject_head(agreement.model)
    sentence = "near the dogs the cat purr(s)"
    torch.testing.assert_close(heatmap(fig, 1), agreement.run(sentence)[2][layer][head])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][:2] == ["0: 3", "1: 1"]
