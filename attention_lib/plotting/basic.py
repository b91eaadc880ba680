"""Labelled heatmaps, bar charts and line plots: the basic pictures of the lessons. Each returns its figure.

matplotlib is imported inside each function, so ``import attention_lib`` stays fast and works without a
display; the functions work headless (the Agg backend) and take tensors on any device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .alt import with_alt
from .style import GREY, HEATMAP_CMAP, OKABE_ITO, category_style, finish, plain_log_ticks

#: How blocked cells of a masked heatmap are drawn: light grey, hatched, so they never look like a weight of 0.
BLOCKED_STYLE = {"facecolor": "#E6E6E6", "edgecolor": GREY, "hatch": "xx", "linewidth": 0.0}


def _as_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    import numpy as np

    return np.asarray(x, dtype=float)


def _check_labels(labels, size: int, what: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(size)]
    labels = [str(t) for t in labels]
    if len(labels) != size:
        raise ValueError(f"{what} needs {size} labels (one per {what.split()[0]}), but got {len(labels)}: "
                         f"{labels}.")
    return labels


@with_alt
def plot_heatmap(matrix, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None, *,
                 title: str = "", xlabel: str = "key (attended to)", ylabel: str = "query (attending)",
                 annotate: bool | None = None, cmap: str = HEATMAP_CMAP, vmin=None, vmax=None, ax=None,
                 fmt: str = ".2f", mask=None, colorbar: bool = True):
    """Draw a 2-D ``(L, S)`` matrix (scores or weights) with token labels on both axes and numbers in the cells.

    Used from ``notebooks/01_cocktail_party.ipynb`` on. With ``mask``, blocked cells are drawn as hatched grey
    cells marked "blocked" in a legend, never as a colour of the scale: a blocked cell cannot be mistaken for
    an allowed one whose weight happens to be 0.

    Args:
        matrix: ``(L, S)`` tensor or array.
        row_labels: ``L`` labels for the rows (queries); defaults to ``0..L-1``.
        col_labels: ``S`` labels for the columns (keys); defaults to ``0..S-1``.
        title, xlabel, ylabel: text for the axes.
        annotate: write each value in its cell; by default only when the matrix has at most 12 x 12 cells.
        cmap, vmin, vmax: colours, as in ``matplotlib.pyplot.imshow``.
        ax: draw into this axes instead of a new figure; its figure is then left for the caller to lay out
            once, after its last panel (``attention_lib.plotting.style.finish(fig)``).
        fmt: format of the annotations.
        mask: optional bool ``(L, S)``, ``True`` = may attend (as in SDPA); ``False`` cells are drawn as blocked.
        colorbar: draw a colour bar beside the heatmap.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``matrix`` is not 2-D, the labels do not match its shape or ``mask`` has another shape.

    Example:
        >>> fig = plot_heatmap(torch.eye(2), ["a", "b"], ["c", "d"], title="identity")
        >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
        ['c', 'd']
    """
    import matplotlib.pyplot as plt

    data = _as_numpy(matrix)
    if data.ndim != 2:
        raise ValueError(f"plot_heatmap draws a 2-D (L, S) matrix, but got shape {tuple(data.shape)}; "
                         f"pick one example and one head first, e.g. weights[0, 0].")
    rows = _check_labels(row_labels, data.shape[0], "row_labels (query)")
    cols = _check_labels(col_labels, data.shape[1], "col_labels (key)")
    allowed = None
    if mask is not None:
        allowed = _as_numpy(mask).astype(bool)
        if allowed.shape != data.shape:
            raise ValueError(f"mask must have the matrix's shape {tuple(data.shape)}, but got "
                             f"{tuple(allowed.shape)}; pick the same example and head, e.g. mask[0].")
    own_figure = ax is None
    if own_figure:
        fig, ax = plt.subplots(figsize=(1.0 + 0.8 * len(cols), 0.8 + 0.6 * len(rows)))
    fig = ax.figure
    shown = data if allowed is None else np.ma.masked_where(~allowed, data)
    image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), labels=cols, rotation=45 if max(map(len, cols)) > 4 else 0,
                  ha="right" if max(map(len, cols)) > 4 else "center")
    ax.set_yticks(range(len(rows)), labels=rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if allowed is not None and not allowed.all():
        _draw_blocked(ax, allowed)
    if annotate is None:
        annotate = data.shape[0] <= 12 and data.shape[1] <= 12
    if annotate:
        lo, hi = image.get_clim()
        middle = (lo + hi) / 2
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if allowed is not None and not allowed[i, j]:
                    continue
                colour = "black" if data[i, j] > middle else "white"
                ax.text(j, i, format(data[i, j], fmt), ha="center", va="center", color=colour, fontsize=9)
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return finish(fig) if own_figure else fig  # a layout per panel costs about 0.3 s each, and only the last counts


def _draw_blocked(ax, allowed) -> None:
    """Cover each blocked cell (``allowed[i, j]`` False) with a hatched grey square and a ✗, and say so below."""
    from matplotlib.patches import Rectangle

    for i, j in zip(*np.nonzero(~allowed), strict=True):
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1.0, 1.0, **BLOCKED_STYLE))
        ax.text(j, i, "✗", ha="center", va="center", fontsize=11, color="#404040")
    ax.set_xlabel(f"{ax.get_xlabel()}\n✗ hatched grey = blocked by the mask (no weight at all)".lstrip("\n"))


@with_alt
def plot_heatmaps(matrices, row_labels=None, col_labels=None, *, titles: Sequence[str] | None = None,
                  suptitle: str = "", masks: Sequence | None = None, **kwargs):
    """Draw several ``(L, S)`` matrices side by side (e.g. one per head), sharing labels.

    Used in ``notebooks/09_detective_team.ipynb``.

    Args:
        matrices: a sequence of ``(L, S)`` matrices, or an ``(H, L, S)`` tensor.
        row_labels, col_labels: as in :func:`plot_heatmap`.
        titles: one title per matrix; defaults to ``head 0``, ``head 1``, ...
        suptitle: a title over all of them.
        masks: optional, one bool mask (or ``None``) per matrix, drawn as in :func:`plot_heatmap`.
        **kwargs: passed to :func:`plot_heatmap`.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_heatmaps(torch.rand(3, 2, 2), ["a", "b"], ["a", "b"])
        >>> len([ax for ax in fig.axes if ax.get_title().startswith("head")])
        3
    """
    import matplotlib.pyplot as plt

    matrices = list(matrices)
    if not matrices:
        raise ValueError("plot_heatmaps needs at least one matrix, but got none.")
    titles = list(titles) if titles is not None else [f"head {i}" for i in range(len(matrices))]
    if len(titles) != len(matrices):
        raise ValueError(f"plot_heatmaps needs one title per matrix: {len(matrices)} matrices but "
                         f"{len(titles)} titles.")
    masks = list(masks) if masks is not None else [None] * len(matrices)
    if len(masks) != len(matrices):
        raise ValueError(f"plot_heatmaps needs one mask (or None) per matrix: {len(matrices)} matrices but "
                         f"{len(masks)} masks.")
    rows, cols = _as_numpy(matrices[0]).shape
    fig, axes = plt.subplots(1, len(matrices), figsize=(0.3 + (1.0 + 0.8 * cols) * len(matrices),
                                                        0.9 + 0.6 * rows), squeeze=False)
    for ax, matrix, title, mask in zip(axes[0], matrices, titles, masks, strict=True):
        plot_heatmap(matrix, row_labels, col_labels, title=title, ax=ax, mask=mask, **kwargs)
    if suptitle:
        fig.suptitle(suptitle)
    return finish(fig)


@with_alt
def plot_bars(values, labels: Sequence[str] | None = None, *, title: str = "", ylabel: str = "weight",
              ax=None, annotate: bool = True, fmt: str = ".2f", ylim=None, colors: Sequence[str] | None = None):
    """Draw a bar chart of a 1-D tensor or array, one labelled bar per entry (e.g. one query's weights).

    Used from ``notebooks/01_cocktail_party.ipynb`` on. The bars are one colour (they are values of one
    quantity) unless ``colors`` gives one per bar; each bar carries its value as a label.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``values`` is not 1-D or the labels do not match it.

    Example:
        >>> fig = plot_bars(torch.tensor([0.1, 0.9]), ["the", "cat"])
        >>> len(fig.axes[0].patches)
        2
    """
    import matplotlib.pyplot as plt

    data = _as_numpy(values)
    if data.ndim != 1:
        raise ValueError(f"plot_bars draws a 1-D vector, but got shape {tuple(data.shape)}; pick one row, "
                         f"e.g. weights[2].")
    names = _check_labels(labels, data.shape[0], "labels (bar)")
    if colors is not None and len(colors) != len(names):
        raise ValueError(f"colors needs one colour per bar: {len(names)} bars but {len(colors)} colours.")
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.5 + 0.7 * len(names), 3.0))
    bars = ax.bar(names, data, color=list(colors) if colors is not None else OKABE_ITO[0])
    if annotate:
        ax.bar_label(bars, labels=[format(v, fmt) for v in data], padding=2, fontsize=9)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if max(map(len, names)) * len(names) > 48:  # long labels: tilt them so they do not overlap
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    if ylim is not None:
        ax.set_ylim(*ylim)
    elif annotate and len(data) and data.max() > 0:
        ax.set_ylim(top=ax.get_ylim()[1] * 1.12)  # room for the value labels above the tallest bar
    return finish(ax.figure)


@with_alt
def plot_lines(x, ys: Mapping[str, Sequence[float]], *, title: str = "", xlabel: str = "", ylabel: str = "",
               logx: bool = False, logy: bool = False, ax=None, marker: str | None = None):
    """Draw one or more named curves over the same ``x`` (e.g. variance vs d_k, time vs sequence length).

    Used from ``notebooks/04_scaler.ipynb`` on. Each curve has its own Okabe-Ito colour, marker and line
    style, so curves can be told apart without colour. Log axes are labelled with plain numbers (16, 256,
    4,096 on a base-2 x axis; 0.01, 1, 100 on a base-10 y axis), without labels on the minor ticks.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if a curve does not have one value per ``x``.

    Example:
        >>> fig = plot_lines([1, 2, 4], {"linear": [1, 2, 4], "square": [1, 4, 16]}, logy=True)
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['linear', 'square']
    """
    import matplotlib.pyplot as plt

    xs = _as_numpy(x)
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for name, y in ys.items():
        y = _as_numpy(y)
        if y.shape != xs.shape:
            raise ValueError(f"curve {name!r} has {y.shape[0] if y.ndim else 0} values but x has {xs.shape[0]}; "
                             f"give one value per x.")
        style = category_style(len(ax.get_lines()))
        if marker is not None:
            style["marker"] = marker
        ax.plot(xs, y, label=name, linewidth=2, markersize=6, **style)
    if logx:
        ax.set_xscale("log", base=2)
        plain_log_ticks(ax, "x", base=2)
    if logy:
        ax.set_yscale("log")
        plain_log_ticks(ax, "y", base=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(ys) > 1:
        ax.legend(fontsize=9)
    return finish(ax.figure)
