"""Text alternatives: the sentence a screen reader says instead of a figure, and how it reaches the reader.

Every figure of the course carries one: what it shows and the number that matters. The plotting helpers take
it as ``alt=...`` and otherwise write a default from what they drew (title, axes, the largest cell of a
heatmap, the tallest bar, where each curve starts and ends). Any other matplotlib figure gets the same kind of
default, read from its titles, labels and data, so a plain ``plt.show()`` in a lesson is described too.

How the text travels to the reader is :mod:`attention_lib.plotting.display`'s job.
"""

from __future__ import annotations

import math

#: Where an explicit text alternative is kept on a matplotlib Figure or Axes.
ALT_ATTRIBUTE = "_course_alt"
#: How many items (rows, bars, curves, texts) a default description lists before it summarises.
MAX_LISTED = 6


def set_alt(target, text: str | None):
    """Give a matplotlib Figure or Axes its text alternative; ``None`` leaves the current one. Returns ``target``.

    On an Axes, the text describes that panel; a figure's own text replaces the panels' descriptions.

    Raises:
        TypeError: if ``text`` is not a string (or ``None``).
        ValueError: if ``text`` is empty.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> _ = set_alt(fig, "A straight line from 0 to 1.")
        >>> alt_text(fig)
        'A straight line from 0 to 1.'
        >>> plt.close(fig)
    """
    if text is None:
        return target
    if not isinstance(text, str):
        raise TypeError(f"alt must be a string (a sentence that describes the figure), but got "
                        f"{type(text).__name__}.")
    if not text.strip():
        raise ValueError("alt must say what the figure shows, but it is empty; leave it out (None) to get the "
                         "default description.")
    setattr(target, ALT_ATTRIBUTE, " ".join(text.split()))
    return target


def with_alt(plot):
    """Give a plotting helper the keyword ``alt``: the figure's text alternative, instead of the default one.

    With ``ax=...`` the text describes that panel; otherwise it is the whole figure's. Without ``alt`` the
    helper's own description (or :func:`describe_axes`) is used. Every helper of :mod:`attention_lib.plotting`
    is wrapped with it.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import matplotlib.pyplot as plt
        >>> @with_alt
        ... def plot_nothing(title=""):
        ...     fig, ax = plt.subplots()
        ...     ax.set_title(title)
        ...     return fig
        >>> alt_text(plot_nothing(alt="Nothing at all, on purpose."))
        'Nothing at all, on purpose.'
        >>> plt.close("all")
    """
    import functools

    @functools.wraps(plot)
    def plot_with_alt(*args, alt: str | None = None, **kwargs):
        fig = plot(*args, **kwargs)
        set_alt(kwargs["ax"] if kwargs.get("ax") is not None else fig, alt)
        return fig

    plot_with_alt.takes_alt = True
    return plot_with_alt


def alt_text(fig) -> str:
    """The text alternative of a matplotlib figure: its own, or one built from its panels.

    Each panel (an Axes; colour bars are left out) is described by the text its helper gave it, or by
    :func:`describe_axes`; several panels are numbered, after the figure's suptitle.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> _ = ax.bar(["a", "b"], [0.25, 0.75])
        >>> _ = ax.set_title("two bars")
        >>> alt_text(fig)
        "Bar chart 'two bars': a 0.25, b 0.75; the tallest is b (0.75)."
        >>> plt.close(fig)
    """
    own = getattr(fig, ALT_ATTRIBUTE, None)
    if own:
        return own
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    texts = [getattr(ax, ALT_ATTRIBUTE, None) or describe_axes(ax) for ax in panels]
    suptitle = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    if len(texts) == 1:
        text = texts[0]
    elif texts:
        text = f"{len(texts)} panels. " + " ".join(f"({i}) {t}" for i, t in enumerate(texts, start=1))
    else:
        text = "An empty figure."
    return f"{_sentence(suptitle)} {text}" if suptitle else text


def describe_axes(ax) -> str:
    """A default description of one panel, read from what is drawn in it.

    A heatmap (an image) gives its rows, columns, value range and largest cell; a bar chart its bars' values
    and the tallest (several series side by side: each series' values); a line plot its axes and where each
    curve starts and ends; anything else (a diagram) its title and the words written in it.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> _ = ax.plot([1, 2, 4], [1.0, 0.5, 0.25], label="halves")
        >>> _ = ax.set_xlabel("n")
        >>> describe_axes(ax)
        'Line plot, x axis n (1 to 4), y axis unlabelled (0.25 to 1): halves goes from 1 at 1 to 0.25 at 4.'
        >>> plt.close(fig)
    """
    from matplotlib.container import BarContainer

    title = " ".join((ax.get_title() or ax.get_title("left") or ax.get_title("right")).split())
    named = f" '{title}'" if title else ""
    if ax.images:
        return _describe_heatmap(ax, ax.images[-1], named)
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if len(bars) == 1:
        return _describe_bars(ax, bars[0], named)
    if bars:
        return _describe_grouped_bars(ax, bars, named)
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
    if lines:
        return _describe_lines(ax, lines, named)
    words = list(dict.fromkeys(" ".join(t.get_text().split()) for t in ax.texts if t.get_text().strip()))
    shown = f": {'; '.join(words[:MAX_LISTED])}{' ...' if len(words) > MAX_LISTED else ''}" if words else ""
    return f"Diagram{named}{shown}."


