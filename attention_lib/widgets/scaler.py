"""The explorer of ``notebooks/04_scaler.ipynb``: how d_k and the √d_k scaling shape the attention weights.

Random queries and keys with unit-variance entries give scores whose spread grows like √d_k; without the
scaler the softmax saturates and each query puts nearly all its weight on one key. The numbers come from
:func:`attention_lib.experiments.scaler_weights`; this module only draws them and wires the controls.
"""

from __future__ import annotations

from ..experiments import scaler_weights


def render_scaler(d_k: int = 64, scaled: bool = True):
    """Draw one query's weights over 8 random keys, and how large the top weight is across 200 queries.

    Drawn by the explorer of ``notebooks/04_scaler.ipynb``; the explorer :func:`scaler_explorer` wraps it.

    Args:
        d_k: the size of the random query and key vectors.
        scaled: divide the scores by ``√d_k`` before the softmax.

    Returns:
        A ``matplotlib.figure.Figure`` with two axes: the bars of query 0's weights, and a histogram of each
        query's largest weight (all near ``1`` means the softmax saturates).

    Raises:
        ValueError: if ``d_k`` is not a positive integer.

    Example:
        >>> fig = render_scaler(d_k=256, scaled=False)
        >>> len(fig.axes), len(fig.axes[0].patches)
        (2, 8)
    """
    import matplotlib.pyplot as plt

    from ..plotting import plot_bars
    from ..plotting.style import GREY, OKABE_ITO, finish

    weights = scaler_weights(d_k, scaled)  # (200, 8)
    top = weights.amax(dim=-1)  # (200,)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    plot_bars(weights[0], [f"key {j}" for j in range(weights.shape[1])], ax=left, ylim=(0, 1.1),
              title="query 0: its weights over 8 keys")
    right.hist(top.numpy(), bins=20, range=(0, 1), color=OKABE_ITO[1], edgecolor="white")
    right.axvline(1 / weights.shape[1], color=GREY, linestyle="--", label="uniform (1/8)")
    right.set_xlim(0, 1)
    right.set_xlabel("largest weight of a query")
    right.set_ylabel("number of queries (of 200)")
    right.set_title(f"mean largest weight: {top.mean().item():.2f}")
    right.legend(loc="best")
    how = "scores / √d_k" if scaled else "raw scores (no scaling)"
    fig.suptitle(f"d_k = {d_k}, {how}")
    return finish(fig)


def scaler_explorer():
    """An explorer for :func:`render_scaler`: a ``d_k`` slider and a "divide by √d_k" checkbox.

    Built step by step in ``notebooks/04_scaler.ipynb``.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = scaler_explorer()
        >>> sorted(box.controls)
        ['d_k', 'scaled']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    controls = {
        "d_k": widgets.IntSlider(value=64, min=4, max=1024, step=4, description="d_k", continuous_update=False),
        "scaled": widgets.Checkbox(value=True, description="divide by √d_k"),
    }
    return make_explorer(render_scaler, controls, title="The scaler: how sharp is the softmax?")
