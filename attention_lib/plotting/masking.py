"""Masks drawn as masks: two labelled colours (may attend / blocked), blocked cells hatched, no colour bar.

A bool mask is not a quantity on a scale, so it gets no colour map: each cell is either "may attend" (a
solid colour with a tick) or "blocked" (hatched grey with a cross), explained by a legend. Used from
``notebooks/08_masking.ipynb`` on; masks follow SDPA's convention, ``True`` = may attend.
"""

from __future__ import annotations

from collections.abc import Sequence

from .alt import set_alt, with_alt
from .basic import BLOCKED_STYLE, _as_numpy, _check_labels
from .style import OKABE_ITO, finish

#: How an allowed cell is drawn.
ALLOWED_STYLE = {"facecolor": OKABE_ITO[2], "edgecolor": "white", "linewidth": 1.0}


@with_alt
def plot_mask(mask, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None, *,
              title: str = "", xlabel: str = "key (attended to)", ylabel: str = "query (attending)", ax=None):
    """Draw a bool ``(L, S)`` mask (``True`` = may attend) as two labelled colours, with a legend.

    Built for ``notebooks/08_masking.ipynb``. Allowed cells are green with a ✓, blocked cells hatched grey
    with a ✗, so the picture reads the same in colour, in grey and in a dark notebook theme.

    Args:
        mask: ``(L, S)`` bool tensor or array (or 0/1 numbers), ``True`` where query ``i`` may attend to key ``j``.
        row_labels: ``L`` labels for the rows (queries).
        col_labels: ``S`` labels for the columns (keys).
        title, xlabel, ylabel: text for the axes.
        ax: draw into this axes instead of a new figure.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``mask`` is not 2-D, holds values other than 0 and 1, or the labels do not match it.

    Example:
        >>> import torch
        >>> fig = plot_mask(torch.ones(2, 2, dtype=torch.bool).tril(), ["a", "b"], ["a", "b"])
        >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        ['may attend', 'blocked']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    data = _as_numpy(mask)
    if data.ndim != 2:
        raise ValueError(f"plot_mask draws a 2-D (L, S) mask, but got shape {tuple(data.shape)}; pick one "
                         f"example (and head) first, e.g. mask[0].")
    if not ((data == 0) | (data == 1)).all():
        raise ValueError("plot_mask draws a bool mask (True = may attend), but got values other than 0 and 1; "
                         "for an additive float mask pass `mask == 0`.")
    allowed = data.astype(bool)
    rows = _check_labels(row_labels, data.shape[0], "row_labels (query)")
    cols = _check_labels(col_labels, data.shape[1], "col_labels (key)")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.9 + 0.7 * len(cols), 1.2 + 0.55 * len(rows)))
    for i in range(len(rows)):
        for j in range(len(cols)):
            style = ALLOWED_STYLE if allowed[i, j] else BLOCKED_STYLE
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1.0, 1.0, **style))
            ax.text(j, i, "✓" if allowed[i, j] else "✗", ha="center", va="center", fontsize=11,
                    color="white" if allowed[i, j] else "#404040")
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_aspect("auto")
    long = max(map(len, cols)) > 4
    ax.set_xticks(range(len(cols)), labels=cols, rotation=45 if long else 0, ha="right" if long else "center")
    ax.set_yticks(range(len(rows)), labels=rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(handles=[Patch(label="may attend", **ALLOWED_STYLE), Patch(label="blocked", **BLOCKED_STYLE)],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    set_alt(ax, _mask_alt(allowed, rows, cols, title, ylabel, xlabel))
    return finish(ax.figure)


def _mask_alt(allowed, rows: list[str], cols: list[str], title: str, ylabel: str, xlabel: str) -> str:
    """``Mask 'causal mask', rows query, columns key: 10 of 16 cells may attend, 6 are blocked; 'the' may ...``."""
    named = f" '{title}'" if title else ""
    text = (f"Mask{named}, {len(rows)} x {len(cols)}, rows are {ylabel}, columns are {xlabel}: "
            f"{int(allowed.sum())} of {allowed.size} cells may attend, {int((~allowed).sum())} are blocked")
    if len(rows) <= 8:
        seen = [f"'{row}' may attend to {', '.join(c for c, ok in zip(cols, line, strict=True) if ok) or 'nothing'}"
                for row, line in zip(rows, allowed, strict=True)]
        text += "; " + "; ".join(seen)
    return f"{text}."
