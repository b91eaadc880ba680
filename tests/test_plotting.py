"""The course's figures: colour-blind-safe categories, plain log ticks, masks drawn as masks, shape diagrams."""

import re

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from attention_lib.attention_only import phase_change  # noqa: E402
from attention_lib.plotting import (  # noqa: E402
    OKABE_ITO,
    plot_bars,
    plot_heatmap,
    plot_heatmaps,
    plot_lines,
    plot_mask,
    plot_mix,
)
from attention_lib.plotting.diagrams import plot_heads_diagram, plot_matmul_diagram, plot_softmax_diagram  # noqa: E402
from attention_lib.plotting.style import _plain_number, category_style, plain_log_ticks  # noqa: E402

TOKENS = ["the", "cat", "purred", "softly"]


def tick_labels(axis):
    axis.figure.canvas.draw()
    return [t.get_text() for t in axis.get_majorticklabels() if t.get_text()]


def test_lines_differ_in_colour_marker_and_style():
    fig = plot_lines([1, 2, 4], {"a": [1, 2, 3], "b": [3, 2, 1], "c": [2, 2, 2]})
    lines = fig.axes[0].get_lines()
    assert [to_hex(line.get_color()) for line in lines] == [c.lower() for c in OKABE_ITO[:3]]
    assert len({line.get_marker() for line in lines}) == 3
    assert len({str(line.get_linestyle()) for line in lines}) == 3


def test_log_axes_carry_plain_numbers_and_no_minor_labels():
    fig = plot_lines([16, 64, 256, 1024, 4096], {"t": [0.001, 0.01, 0.1, 1.0, 10.0]}, logx=True, logy=True)
    ax = fig.axes[0]
    xs, ys = tick_labels(ax.xaxis), tick_labels(ax.yaxis)
    assert {"16", "256", "4,096"} <= set(xs)
    assert {"0.001", "0.1", "10"} <= set(ys)
    assert not any("^" in label or "$" in label for label in xs + ys)
    assert all(not t.get_text() for t in ax.yaxis.get_minorticklabels())


def test_a_short_log_axis_still_has_several_labels():
    fig = plot_lines([128, 256, 512], {"t": [70.0, 150.0, 700.0]}, logx=True, logy=True)
    assert len(tick_labels(fig.axes[0].yaxis)) >= 3


@pytest.mark.parametrize(("value", "text"), [(16, "16"), (4096, "4,096"), (0.001, "0.001"), (1e-5, "0.00001"),
                                             (2.5, "2.5")])
def test_plain_number(value, text):
    assert _plain_number(value) == text


def test_plain_log_ticks_rejects_a_bad_axis():
    fig = plot_lines([1, 2], {"t": [1, 2]})
    with pytest.raises(ValueError, match="axis must be 'x' or 'y'"):
        plain_log_ticks(fig.axes[0], "z")


def test_category_style_wraps_around():
    assert category_style(0) == category_style(len(OKABE_ITO))


def test_heatmap_writes_every_value_with_viridis():
    w = torch.softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    fig = plot_heatmap(w, TOKENS[:3], TOKENS)
    ax = fig.axes[0]
    assert ax.images[0].get_cmap().name == "viridis"
    assert [t.get_text() for t in ax.texts] == [f"{v:.2f}" for v in w.flatten().tolist()]


def test_masked_heatmap_never_colours_a_blocked_cell():
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    weights = torch.softmax(torch.zeros(4, 4).masked_fill(~mask, float("-inf")), dim=-1)
    fig = plot_heatmap(weights, TOKENS, TOKENS, mask=mask)
    ax = fig.axes[0]
    hidden = np.ma.getmaskarray(ax.images[0].get_array())
    assert (hidden == (~mask).numpy()).all()
    assert sum(t.get_text() == "✗" for t in ax.texts) == int((~mask).sum())
    assert "blocked" in ax.get_xlabel()
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == int((~mask).sum())


def test_heatmap_mask_must_match():
    with pytest.raises(ValueError, match=r"mask must have the matrix's shape \(2, 2\)"):
        plot_heatmap(torch.ones(2, 2), mask=torch.ones(3, 3, dtype=torch.bool))


