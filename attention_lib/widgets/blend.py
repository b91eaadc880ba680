"""The blend, made visible: one word's output as a stack of slices of every word's value (lesson 06).

:func:`render_blend` draws, for a word of the course sentence, its weights next to
:func:`attention_lib.plotting.plot_mix` of its output, and :func:`blend_explorer` wires it to a word menu and a
focus slider. matplotlib and ipywidgets are imported inside the functions.
"""

from __future__ import annotations

from ..attention import blend, matchmaker, percentages, scaler
from ..plotting import plot_bars, plot_mix
from ..plotting.style import HATCHES, OKABE_ITO, finish
from ..toy_data import toy_sentence
from .explorer import make_explorer


def render_blend(word: str = "purred", focus: float = 1.0):
    """Draw a word's attention weights (left) and its output as a mix of the values (right).

    Drawn by the explorer of ``notebooks/06_blend.ipynb``, on the course sentence "the cat purred softly".
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
    for j, bar in enumerate(left.patches):  # each word in the same colour and hatch on both sides
        bar.set_color(OKABE_ITO[j % len(OKABE_ITO)])
        bar.set_hatch(HATCHES[j % len(HATCHES)])
        bar.set_edgecolor("white")
    right.set_ylim(min(0.0, float(output.min())) - 0.05, max(1.0, float(output.max())) + 0.1)
    return finish(fig)


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
