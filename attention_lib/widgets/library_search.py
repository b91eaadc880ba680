"""The explorer of lesson 02: build a query feature by feature and watch the soft lookup's weights.

The library is the course sentence "the cat purred softly": its keys and values are the words' hand-made
vectors. A query over the four features (animal, action, gentle, grammar) is matched against every key;
the soft lookup mixes all the values, the hard lookup takes the one best value.
"""

from __future__ import annotations

import torch

from ..attention import calculate_attention
from ..lookup import hard_lookup
from ..plotting import plot_bars
from ..plotting.style import GREY, OKABE_ITO, finish
from ..toy_data import FEATURES, TOKENS, toy_sentence
from ..validation import check_number


def _check_number(value, name: str, minimum: float | None = None) -> float:
    return check_number(value, name, minimum=minimum, fix=f"try {name}=1.0.")


def render_library_search(animal: float = 1.0, action: float = 0.0, gentle: float = 0.0, grammar: float = 0.0,
                          sharpness: float = 1.0):
    """Draw the soft lookup of the query ``[animal, action, gentle, grammar]`` in the course sentence.

    Drawn by the explorer of ``notebooks/02_library_search.ipynb``. Left: the soft lookup's weights,
    ``softmax(sharpness * key @ query)``, one bar per word, with the hard lookup's pick named in the title.
    Right: the answers over the features: the soft one (a mix of all the values) and the hard one (a copy of
    the best-matching word's value).

    Args:
        animal, action, gentle, grammar: the query's four features (finite numbers).
        sharpness: multiplies the scores before the softmax, a number ``>= 0`` (0 = every key weighs the same).

    Returns:
        The ``matplotlib.figure.Figure`` (two axes: weights, then answers).

    Raises:
        TypeError: if an argument is not a number.
        ValueError: if an argument is not finite, or ``sharpness`` is negative.

    Example:
        >>> fig = render_library_search(animal=1.0, sharpness=0.0)
        >>> [round(float(bar.get_height()), 2) for bar in fig.axes[0].patches]
        [0.25, 0.25, 0.25, 0.25]
    """
    import matplotlib.pyplot as plt

    features = [_check_number(v, n) for v, n in zip((animal, action, gentle, grammar), FEATURES, strict=True)]
    sharpness = _check_number(sharpness, "sharpness", minimum=0.0)
    sentence = toy_sentence()
    query = torch.tensor([features])  # (L, E) = (1, 4): one question
    soft, weights = calculate_attention(query, sentence.key, sentence.value, scale=sharpness)  # (1, 4), (1, 4)
    hard, hard_weights = hard_lookup(query, sentence.key, sentence.value)  # (1, 4), (1, 4) one-hot
    pick = TOKENS[int(hard_weights[0].argmax())]

    fig, (ax_weights, ax_answer) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    plot_bars(weights[0], TOKENS, ax=ax_weights, ylim=(0, 1.15),
              title=f"soft lookup weights (hard lookup takes '{pick}')")
    positions = range(len(FEATURES))
    ax_answer.bar([p - 0.2 for p in positions], soft[0].tolist(), width=0.4, label="soft: mix of all values",
                  color=OKABE_ITO[0])
    ax_answer.bar([p + 0.2 for p in positions], hard[0].tolist(), width=0.4, label=f"hard: value of '{pick}'",
                  color=GREY, hatch="//", edgecolor="white")
    ax_answer.set_xticks(list(positions), labels=list(FEATURES))
    ax_answer.set_ylim(0, 1.25)
    ax_answer.set_ylabel("feature value")
    ax_answer.set_title("what you take away")
    ax_answer.legend(loc="upper right", fontsize=8)
    return finish(fig)


def library_search_explorer(animal: float = 1.0, action: float = 0.0, gentle: float = 0.0, grammar: float = 0.0,
                            sharpness: float = 1.0):
    """An explorer around :func:`render_library_search`: one slider per query feature and one for sharpness.

    Built step by step in ``notebooks/02_library_search.ipynb``.

    Args:
        animal, action, gentle, grammar: the query's features at the start (sliders from -1 to 2).
        sharpness: the sharpness at the start (slider from 0 to 10).

    Returns:
        The explorer (an ``ipywidgets.VBox``, see :func:`attention_lib.widgets.make_explorer`).

    Raises:
        ValueError, TypeError: as :func:`render_library_search`.

    Example:
        >>> box = library_search_explorer(gentle=1.0)
        >>> sorted(box.controls)
        ['action', 'animal', 'gentle', 'grammar', 'sharpness']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    start = dict(zip(FEATURES, (animal, action, gentle, grammar), strict=True))
    for name, value in start.items():
        _check_number(value, name)
    sharpness = _check_number(sharpness, "sharpness", minimum=0.0)
    layout = widgets.Layout(width="230px")
    controls = {name: widgets.FloatSlider(value=value, min=-1.0, max=2.0, step=0.1, description=name,
                                          layout=layout)
                for name, value in start.items()}
    controls["sharpness"] = widgets.FloatSlider(value=sharpness, min=0.0, max=10.0, step=0.5,
                                                description="sharpness", layout=layout)
    return make_explorer(render_library_search, controls, title="The library search desk: what does your query find?")
