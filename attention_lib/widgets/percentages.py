"""The explorer of ``notebooks/05_percentages.ipynb``: one word's attention weights under a temperature.

The weights are ``softmax(scaled scores / temperature)`` on the course's sentence "the cat purred softly":
a low temperature sharpens them towards the best key, a high one flattens them towards a uniform spread.
"""

from __future__ import annotations

from ..attention import matchmaker, scaler
from ..experiments import temperature_weights
from ..toy_data import toy_sentence


def render_percentages(temperature: float = 1.0, word: str = "purred"):
    """Draw the weights that ``word`` gives to each word of the toy sentence at this ``temperature``.

    Drawn by the explorer of ``notebooks/05_percentages.ipynb``; the explorer :func:`percentages_explorer`
    wraps it.

    Args:
        temperature: a positive number dividing the scaled scores before the softmax.
        word: one of the sentence's tokens, the query whose row is drawn.

    Returns:
        A ``matplotlib.figure.Figure`` with two axes: the scores divided by the temperature, and the weights.

    Raises:
        TypeError: if ``temperature`` is not a number.
        ValueError: if ``temperature`` is not a finite positive number or ``word`` is not in the sentence.

    Example:
        >>> fig = render_percentages(0.5, "cat")
        >>> [t.get_text() for t in fig.axes[1].get_xticklabels()]
        ['the', 'cat', 'purred', 'softly']
    """
    import matplotlib.pyplot as plt

    from ..plotting import plot_bars
    from ..plotting.style import finish

    tokens = toy_sentence().tokens
    if word not in tokens:
        raise ValueError(f"word must be one of the sentence's tokens {list(tokens)}, but word={word!r}.")
    row = tokens.index(word)
    weights = temperature_weights(temperature)[row]  # (S,)
    s = toy_sentence()
    logits = scaler(matchmaker(s.query, s.key), s.query.size(-1))[row] / temperature  # (S,)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    plot_bars(logits, tokens, ax=left, ylabel="score / temperature", title="what goes into the softmax")
    plot_bars(weights, tokens, ax=right, ylim=(0, 1.1), title="the weights (they add up to 1)")
    fig.suptitle(f'"{word}" at temperature {temperature:.2f}')
    return finish(fig)


def percentages_explorer():
    """An explorer for :func:`render_percentages`: a temperature slider and a word to follow.

    Built step by step in ``notebooks/05_percentages.ipynb``.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = percentages_explorer()
        >>> sorted(box.controls)
        ['temperature', 'word']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    controls = {
        "temperature": widgets.FloatSlider(value=1.0, min=0.1, max=5.0, step=0.1, description="temperature",
                                           continuous_update=False, style={"description_width": "initial"}),
        "word": widgets.Dropdown(options=list(toy_sentence().tokens), value="purred", description="word"),
    }
    return make_explorer(render_percentages, controls, title="The percentages: softmax with a temperature")