def test_heatmaps_take_one_mask_per_matrix():
    mask = torch.eye(2, dtype=torch.bool)
    fig = plot_heatmaps([torch.eye(2), torch.eye(2)], masks=[None, mask])
    assert not np.ma.getmaskarray(fig.axes[0].images[0].get_array()).any()
    assert np.ma.getmaskarray(fig.axes[1].images[0].get_array()).sum() == 2
    with pytest.raises(ValueError, match="one mask \\(or None\\) per matrix: 2 matrices but 1 masks"):
        plot_heatmaps([torch.eye(2), torch.eye(2)], masks=[mask])


def test_mask_has_two_labelled_colours_and_no_colour_bar():
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    fig = plot_mask(mask, TOKENS[:3], TOKENS[:3])
    ax = fig.axes[0]
    assert len(fig.axes) == 1  # no colour bar
    assert not ax.images
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["may attend", "blocked"]
    marks = [t.get_text() for t in ax.texts]
    assert marks == ["✓" if a else "✗" for a in mask.flatten().tolist()]
    colours = {to_hex(p.get_facecolor()) for p in ax.patches}
    assert len(colours) == 2


@pytest.mark.parametrize(("mask", "match"), [(torch.ones(2, 2, 2), "2-D"), (torch.full((2, 2), 0.5), "0 and 1")])
def test_mask_errors(mask, match):
    with pytest.raises(ValueError, match=match):
        plot_mask(mask)


def test_bars_are_one_colour_with_their_values():
    fig = plot_bars(torch.tensor([0.25, 0.75]), ["a", "b"])
    ax = fig.axes[0]
    assert {to_hex(p.get_facecolor()) for p in ax.patches} == {OKABE_ITO[0].lower()}
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75"]
    with pytest.raises(ValueError, match="one colour per bar"):
        plot_bars(torch.tensor([0.25, 0.75]), ["a", "b"], colors=["red"])


def test_mix_gives_each_word_its_own_colour_and_hatch():
    fig = plot_mix(torch.tensor([0.5, 0.5]), torch.ones(2, 3), ["a", "b"], ["x", "y", "z"])
    a, b = fig.axes[0].containers[:2]
    assert to_hex(a[0].get_facecolor()) != to_hex(b[0].get_facecolor())
    assert a[0].get_hatch() != b[0].get_hatch()


def test_figures_have_an_opaque_white_background():
    for fig in (plot_bars(torch.ones(2)), plot_mask(torch.eye(2)), plot_heads_diagram()):
        assert to_hex(fig.get_facecolor(), keep_alpha=True) == "#ffffffff"


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_matmul_diagram_highlights_one_row_one_column_one_cell():
    fig = plot_matmul_diagram("Q", "Kᵀ", "scores", dims=("L", "E", "S"), sizes=(4, 3, 5), row=1, col=2)
    ax = fig.axes[0]
    assert {"Q  (L, E)", "Kᵀ  (E, S)", "scores  (L, S)"} <= set(texts(fig))
    assert len(ax.patches) == 4 * 3 + 3 * 5 + 4 * 5
    coloured = [p for p in ax.patches if to_hex(p.get_facecolor()) != "#f2f2f2"]
    assert len(coloured) == 3 + 3 + 1  # a row of Q (E cells), a column of Kᵀ (E cells), one score


@pytest.mark.parametrize(("kwargs", "match"), [({"sizes": (4, 3)}, "three entries"), ({"sizes": (4, 0, 5)}, "positive"),
                                               ({"row": 9}, "row must be in 0..3")])
def test_matmul_diagram_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plot_matmul_diagram(**kwargs)


def test_softmax_diagram_shows_rows_that_sum_to_one():
    scores = torch.tensor([[0.0, 1.5, 0.3], [2.0, 0.0, 0.0]])
    fig = plot_softmax_diagram(scores, ["a", "b"], ["x", "y", "z"])
    weights = torch.softmax(scores, dim=-1)
    shown = texts(fig)
    assert all(f"{w:.2f}" in shown for w in weights.flatten().tolist())
    assert shown.count("Σ = 1.00") == 2
    assert "0.46" in texts(plot_softmax_diagram(torch.tensor([[0.46, 1.0]])))  # two decimals: 0.46 is not 0.5
    assert "0.5" in texts(plot_softmax_diagram(torch.tensor([[0.46, 1.0]]), decimals=1))
    assert shown.count("L = 2") == 1  # one row count, for both grids
    with pytest.raises(ValueError, match="2-D"):
        plot_softmax_diagram(torch.zeros(2, 2, 2))
    with pytest.raises(TypeError, match="decimals must be an int, but got float"):
        plot_softmax_diagram(scores, decimals=1.5)


