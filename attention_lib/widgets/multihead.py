"""The detective-team explorer of ``notebooks/09_detective_team.ipynb``: pick a head and a word.

ipywidgets and matplotlib are imported inside the functions, so importing this module stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch


def _check_team(weights, tokens, head_names) -> tuple[list[str], list[str]]:
    if not isinstance(weights, torch.Tensor) or weights.dim() != 3:
        found = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be one sentence's per-head weights (H, L, S), but got {found}; pick a "
                         f"sentence first, e.g. weights[0] of the (N, H, L, S) weights of MultiHeadAttention.")
    H, L, S = weights.shape
    tokens = [str(t) for t in tokens]
    if L != S or len(tokens) != L:
        raise ValueError(f"the explorer shows self-attention: weights must be (H, L, L) with one token per "
                         f"word, but weights.shape={tuple(weights.shape)} and {len(tokens)} tokens.")
    names = [f"head {h}" for h in range(H)] if head_names is None else [str(n) for n in head_names]
    if len(names) != H:
        raise ValueError(f"head_names needs one name per head: {H} heads but {len(names)} names.")
    return tokens, names


def render_detective_team(weights: torch.Tensor, tokens: Sequence[str], head: int = 0, word: str | None = None,
                          head_names: Sequence[str] | None = None):
    """Draw one head's attention map with one word's row framed, next to a bar chart of that row.

    Built in ``notebooks/09_detective_team.ipynb``, where each head is a detective chasing its own clue.

    Args:
        weights: ``(H, L, L)``, one sentence's per-head weights (self-attention).
        tokens: the ``L`` words, labelling rows and columns.
        head: which head (detective) to show, ``0 <= head < H``.
        word: whose row to show (one of ``tokens``); defaults to the first word.
        head_names: optional names for the heads, used in the titles.

    Returns:
        The ``matplotlib.figure.Figure``: the head's heatmap on the left, the word's weights on the right.

    Raises:
        ValueError: if ``weights`` is not ``(H, L, L)``, the tokens or names do not match it, ``head`` is out
            of range or ``word`` is not a token.

    Example:
        >>> w = torch.tensor([[[0.9, 0.1], [0.5, 0.5]], [[0.2, 0.8], [0.0, 1.0]]])  # (H=2, L=2, S=2)
        >>> fig = render_detective_team(w, ["cat", "purred"], head=1, word="cat")
        >>> [round(float(bar.get_height()), 2) for bar in fig.axes[1].patches]
        [0.2, 0.8]
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from ..plotting import plot_bars, plot_heatmap

    tokens, names = _check_team(weights, tokens, head_names)
    H = weights.shape[0]
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < H:
        raise ValueError(f"head must be an index in 0..{H - 1}, but head={head!r}.")
    word = tokens[0] if word is None else word
    if word not in tokens:
        raise ValueError(f"word must be one of {tokens}, but word={word!r}.")
    i = tokens.index(word)
    w = weights[head].detach().cpu()  # (L, S)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.6), gridspec_kw={"width_ratios": [1.2, 1.0]})
    plot_heatmap(w, tokens, tokens, title=names[head], vmin=0.0, vmax=1.0, ax=left)
    left.add_patch(Rectangle((-0.5, i - 0.5), len(tokens), 1.0, fill=False, edgecolor="tab:red", linewidth=3))
    top = int(w[i].argmax())
    if torch.allclose(w[i], w[i, top].expand_as(w[i]), atol=5e-3):  # a tie: no favourite to name
        title = f"{word!r} spreads its attention evenly"
    else:
        title = f"{word!r} looks most at {tokens[top]!r} ({float(w[i, top]):.2f})"
    plot_bars(w[i], tokens, ylim=(0.0, 1.1), ax=right, title=title)
    fig.tight_layout()
    return fig


def detective_team_explorer(weights: torch.Tensor, tokens: Sequence[str],
                            head_names: Sequence[str] | None = None):
    """An explorer: choose a detective (head) and a word, see where that word looks in that head.

    Built in ``notebooks/09_detective_team.ipynb`` around :func:`render_detective_team`.

    Args:
        weights: ``(H, L, L)``, one sentence's per-head weights.
        tokens: the ``L`` words.
        head_names: optional names for the heads, shown in the drop-down.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = detective_team_explorer(torch.full((2, 3, 3), 1 / 3), ["a", "b", "c"])
        >>> sorted(box.controls)
        ['head', 'word']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    tokens, names = _check_team(weights, tokens, head_names)
    controls = {
        "head": widgets.Dropdown(options=[(n, h) for h, n in enumerate(names)], value=0, description="detective"),
        "word": widgets.Dropdown(options=tokens, value=tokens[0], description="word"),
    }
    render = partial(render_detective_team, weights, tokens, head_names=names)
    return make_explorer(render, controls, title="Which clue does each detective follow?")
