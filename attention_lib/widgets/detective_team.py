"""The detective-team explorer of ``notebooks/09_detective_team.ipynb``: change the detectives, watch them work.

Every redraw runs :func:`attention_lib.experiments.detective_team`, i.e.
:class:`attention_lib.MultiHeadAttention`
with lesson 09's hand-made projections, live: choose what each detective looks for (its key projection), how
loudly the questions are asked (the query projection's size) and whether there is a team of two heads or one
lone detective. ipywidgets and matplotlib are imported inside the functions.
"""

from __future__ import annotations

from ..experiments import detective_team
from ..toy_data import FEATURES, TOKENS


def render_detective_team(word: str = "purred", clue_0: str = "animal", clue_1: str = "action",
                          loudness: float = 5.0, num_heads: int = 2):
    """Draw every head's attention map (``word``'s row framed) and ``word``'s weights in each head.

    Drawn by the explorer of ``notebooks/09_detective_team.ipynb``. The weights are computed now, by
    :func:`attention_lib.experiments.detective_team`, from the projections these arguments describe.

    Args:
        word: whose row to frame and to draw as bars, one of ``attention_lib.toy_data.TOKENS``.
        clue_0, clue_1: the feature detective 0's and detective 1's keys advertise (what each looks for).
        loudness: how strongly the questions are asked (it scales the query projection), ``>= 0``.
        num_heads: ``2`` for the team, ``1`` for one lone detective with all four numbers.

    Returns:
        The ``matplotlib.figure.Figure``: one heatmap per head, then a bar chart of ``word``'s row per head.

    Raises:
        ValueError: if ``word`` is not a token, a clue is not a feature, ``loudness`` is negative or
            ``num_heads`` does not divide 4.

    Example:
        >>> fig = render_detective_team("purred", num_heads=1)
        >>> len(fig.axes[0].images), fig.axes[0].get_title()
        (1, 'lone detective: animal + action')
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from ..plotting import plot_heatmap
    from ..plotting.style import HATCHES, OKABE_ITO, finish

    if word not in TOKENS:
        raise ValueError(f"word must be one of {list(TOKENS)}, but word={word!r}.")
    _, weights = detective_team((clue_0, clue_1), loudness, num_heads)  # (H, L, S)
    H = weights.shape[0]
    names = ([f"detective {h}: {c}?" for h, c in enumerate((clue_0, clue_1))] if H == 2
             else [f"lone detective: {clue_0} + {clue_1}"] if H == 1 else [f"head {h}" for h in range(H)])
    i = TOKENS.index(word)
    fig, axes = plt.subplots(1, H + 1, figsize=(3.9 * H + 4.2, 3.7), squeeze=False)
    for h, ax in enumerate(axes[0, :H]):
        plot_heatmap(weights[h], TOKENS, TOKENS, title=names[h], vmin=0.0, vmax=1.0, ax=ax, colorbar=h == H - 1)
        ax.add_patch(Rectangle((-0.5, i - 0.5), len(TOKENS), 1.0, fill=False, edgecolor=OKABE_ITO[5],
                               linewidth=3))
    bars = axes[0, H]
    width = 0.8 / H
    for h in range(H):
        positions = [j - 0.4 + width * (h + 0.5) for j in range(len(TOKENS))]
        bars.bar(positions, weights[h, i].tolist(), width=width, color=OKABE_ITO[h % len(OKABE_ITO)],
                 hatch=HATCHES[h % len(HATCHES)], edgecolor="white", label=names[h].split(":")[0])
    bars.set_xticks(range(len(TOKENS)), labels=list(TOKENS))
    bars.set_ylim(0.0, 1.1)
    bars.set_ylabel("weight")
    bars.set_title(f"where {word!r} looks")
    bars.legend(fontsize=8, loc="upper right")
    return finish(fig)


def detective_team_explorer():
    """An explorer for :func:`render_detective_team`: a word, each detective's clue, the loudness, the team size.

    Built in ``notebooks/09_detective_team.ipynb``; every change recomputes the heads with
    :class:`attention_lib.MultiHeadAttention`.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = detective_team_explorer()
        >>> sorted(box.controls)
        ['clue_0', 'clue_1', 'loudness', 'num_heads', 'word']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    controls = {
        "word": widgets.Dropdown(options=list(TOKENS), value="purred", description="word"),
        "clue_0": widgets.Dropdown(options=list(FEATURES), value="animal", description="det. 0 keys"),
        "clue_1": widgets.Dropdown(options=list(FEATURES), value="action", description="det. 1 keys"),
        "loudness": widgets.FloatSlider(value=5.0, min=0.0, max=10.0, step=0.5, description="loudness c"),
        "num_heads": widgets.Dropdown(options=[("2 (a team)", 2), ("1 (lone detective)", 1)], value=2,
                                      description="heads"),
    }
    return make_explorer(render_detective_team, controls,
                         title="Hire the detectives: which feature do their keys advertise?")
