"""The course's figure style: colour-blind-safe colours, markers and line styles, and plain log-axis ticks.

Categorical colours come from the Okabe-Ito palette (Okabe & Ito, *Color Universal Design*, 2008), which stays
distinguishable for the common kinds of colour blindness; each category also gets its own marker and line style,
so that the figures can be read without colour at all (in print, or in JupyterLab's dark theme). Heatmaps use
``viridis``, which is perceptually uniform and readable in grey.
"""

from __future__ import annotations

#: Okabe-Ito colours in the order the course uses them (black is left out: it vanishes in a dark theme).
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
)

#: One marker per category, in the same order as the colours.
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X")

#: One line style per category, in the same order as the colours.
LINESTYLES: tuple[str, ...] = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)))

#: One hatch per category, for bars that must be told apart without colour.
HATCHES: tuple[str, ...] = ("", "//", "..", "xx", "\\\\", "oo", "++")

#: The colour map of every heatmap.
HEATMAP_CMAP = "viridis"

#: A neutral grey that reads on a white and on a dark background.
GREY = "#8C8C8C"

#: Three stages of work in the block-by-block pictures: done already, being done now, still to come.
PROGRESS_COLORS: tuple[str, str, str] = (OKABE_ITO[0], OKABE_ITO[1], "#E8E8E8")


def category_style(i: int) -> dict:
    """The colour, marker and line style of category ``i`` (wrapping around after seven).

    Example:
        >>> category_style(1)["color"], category_style(1)["marker"]
        ('#E69F00', 's')
    """
    return {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def plain_log_ticks(ax, axis: str = "x", base: float = 10) -> None:
    """Label a log axis with plain numbers (16, 256, 0.001) instead of powers (2⁴, 10⁻³), no minor labels.

    Major ticks sit at the powers of ``base`` (and, on a base-10 axis spanning less than three decades, also at
    2 and 5 times them, so a short axis still carries several labels); their labels are ordinary numbers with
    thousands separators, and the minor ticks keep their marks but lose their labels. Call it after plotting,
    so that the axis limits are known.

    Args:
        ax: the matplotlib axes.
        axis: ``"x"`` or ``"y"``.
        base: the base of the log scale (2 for sizes such as 16, 256, 4096; 10 for times and counts).

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> _ = ax.plot([16, 256, 4096], [1, 2, 3])
        >>> ax.set_xscale("log", base=2)
        >>> plain_log_ticks(ax, "x", base=2)
        >>> fig.canvas.draw()
        >>> {"16", "256", "4,096"} <= {t.get_text() for t in ax.get_xticklabels()}
        True
        >>> plt.close(fig)
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', but axis={axis!r}.")
    target = ax.xaxis if axis == "x" else ax.yaxis
    low, high = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    subs = (1.0, 2.0, 5.0) if base == 10 and low > 0 and high / low < 1e3 else (1.0,)
    target.set_major_locator(LogLocator(base=base, subs=subs))
    target.set_major_formatter(FuncFormatter(_plain_number))
    target.set_minor_formatter(NullFormatter())


def _plain_number(value: float, _position=None) -> str:
    """``16 -> '16'``, ``4096 -> '4,096'``, ``0.001 -> '0.001'``, ``1e-05 -> '0.00001'``, ``1e-08 -> '1e-08'``."""
    if value >= 1:
        return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
    if value >= 1e-6:
        return f"{value:.7f}".rstrip("0").rstrip(".")
    return f"{value:.1g}"


def finish(fig):
    """Give ``fig`` an opaque white background (readable in a dark notebook theme) and a tight layout."""
    fig.patch.set_facecolor("white")
    fig.patch.set_alpha(1.0)
    fig.tight_layout()
    return fig