def test_heads_diagram_puts_each_heads_features_in_its_grid():
    fig = plot_heads_diagram(L=2, E=4, num_heads=2)
    shown = texts(fig)
    # x, head 0, head 1, merged: the numbers 0..7 in memory order, each head holding its own columns
    numbers = [int(t) for t in shown if t.isdigit()]
    assert numbers == list(range(8)) + [0, 1, 4, 5] + [2, 3, 6, 7] + list(range(8))
    with pytest.raises(ValueError, match="num_heads must divide E"):
        plot_heads_diagram(E=5, num_heads=2)


# -- text alternatives ----------------------------------------------------------------------------------------

from notebook_rules import all_notebooks, figures_without_alt, read  # noqa: E402

import attention_lib.plotting as plotting  # noqa: E402
from attention_lib.plotting import alt_text  # noqa: E402
from attention_lib.plotting.display import caption_bundle, install_display_hook  # noqa: E402
from attention_lib.plotting.memory_efficient.online_softmax import online_softmax_steps  # noqa: E402

WEIGHTS = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.2, 0.6, 0.1, 0.1], [0.1, 0.1, 0.05, 0.75], [0.25, 0.25, 0.25, 0.25]])

#: One call of every helper that draws a figure (keywords such as alt= are passed on): name -> (call, words its
#: default text alternative must contain).
HELPERS = {
    "plot_heatmap": (lambda **k: plot_heatmap(WEIGHTS, TOKENS, TOKENS, title="who hears whom", **k),
                     ["Heatmap 'who hears whom'", "0.75", "row 'purred', column 'softly'"]),
    "plot_heatmaps": (lambda **k: plot_heatmaps([WEIGHTS, WEIGHTS.T], TOKENS, TOKENS, suptitle="two heads", **k),
                      ["two heads.", "2 panels", "(1) Heatmap 'head 0'", "(2) Heatmap 'head 1'"]),
    "plot_bars": (lambda **k: plot_bars(WEIGHTS[2], TOKENS, title="purred", **k),
                  ["Bar chart 'purred'", "the 0.1", "the tallest is softly (0.75)"]),
    "plot_lines": (lambda **k: plot_lines([16, 64, 256], {"raw": [16.0, 64.0, 256.0], "scaled": [1.0, 1.0, 1.0]},
                                          xlabel="d_k", ylabel="variance", title="variance", logx=True, **k),
                   ["Line plot 'variance'", "x axis d_k (16 to 256, log scale)",
                    "raw goes from 16 at 16 to 256 at 256"]),
    "plot_mask": (lambda **k: plot_mask(torch.ones(3, 3, dtype=torch.bool).tril(), TOKENS[:3], TOKENS[:3],
                                        title="causal", **k),
                  ["Mask 'causal'", "6 of 9 cells may attend, 3 are blocked", "'the' may attend to the;"]),
    "plot_mix": (lambda **k: plot_mix(torch.tensor([0.25, 0.75]), torch.tensor([[4.0, 0.0], [0.0, 4.0]]),
                                      ["a", "b"], ["x", "y"], title="mix", **k),
                 ["Stacked bars 'mix'", "output = x 1, y 3", "largest share comes from 'b' (weight 0.75)"]),
    "plot_matmul_diagram": (lambda **k: plot_matmul_diagram(row=1, col=2, **k),
                            ["Q (L = 4, E = 3) @ Kᵀ (E = 3, S = 5) = scores (L = 4, S = 5)", "cell (1, 2)"]),
    "plot_softmax_diagram": (lambda **k: plot_softmax_diagram(torch.tensor([[0.0, 2.0], [1.0, 0.0]]), ["a", "b"],
                                                              ["x", "y"], **k),
                             ["every row of weights sums to 1", "0.881", "row 'a', column 'y'"]),
    "plot_heads_diagram": (lambda **k: plot_heads_diagram(L=2, E=4, num_heads=2, **k),
                           ["2 heads of Dh = 2", "head 1 gets features 2 to 3"]),
    "plot_position_encoding": (lambda **k: plotting.plot_position_encoding(torch.zeros(6, 4), columns=[0], **k),
                               ["Heatmap", "Line plot"]),
    "plot_causal_tiles": (lambda **k: plotting.plot_causal_tiles(8, 4, **k),
                          ["A grid of 2 x 2 tiles", "the 1 above it are skipped", "3 of 4 tiles are computed"]),
    "plot_block_tiles": (lambda **k: plotting.plot_block_tiles(torch.tensor([[1, 2], [0, 1]]), 4, L=8, **k),
                         ["A grid of 2 x 2 tiles", "1 full (computed without a mask)", "1 skipped"]),
    "plot_online_softmax_steps": (lambda **k: plotting.plot_online_softmax_steps(
        online_softmax_steps(torch.arange(4.0), torch.eye(4), 2), **k), ["panels"]),
    "plot_online_softmax_block": (lambda **k: plotting.plot_online_softmax_block(
        torch.tensor([0.5, -1.0, 1.5, 0.2]), torch.eye(4), 2, 2, **k), ["panels"]),
    "plot_attention_grid": (lambda **k: plotting.plot_attention_grid((torch.full((2, 3, 3), 1 / 3),),
                                                                     ["a", "b", "c"], **k), ["Heatmap", "0.333"]),
    "plot_attention_over_training": (lambda **k: plotting.plot_attention_over_training(
        {0: (torch.full((1, 2, 2, 2), 0.5),), 10: (torch.eye(2).expand(1, 2, 2, 2),)}, ["a", "b"], **k),
        ["Heatmap"]),
    "plot_attraction": (lambda **k: plotting.plot_attraction(
        {"2 blocks": {0: (1.0, 0.9), 3: ((0.7, 0.6, 0.8), 0.5)}}, **k),
        ["by the number of attractors, 0 to 3", "2 blocks: 100 % right with 0 attractors, 70 % with 3"]),
    "plot_loss_curves": (lambda **k: plotting.plot_loss_curves({"with positions": [2.3, 0.1, 0.01]}, **k),
                         ["Line plot 'training loss'", "with positions goes from 2.3"]),
    "plot_block_diagram": (lambda **k: plotting.plot_block_diagram(num_layers=2, **k),
                           ["Block diagram", "2 blocks", "multi-head attention"]),
    "plot_shipped_overview": (lambda **k: plotting.plot_shipped_overview(**k),
                              ["mirror position", "on 'cat'", "answers 'purrs'"]),
    "plot_programs": (lambda **k: plotting.plot_programs(100, 100, 32, 32, is_causal=True, **k),
                      ["tiles of 32 x 32", "4 programs", "10 of 16 tiles are computed", "in the future"]),
    "plot_phase_change": (lambda **k: plotting.plot_phase_change(
        {"repeated part": [3.0] * 50 + [0.5] * 50}, phase_change([3.0] * 50 + [0.5] * 50), **k),
        ["Line plot 'the phase change'", "falls from 3 to 0.5", "halfway down at step"]),
    "plot_softmax_backward": (lambda **k: plotting.plot_softmax_backward(
        torch.softmax(torch.tensor([0.0, 2.0]), -1), torch.tensor([1.0, 2.0]), ["a", "b"], **k), ["panels"]),
    "plot_new_token_attention": (lambda **k: plotting.plot_new_token_attention(
        torch.tensor([[[0.1, 0.7, 0.2]], [[0.2, 0.6, 0.2]]]), ["<bos>", "cat", "purrs"], written="softly", **k),
        ["Heatmap 'purrs → softly'", "2 rows", "looks most at 'cat', with 0.65"]),
    "plot_decoding_times": (lambda **k: plotting.plot_decoding_times([4, 1024], {"no cache": [1e-3, 2e-2],
                                                                                "cache": [1e-3, 2e-3]}, **k),
                            ["Line plot", "10 times at 1024"]),
    "plot_head_maps": (lambda **k: plotting.plot_head_maps([torch.eye(3)], "abc", titles=["itself"],
                                                           targets=[[(0, 0), (1, 1)]], **k),
                       ["Heatmap 'itself'", "2 outlined cells", "hold 1 of"]),
}


