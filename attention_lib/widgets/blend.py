"""The blend, made visible: one word's output as a stack of slices of every word's value (lesson 06).

:func:`plot_mix` draws ``output = Σ_j weights[j] · value[j]`` feature by feature, one coloured slice per
word; :func:`render_blend` draws it for a word of the course sentence next to that word's weights, and
:func:`blend_explorer` wires it to a word menu and a focus slider. matplotlib and ipywidgets are imported
inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..attention import blend, matchmaker, percentages, scaler
from ..data import toy_sentence
from ..plotting import plot_bars
from .explorer import make_explorer


def plot_mix(weights: torch.Tensor, value: torch.Tensor, tokens: Sequence[str], features: Sequence[str], *,
             title: str = "", ax=None):
    """Draw one query's output as stacked bars: for each feature, one slice ``weights[j] * value[j, f]`` per word.

    Built step by step in ``notebooks/06_blend.ipynb``. The height of each stack is the output's value for that
    feature, marked with a black dash; with non-negative values you can see how much each word contributes.

    Args:
        weights: ``(S,)``, one query's attention weights (a row of the ``(L, S)`` weights).
        value: ``(S, Ev)``, the value vectors.
        tokens: ``S`` labels, one per word (the legend).
        features: ``Ev`` labels, one per value feature (the x axis).
        title: the axes title.
        ax: draw into this axes instead of a new figure.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if the shapes or the numbers of labels do not match.

    Example:
        >>> fig = plot_mix(torch.tensor([0.25, 0.75]), torch.tensor([[4.0, 0.0], [0.0, 4.0]]), ["a", "b"],
        ...                ["x", "y"])
        >>> [round(float(p.get_height()), 2) for p in fig.axes[0].patches]  # a's slices, then b's
        [1.0, 0.0, 0.0, 3.0]
    """
    import matplotlib.pyplot as plt

    if weights.dim() != 1 or value.dim() != 2 or weights.shape[0] != value.shape[0]:
        raise ValueError(f"plot_mix needs one query's weights (S,) and the values (S, Ev), but got "
                         f"weights.shape={tuple(weights.shape)} and value.shape={tuple(value.shape)}; "
                         f"pick one row, e.g. weights[2].")
    if len(tokens) != value.shape[0] or len(features) != value.shape[1]:
        raise ValueError(f"plot_mix needs {value.shape[0]} tokens and {value.shape[1]} features, but got "
                         f"{len(tokens)} tokens and {len(features)} features.")
    slices = (weights[:, None] * value).detach().to("cpu", torch.float64)  # (S, 1) * (S, Ev) -> (S, Ev)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.8 + 0.9 * len(features), 3.2))
    positions = list(range(len(features)))
    bottom_pos = torch.zeros(len(features), dtype=torch.float64)
    bottom_neg = torch.zeros(len(features), dtype=torch.float64)
    for token, row in zip(tokens, slices, strict=True):
        bottom = torch.where(row >= 0, bottom_pos, bottom_neg)
        ax.bar(positions, row.numpy(), bottom=bottom.numpy(), label=str(token), edgecolor="white")
        bottom_pos += row.clamp(min=0)
        bottom_neg += row.clamp(max=0)
    total = slices.sum(dim=0)  # (Ev,): the output vector itself
    ax.hlines(total.numpy(), [p - 0.4 for p in positions], [p + 0.4 for p in positions], colors="black",
              linewidth=2, zorder=3, label="output")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    low, high = float(bottom_neg.min()), float(bottom_pos.max())
    pad = 0.1 * max(high - low, 1e-6)
    ax.set_ylim(low - pad if low < 0 else 0.0, high + pad)  # room above the tallest stack for its output line
    ax.set_xticks(positions, labels=[str(f) for f in features])
    ax.set_ylabel("contribution to the output")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.figure.tight_layout()
    return ax.figure


def render_blend(word: str = "purred", focus: float = 1.0):
    """Draw a word's attention weights (left) and its output as a mix of the values (right).

    Built step by step in ``notebooks/06_blend.ipynb``, on the course sentence "the cat purred softly".
    ``focus`` multiplies the word's query: ``0`` gives every word the same weight (the output is the plain
    average of the values), large values put nearly all the weight on the best match (the output copies it).

    Args:
        word: one of the sentence's tokens.
        focus: a non-negative multiplier of the query.

    Returns:
        The ``matplotlib.figure.Figure`` with two axes.

    Raises:
        ValueError: if ``word`` is not in the sentence or ``focus`` is negative.

    Example:
        >>> fig = render_blend("purred", focus=0.0)
        >>> [round(float(p.get_height()), 2) for p in fig.axes[0].patches]  # uniform weights
        [0.25, 0.25, 0.25, 0.25]
    """
    import matplotlib.pyplot as plt

    sentence = toy_sentence()
    if word not in sentence.tokens:
        raise ValueError(f"word must be one of {list(sentence.tokens)}, but got {word!r}.")
    if focus < 0:
        raise ValueError(f"focus must be non-negative (it multiplies the query), but focus={focus}.")
    i = sentence.tokens.index(word)
    query = sentence.query[i : i + 1] * focus  # (1, E)
    weights = percentages(scaler(matchmaker(query, sentence.key), query.size(-1)))  # (1, S)
    output = blend(weights, sentence.value)  # (1, S) @ (S, Ev) -> (1, Ev)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.4), gridspec_kw={"width_ratios": [1, 1.4]})
    plot_bars(weights[0], sentence.tokens, ax=left, ylim=(0, 1.1), title=f"weights of {word!r}")
    plot_mix(weights[0], sentence.value, sentence.tokens, sentence.features, ax=right,
             title=f"output of {word!r}: a mix of the values")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for bar, colour in zip(left.patches, colours, strict=False):  # each word in the same colour on both sides
        bar.set_color(colour)
    right.set_ylim(min(0.0, float(output.min())) - 0.05, max(1.0, float(output.max())) + 0.1)
    fig.tight_layout()
    return fig


def blend_explorer():
    """An explorer for :func:`render_blend`: pick a word, turn its focus up or down.

    Shown in ``notebooks/06_blend.ipynb`` (its cell ignores output under nbval).

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = blend_explorer()
        >>> sorted(box.controls)
        ['focus', 'word']
    """
    import ipywidgets as widgets

    controls = {
        "word": widgets.Dropdown(options=list(toy_sentence().tokens), value="purred", description="word"),
        "focus": widgets.FloatSlider(value=1.0, min=0.0, max=3.0, step=0.1, description="focus"),
    }
    return make_explorer(render_blend, controls, title="The blend: one word's output as a mix of values")
