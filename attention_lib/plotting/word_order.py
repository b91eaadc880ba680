"""The picture of a position encoding: the whole table as a heatmap, and a few of its columns as waves.

matplotlib is imported inside the function, so ``import attention_lib`` stays fast and works without a display.
"""

from __future__ import annotations

from collections.abc import Sequence

from .alt import with_alt
from .basic import _as_numpy

#: Okabe-Ito colours (safe for colour-blind readers), paired below with distinct line styles and markers.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000")
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@with_alt
def plot_position_encoding(encoding, columns: Sequence[int] | None = None, *, title: str = "",
                           cmap: str = "cividis"):
    """Draw a position encoding ``(L, E)``: left, the table (position down, feature across); right, waves.

    Built in ``notebooks/11_word_order.ipynb``. The right panel draws the chosen columns against the
    position, each with its own Okabe-Ito colour, line style and marker; the ticks are plain position and
    feature numbers.

    Args:
        encoding: ``(L, E)`` tensor or array, e.g. from :func:`attention_lib.sinusoidal_encoding`.
        columns: the feature columns to draw as waves; defaults to the first 4 even ones (``0, 2, 4, 6``:
            the sines of the 4 fastest frequencies).
        title: a title over both panels.
        cmap: the heatmap's colour map.

    Returns:
        The ``matplotlib.figure.Figure``; ``fig.axes[0]`` is the table, ``fig.axes[1]`` the waves.

    Raises:
        ValueError: if ``encoding`` is not 2-D, ``columns`` is empty, or a column is outside ``0..E-1``.

    Example:
        >>> import torch
        >>> from attention_lib import sinusoidal_encoding
        >>> fig = plot_position_encoding(sinusoidal_encoding(20, 8), columns=[0, 2])
        >>> [line.get_label() for line in fig.axes[1].get_lines()]
        ['feature 0', 'feature 2']
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    data = _as_numpy(encoding)
    if data.ndim != 2:
        raise ValueError(f"plot_position_encoding draws an (L, E) table, but got shape {tuple(data.shape)}; "
                         f"pick one sequence first, e.g. encoding[0].")
    length, dim = data.shape
    if columns is None:
        columns = list(range(0, min(dim, 8), 2))
    columns = [int(c) for c in columns]
    if not columns:
        raise ValueError("columns must name at least one feature column to draw, but it is empty.")
    outside = [c for c in columns if not 0 <= c < dim]
    if outside:
        raise ValueError(f"columns {outside} are outside the table, which has features 0 to {dim - 1}.")

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 1.3]})
    image = left.imshow(data, cmap=cmap, vmin=-1.0, vmax=1.0, aspect="auto", interpolation="nearest")
    left.set_xlabel("feature (column)")
    left.set_ylabel("position")
    left.set_title(f"the table: {length} positions x {dim} features")
    for axis in (left.xaxis, left.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.04)

    positions = range(length)
    for k, column in enumerate(columns):
        right.plot(positions, data[:, column], color=OKABE_ITO[k % len(OKABE_ITO)],
                   linestyle=_STYLES[k % len(_STYLES)], marker=_MARKERS[k % len(_MARKERS)],
                   markersize=4, markevery=max(1, length // 12), label=f"feature {column}")
    right.set_xlabel("position")
    right.set_ylabel("value")
    right.set_ylim(-1.15, 1.15)
    right.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
    right.set_title("some columns, one wave each")
    right.grid(True, alpha=0.3)
    right.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