def test_every_helper_is_checked_and_takes_alt():
    """A new helper must be added to HELPERS (so that its default text is checked) and wrapped by with_alt."""
    helpers = [name for name in plotting.__all__ if name.startswith("plot_")]
    assert sorted(helpers) == sorted(HELPERS)
    for name in helpers:
        helper = getattr(plotting, name)
        assert getattr(helper, "takes_alt", False), f"{name} does not take alt= (decorate it with @with_alt)"


@pytest.mark.parametrize("name", HELPERS)
def test_every_figure_has_a_default_text_alternative(name):
    call, words = HELPERS[name]
    fig = call()
    text = alt_text(fig)
    print(f"{name}: {text}")
    assert text.endswith("."), text
    for word in words:
        assert word in text, f"{word!r} not in {text!r}"
    assert not re.search(r"\de[-+]\d", text), f"a power of ten is hard to listen to: {text}"


@pytest.mark.parametrize("name", HELPERS)
def test_every_helper_takes_its_text_alternative(name):
    call, _ = HELPERS[name]
    assert alt_text(call(alt="Exactly this  sentence.")) == "Exactly this sentence."


def test_alt_passed_to_a_helper_wins_and_describes_its_panel():
    fig = plot_heatmap(WEIGHTS, TOKENS, TOKENS, alt="Each word listens mostly to itself.")
    assert alt_text(fig) == "Each word listens mostly to itself."
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2)
    plot_bars(WEIGHTS[0], TOKENS, ax=left, alt="The first row.")
    plot_bars(WEIGHTS[1], TOKENS, ax=right)
    assert alt_text(fig).startswith("2 panels. (1) The first row. (2) Bar chart")