def number(value: float) -> str:
    """A value as a reader says it: three significant digits; "below 0.01" rather than a power of ten.

    Example:
        >>> number(0.98321), number(1022.5), number(3.0), number(2.1e-9), number(0.0)
        ('0.983', '1,022', '3', 'below 0.01', '0')
    """
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) < 0.01:
        return "below 0.01" if value > 0 else "above -0.01"
    return f"{value:.3g}"


def _sentence(text: str) -> str:
    text = " ".join(str(text).split())
    return text if text.endswith((".", "!", "?", ":")) else f"{text}."


def _tick_texts(axis, size: int) -> list[str] | None:
    """The tick labels of an axis when there is one per row or column (a labelled heatmap), else None."""
    labels = [t.get_text() for t in axis.get_ticklabels()]
    return labels if len(labels) == size and all(labels) else None


def _listed(items: list[str]) -> str:
    if len(items) <= 2 * MAX_LISTED:
        return ", ".join(items)
    return f"{len(items)} of them, from {items[0]} to {items[-1]}"


def _describe_heatmap(ax, image, named: str) -> str:
    import numpy as np

    data = np.ma.masked_invalid(np.ma.asarray(image.get_array(), dtype=float))
    if data.ndim != 2:
        return f"Image{named}."
    rows = _tick_texts(ax.yaxis, data.shape[0]) or [str(i) for i in range(data.shape[0])]
    cols = _tick_texts(ax.xaxis, data.shape[1]) or [str(j) for j in range(data.shape[1])]
    ylabel = ax.get_ylabel().split("\n")[0] or "rows"
    xlabel = ax.get_xlabel().split("\n")[0] or "columns"
    text = (f"Heatmap{named}, {data.shape[0]} x {data.shape[1]}: rows are {ylabel} ({_listed(rows)}), "
            f"columns are {xlabel} ({_listed(cols)})")
    if data.count() == 0:
        return f"{text}; every cell is blocked."
    i, j = np.unravel_index(int(np.ma.argmax(data)), data.shape)
    text += (f"; the largest value, {number(data.max())}, is at row '{rows[i]}', column '{cols[j]}' (the smallest: "
             f"{number(data.min())})")
    blocked = int(np.ma.count_masked(data))
    if blocked:
        text += f"; {blocked} of {data.size} cells are blocked by the mask"
    return f"{text}."


def _describe_bars(ax, bars, named: str) -> str:
    heights = [float(p.get_height()) for p in bars.patches]
    names = _tick_texts(ax.xaxis, len(heights)) or [str(i) for i in range(len(heights))]
    ylabel = f" ({ax.get_ylabel()})" if ax.get_ylabel() else ""
    pairs = [f"{n} {number(h)}" for n, h in zip(names, heights, strict=True)]
    listed = ", ".join(pairs) if len(pairs) <= 2 * MAX_LISTED else f"{len(pairs)} bars"
    top = max(range(len(heights)), key=heights.__getitem__) if heights else None
    tallest = f"; the tallest is {names[top]} ({number(heights[top])})" if top is not None else ""
    return f"Bar chart{named}{ylabel}: {listed}{tallest}."


def _describe_grouped_bars(ax, containers, named: str) -> str:
    """Several series of bars side by side: each series' heights, named by the tick each bar stands nearest."""
    ticks = [float(t) for t in ax.get_xticks()]
    labels = [t.get_text() for t in ax.xaxis.get_ticklabels()]
    series = []
    for k, bars in enumerate(containers[:MAX_LISTED]):
        name = bars.get_label() if bars.get_label() and not bars.get_label().startswith("_") else f"series {k + 1}"
        values = []
        for patch in bars.patches:
            centre = patch.get_x() + patch.get_width() / 2
            nearest = min(range(len(ticks)), key=lambda t: abs(ticks[t] - centre)) if ticks else None
            where = labels[nearest] if nearest is not None and nearest < len(labels) and labels[nearest] else ""
            values.append(f"{where or number(centre)} {number(patch.get_height())}")
        series.append(f"{name}: {_listed(values)}")
    more = f" ({len(containers) - MAX_LISTED} more series)" if len(containers) > MAX_LISTED else ""
    ylabel = f" ({ax.get_ylabel()})" if ax.get_ylabel() else ""
    return f"Grouped bar chart{named}{ylabel}, {len(containers)} series: {'; '.join(series)}{more}."


def _describe_axis(ax, which: str, values) -> str:
    label = (ax.get_xlabel() if which == "x" else ax.get_ylabel()) or "unlabelled"
    finite = [v for v in values if math.isfinite(v)] or [0.0]
    low, high = min(finite), max(finite)
    scale = ", log scale" if (ax.get_xscale() if which == "x" else ax.get_yscale()) == "log" else ""
    return f"{which} axis {label} ({number(low)} to {number(high)}{scale})"


def _describe_lines(ax, lines, named: str) -> str:
    import numpy as np

    curves, xs, ys = [], [], []
    for line in lines:
        xs += [float(v) for v in line.get_xdata()]
        ys += [float(v) for v in line.get_ydata()]
    for i, line in enumerate(lines[:MAX_LISTED]):
        x, y = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
        name = line.get_label() if not line.get_label().startswith("_") else f"curve {i + 1}"
        curves.append(f"{name} goes from {number(y[0])} at {number(x[0])} to {number(y[-1])} at {number(x[-1])}")
    more = f" ({len(lines) - MAX_LISTED} more curves)" if len(lines) > MAX_LISTED else ""
    return (f"Line plot{named}, {_describe_axis(ax, 'x', xs)}, {_describe_axis(ax, 'y', ys)}: "
            f"{'; '.join(curves)}{more}.")

