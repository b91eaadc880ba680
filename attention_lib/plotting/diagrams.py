"""Shape diagrams: matrices drawn as grids of cells, so a learner sees the shapes meet, move and come out.

:func:`plot_matmul_diagram` draws ``A @ B = C`` (``Q·Kᵀ``, ``weights·V``) with one row, one column and the cell
they make highlighted; :func:`plot_softmax_diagram` draws the row-wise softmax of a score matrix;
:func:`plot_heads_diagram` draws how ``split_heads`` and ``merge_heads`` move the features of every word.
Each returns its figure; matplotlib is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..validation import check_int
from .alt import number, set_alt, with_alt
from .basic import _as_numpy
from .style import GREY, OKABE_ITO, finish

_LIGHT = "#F2F2F2"


def _grid(ax, x0: float, y0: float, rows: int, cols: int, *, name: str, dims: tuple[str, str],
          fill=None, text=None, fontsize: int = 9, side_label: bool = True) -> None:
    """Draw a ``rows x cols`` grid with its top-left corner at ``(x0, y0)`` (y grows downwards)."""
    from matplotlib.patches import Rectangle

    for i in range(rows):
        for j in range(cols):
            colour = fill(i, j) if fill is not None else _LIGHT
            ax.add_patch(Rectangle((x0 + j, y0 + i), 1, 1, facecolor=colour, edgecolor=GREY, linewidth=0.8))
            if text is not None:
                label = text(i, j)
                if label:
                    ax.text(x0 + j + 0.5, y0 + i + 0.5, label, ha="center", va="center", fontsize=fontsize)
    ax.text(x0 + cols / 2, y0 - 0.35, f"{name}  ({dims[0]}, {dims[1]})", ha="center", va="bottom", fontsize=11,
            fontweight="bold")
    ax.text(x0 + cols / 2, y0 + rows + 0.15, f"{dims[1]} = {cols}", ha="center", va="top", fontsize=9, color=GREY)
    if side_label:
        ax.text(x0 - 0.15, y0 + rows / 2, f"{dims[0]} = {rows}", ha="right", va="center", fontsize=9, color=GREY,
                rotation=90)


def _canvas(width: float, height: float, scale: float = 0.55):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, width * scale), max(2.5, height * scale)))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


@with_alt
def plot_matmul_diagram(left: str = "Q", right: str = "Kᵀ", result: str = "scores", *,
                        dims: Sequence[str] = ("L", "E", "S"), sizes: Sequence[int] = (4, 3, 5),
                        row: int = 1, col: int = 2, title: str = ""):
    """Draw ``left @ right = result`` as grids: ``(d0, d1) @ (d1, d2) -> (d0, d2)``, one product highlighted.

    Built for ``notebooks/03_matchmaker.ipynb`` (``Q @ Kᵀ``) and ``notebooks/06_blend.ipynb``
    (``weights @ V``). Row ``row`` of ``left`` (orange) meets column ``col`` of ``right`` (blue) in one dot
    product, which fills cell ``(row, col)`` of ``result``; the inner size ``d1`` must match and disappears.

    Args:
        left, right, result: the names written above the three grids.
        dims: the names of the three sizes ``(d0, d1, d2)``, e.g. ``("L", "E", "S")``.
        sizes: the number of cells drawn for each size.
        row, col: the highlighted row of ``left`` and column of ``right``.
        title: a title over the diagram.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``dims`` or ``sizes`` do not have three entries, a size is not positive, or ``row`` or
            ``col`` is out of range.

    Example:
        >>> fig = plot_matmul_diagram("weights", "V", "output", dims=("L", "S", "Ev"), sizes=(4, 4, 3))
        >>> "output  (L, Ev)" in [t.get_text() for t in fig.axes[0].texts]
        True
    """
    if len(dims) != 3 or len(sizes) != 3:
        raise ValueError(f"dims and sizes need three entries each, (d0, d1, d2) for (d0, d1) @ (d1, d2), but "
                         f"got dims={tuple(dims)} and sizes={tuple(sizes)}.")
    if any(not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"sizes must be positive integers, but sizes={tuple(sizes)}.")
    a, b, c = sizes
    if not (0 <= row < a and 0 <= col < c):
        raise ValueError(f"row must be in 0..{a - 1} and col in 0..{c - 1}, but row={row} and col={col}.")
    d0, d1, d2 = dims
    width = 1.0 + b + 1.6 + c + 1.6 + c + 0.5
    fig, ax = _canvas(width, max(a, b) + 2.6)
    top = 1.3
    x_left, x_right = 1.0, 1.0 + b + 1.6
    x_result = x_right + c + 1.6
    _grid(ax, x_left, top, a, b, name=left, dims=(d0, d1), fill=lambda i, j: OKABE_ITO[1] if i == row else _LIGHT)
    _grid(ax, x_right, top, b, c, name=right, dims=(d1, d2), fill=lambda i, j: OKABE_ITO[4] if j == col else _LIGHT)
    _grid(ax, x_result, top, a, c, name=result, dims=(d0, d2),
          fill=lambda i, j: OKABE_ITO[2] if (i, j) == (row, col) else _LIGHT,
          text=lambda i, j: "●" if (i, j) == (row, col) else "", fontsize=14)
    middle = top + max(a, b) / 2
    ax.text(x_left + b + 0.8, middle, "@", ha="center", va="center", fontsize=18)
    ax.text(x_right + c + 0.8, middle, "=", ha="center", va="center", fontsize=18)
    ax.text(width / 2, top + max(a, b) + 0.9,
            f"row {row} of {left} · column {col} of {right} (one dot product over {d1}) -> cell ({row}, {col}) "
            f"of {result}", ha="center", va="center", fontsize=9)
    if title:
        ax.set_title(title)
    named = f" '{title}'" if title else ""
    set_alt(ax, f"Diagram{named} of a matrix product: {left} ({d0} = {a}, {d1} = {b}) @ "
                f"{right} ({d1} = {b}, {d2} = {c}) = {result} ({d0} = {a}, {d2} = {c}); the inner size {d1} "
                f"disappears. Row {row} of {left} and column {col} of {right} make one dot product, cell "
                f"({row}, {col}) of {result}.")
    return finish(fig)


@with_alt
def plot_softmax_diagram(scores, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
                         *, title: str = "the softmax runs along each row (dim=-1)", decimals: int = 2):
    """Draw a score matrix ``(L, S)``, an arrow along each row, and the weights: each row now sums to 1.

    Built for ``notebooks/05_percentages.ipynb``. The right-hand column shows every row's sum.

    Args:
        scores: ``(L, S)`` tensor of scores.
        row_labels, col_labels: optional token labels for the rows (queries) and columns (keys).
        title: a title over the diagram.
        decimals: how many decimals the scores are written with (the weights always get two).

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``scores`` is not 2-D or the labels do not match it.
        TypeError: if ``decimals`` is not an int.

    Example:
        >>> fig = plot_softmax_diagram(torch.zeros(2, 4))
        >>> sorted({t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("Σ")})
        ['Σ = 1.00']
    """
    from .basic import _check_labels

    data = _as_numpy(scores)
    if data.ndim != 2:
        raise ValueError(f"plot_softmax_diagram draws a 2-D (L, S) score matrix, but got shape "
                         f"{tuple(data.shape)}; pick one example and head, e.g. scores[0, 0].")
    decimals = check_int(decimals, "decimals", minimum=0, fix="e.g. decimals=2.")
    L, S = data.shape
    rows = _check_labels(row_labels, L, "row_labels (query)")
    cols = _check_labels(col_labels, S, "col_labels (key)")
    weights = torch.softmax(torch.as_tensor(data), dim=-1).numpy()
    x_scores, x_weights = 2.0, 2.0 + S + 3.2
    width = x_weights + S + 2.2
    fig, ax = _canvas(width, L + 2.8, scale=0.62)
    top = 1.6
    _grid(ax, x_scores, top, L, S, name="scores", dims=("L", "S"),
          text=lambda i, j: f"{data[i, j]:.{decimals}f}", fontsize=9 if decimals < 2 else 8, side_label=False)
    _grid(ax, x_weights, top, L, S, name="weights", dims=("L", "S"),
          fill=lambda i, j: OKABE_ITO[4] if weights[i, j] == weights[i].max() else _LIGHT,
          text=lambda i, j: f"{weights[i, j]:.2f}", side_label=False)
    # One row count for both grids, left of the query labels (the rows are the same L queries in both).
    ax.text(0.3, top + L / 2, f"L = {L}", ha="center", va="center", fontsize=9, color=GREY, rotation=90)
    for i in range(L):
        y = top + i + 0.5
        ax.annotate("", xy=(x_weights - 0.7, y), xytext=(x_scores + S + 0.2, y),
                    arrowprops={"arrowstyle": "->", "color": OKABE_ITO[5], "linewidth": 1.5})
        ax.text(x_weights + S + 0.2, y, f"Σ = {weights[i].sum():.2f}", ha="left", va="center", fontsize=9)
        ax.text(x_scores - 0.2, y, rows[i], ha="right", va="center", fontsize=9)
    for j in range(S):
        ax.text(x_scores + j + 0.5, top - 0.05, cols[j], ha="center", va="bottom", fontsize=8, color=GREY)
        ax.text(x_weights + j + 0.5, top - 0.05, cols[j], ha="center", va="bottom", fontsize=8, color=GREY)
    ax.text((x_scores + S + x_weights - 0.5) / 2, top - 0.1, "softmax\nrow by row\n(dim=-1)", ha="center",
            va="bottom", fontsize=9)
    ax.set_title(title)
    i, j = divmod(int(weights.argmax()), S)
    set_alt(ax, f"Diagram '{title}': a {L} x {S} score matrix, rows {_words(rows)}, becomes the weights by a "
                f"softmax along each row; every row of weights sums to 1, and the largest weight, "
                f"{number(weights[i, j])}, is at row '{rows[i]}', column '{cols[j]}'.")
    return finish(fig)


def _words(labels: list[str]) -> str:
    return ", ".join(labels) if len(labels) <= 6 else f"{labels[0]} to {labels[-1]}"


@with_alt
def plot_heads_diagram(L: int = 4, E: int = 6, num_heads: int = 2, *,
                       title: str = "split_heads and merge_heads move features, never words"):
    """Draw ``(L, E) -> H x (L, Dh) -> (L, E)``: each head takes its own ``Dh`` columns of every word.

    Built for ``notebooks/09_detective_team.ipynb``. The cells hold ``0, 1, 2, ...`` in memory order, so you
    can follow each number: head ``h`` gets features ``h*Dh`` to ``(h+1)*Dh - 1`` of **every** word (split:
    ``reshape(N, L, H, Dh)`` then ``transpose(1, 2)``), and merging puts them back side by side.

    Args:
        L, E: the number of words and features drawn.
        num_heads: ``H``, which must divide ``E``.
        title: a title over the diagram.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if a size is not positive or ``num_heads`` does not divide ``E``.

    Example:
        >>> fig = plot_heads_diagram(L=2, E=4, num_heads=2)
        >>> [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("head")]
        ['head 0  (L, Dh)', 'head 1  (L, Dh)']
    """
    if min(L, E, num_heads) < 1 or E % num_heads:
        raise ValueError(f"L, E and num_heads must be positive and num_heads must divide E, but L={L}, E={E} "
                         f"and num_heads={num_heads}.")
    Dh = E // num_heads
    numbers = torch.arange(L * E).reshape(L, E)  # (L, E): each cell's position in memory

    light = (OKABE_ITO[4], OKABE_ITO[1], OKABE_ITO[2], OKABE_ITO[3], OKABE_ITO[6])  # black text stays readable

    def colour(j):
        return light[(j // Dh) % len(light)]

    gap = 1.2
    heads_width = num_heads * Dh + (num_heads - 1) * gap
    x_in, x_heads = 1.0, 1.0 + E + 2.6
    x_out = x_heads + heads_width + 2.6
    width = x_out + E + 0.6
    fig, ax = _canvas(width, L + 3.0)
    top = 1.4
    _grid(ax, x_in, top, L, E, name="x", dims=("L", "E"), fill=lambda i, j: colour(j),
          text=lambda i, j: str(int(numbers[i, j])))
    for h in range(num_heads):
        x0 = x_heads + h * (Dh + gap)
        _grid(ax, x0, top, L, Dh, name=f"head {h}", dims=("L", "Dh"), fill=lambda i, j, h=h: colour(h * Dh + j),
              text=lambda i, j, h=h: str(int(numbers[i, h * Dh + j])))
    _grid(ax, x_out, top, L, E, name="merged", dims=("L", "E"), fill=lambda i, j: colour(j),
          text=lambda i, j: str(int(numbers[i, j])))
    middle = top + L / 2
    for x_from, x_to, label in ((x_in + E + 0.2, x_heads - 0.6, "split_heads"),
                                (x_heads + heads_width + 0.2, x_out - 0.6, "merge_heads")):
        ax.annotate("", xy=(x_to, middle), xytext=(x_from, middle), arrowprops={"arrowstyle": "->", "linewidth": 1.5})
        ax.text((x_from + x_to) / 2, middle - 0.3, label, ha="center", va="bottom", fontsize=9)
    ax.text(width / 2, top + L + 1.0, f"H = {num_heads} heads of Dh = E // H = {Dh} features; the same word stays "
            f"in the same row everywhere", ha="center", va="center", fontsize=9)
    ax.set_title(title)
    parts = "; ".join(f"head {h} gets features {h * Dh} to {(h + 1) * Dh - 1}" for h in range(num_heads))
    set_alt(ax, f"Diagram '{title}': x (L = {L} words, E = {E} features) is split into {num_heads} heads of "
                f"Dh = {Dh} features each and merged back; {parts} of every word, and each word stays in its row.")
    return finish(fig)