def test_bars_side_by_side_are_described_series_by_series():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.bar([-0.2, 0.8], [0.5, 1.0], width=0.4, label="before")
    ax.bar([0.2, 1.2], [0.25, 0.75], width=0.4, label="after")
    ax.set_xticks([0, 1], labels=["animal", "action"])
    ax.set_title("features")
    assert alt_text(fig) == ("Grouped bar chart 'features', 2 series: before: animal 0.5, action 1; "
                             "after: animal 0.25, action 0.75.")
    plt.close(fig)


@pytest.mark.parametrize(("alt", "error", "match"), [(3, TypeError, "alt must be a string"),
                                                     ("  ", ValueError, "alt must say what the figure shows")])
def test_a_bad_alt_is_refused(alt, error, match):
    with pytest.raises(error, match=match):
        plot_bars(WEIGHTS[0], TOKENS, alt=alt)


def test_a_plain_matplotlib_figure_is_described_from_its_titles_and_labels():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0.5, 0.25, 0.125], label="halving")
    ax.set(title="halves", xlabel="step", ylabel="value")
    assert alt_text(fig) == ("Line plot 'halves', x axis step (0 to 2), y axis value (0.125 to 0.5): halving goes "
                             "from 0.5 at 0 to 0.125 at 2.")
    empty, _ = plt.subplots()
    assert alt_text(empty) == "Diagram."
    plt.close(empty)


def test_the_display_hook_puts_the_alt_in_the_png_metadata_and_a_caption_under_it():
    """What a notebook stores: the PNG with {"alt": ...} in its metadata (the website's <img alt>), then a caption."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats
    from IPython.display import display
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    try:
        select_figure_formats(shell, {"png"})
        assert install_display_hook(shell)
        fig = plot_bars(WEIGHTS[2], TOKENS, title="purred", alt="Purred listens to softly, 0.75.")
        with capture_output() as captured:
            display(fig)
    finally:  # no shell left behind: later tests (the explorers' doctests) run outside IPython
        InteractiveShell.clear_instance()
    figure, caption = captured.outputs
    assert figure.data["image/png"]
    assert figure.metadata["image/png"]["alt"] == "Purred listens to softly, 0.75."
    assert caption.data == caption_bundle("Purred listens to softly, 0.75.")
    assert caption.data["text/plain"] == "Figure: Purred listens to softly, 0.75."
    assert 'class="course-figure-alt"' in caption.data["text/html"]


def test_the_display_hook_needs_ipython():
    assert install_display_hook(object()) is False


@pytest.fixture(autouse=True)
def every_figure_is_described():
    """Every figure a test of this module leaves open has a text alternative that says something."""
    import matplotlib.pyplot as plt

    yield
    for number in plt.get_fignums():
        fig = plt.figure(number)
        text = alt_text(fig)
        assert len(text) > len("Diagram."), f"figure {number} has no real text alternative: {text!r}"
    plt.close("all")


NOTEBOOKS = all_notebooks()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_stored_figure_has_a_text_alternative(path):
    """Every image output of a stored notebook (its cells and its explorers' saved figures) has its alt."""
    missing = figures_without_alt(read(path))
    assert not missing, (f"{path.name}: figures without a text alternative; execute the notebook again "
                         f"(python course.py execute) to store them: {missing}")
