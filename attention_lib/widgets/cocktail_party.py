"""The explorer of lesson 01: pick a word and a focus; see whom it listens to and how its meaning changes.

On the course sentence "the cat purred softly", each word listens to every word with weights
``softmax(focus * x @ xᵀ)`` and takes their weighted average as its new meaning. Focus 0 hears everyone
equally; a large focus hears only the best match.
"""

from __future__ import annotations

from ..attention import calculate_attention
from ..plotting import plot_bars
from ..plotting.style import GREY, OKABE_ITO, finish
from ..toy_data import FEATURES, TOKENS, toy_sentence
from ..validation import check_number


def _check_focus(focus, name: str = "focus") -> float:
    return check_number(focus, name, minimum=0.0, fix=f"try {name}=1.0 (0 = hear everyone equally).")


def _check_word(word) -> int:
    if word not in TOKENS:
        raise ValueError(f"word must be one of the sentence's tokens {list(TOKENS)}, but got {word!r}.")
    return TOKENS.index(word)


def render_cocktail_party(word: str = "purred", focus: float = 1.0):
    """Draw whom ``word`` listens to at this ``focus``, and its meaning before and after listening.

    Drawn by the explorer of ``notebooks/01_cocktail_party.ipynb``. Left: the weights of ``word``'s row of
    ``softmax(focus * x @ xᵀ)``, one bar per token. Right: the word's hand-made vector and its new meaning,
    the weighted average of all the words' vectors, one pair of bars per feature.

    Args:
        word: one of ``attention_lib.toy_data.TOKENS``.
        focus: how sharply to listen, a number ``>= 0`` (it multiplies the dot-product scores).

    Returns:
        The ``matplotlib.figure.Figure`` (two axes: weights, then features).

    Raises:
        ValueError: if ``word`` is not in the sentence or ``focus`` is negative or not finite.
        TypeError: if ``focus`` is not a number.

    Example:
        >>> fig = render_cocktail_party("cat", focus=0.0)
        >>> [round(float(bar.get_height()), 2) for bar in fig.axes[0].patches]
        [0.25, 0.25, 0.25, 0.25]
    """
    import matplotlib.pyplot as plt

    i = _check_word(word)
    focus = _check_focus(focus)
    x = toy_sentence().embeddings  # (L, E) = (4, 4)
    new, weights = calculate_attention(x, x, x, scale=focus)  # (L, E) and (L, L)

    fig, (ax_weights, ax_meaning) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    plot_bars(weights[i], TOKENS, ax=ax_weights, ylim=(0, 1.15),
              title=f'whom "{word}" listens to (focus {focus:g})')
    positions = range(len(FEATURES))
    ax_meaning.bar([p - 0.2 for p in positions], x[i].tolist(), width=0.4, label="before (hand-made)",
                   color=GREY, hatch="//", edgecolor="white")
    ax_meaning.bar([p + 0.2 for p in positions], new[i].tolist(), width=0.4, label="after (weighted average)",
                   color=OKABE_ITO[1])
    ax_meaning.set_xticks(list(positions), labels=list(FEATURES))
    ax_meaning.set_ylim(0, 1.25)
    ax_meaning.set_ylabel("feature value")
    ax_meaning.set_title(f'the meaning of "{word}"')
    ax_meaning.legend(loc="upper right", fontsize=8)
    return finish(fig)


def cocktail_party_explorer(word: str = "purred", focus: float = 1.0):
    """An explorer around :func:`render_cocktail_party`: a word drop-down and a focus slider (0 to 10).

    Built step by step in ``notebooks/01_cocktail_party.ipynb``.

    Args:
        word: the word selected at the start.
        focus: the focus at the start.

    Returns:
        The explorer (an ``ipywidgets.VBox``, see :func:`attention_lib.widgets.make_explorer`).

    Raises:
        ValueError, TypeError: as :func:`render_cocktail_party`.

    Example:
        >>> box = cocktail_party_explorer("cat", focus=2.0)
        >>> sorted(box.controls)
        ['focus', 'word']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    _check_word(word)
    focus = _check_focus(focus)
    controls = {
        "word": widgets.Dropdown(options=list(TOKENS), value=word, description="word"),
        "focus": widgets.FloatSlider(value=focus, min=0.0, max=10.0, step=0.5, description="focus"),
    }
    return make_explorer(render_cocktail_party, controls, title="The cocktail party: whom does each word hear?")
