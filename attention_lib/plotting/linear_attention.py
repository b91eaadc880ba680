"""Lesson 19's figures of what training gives: each variant's seeds beside its band, and copying against the state's
size (``notebooks/19_linear_attention.ipynb``).

Both take plain numbers (``{name: {seed: value}}``), so that they draw a stored study as well as a fresh one; the
lesson's study module (:mod:`attention_lib.training.linear_attention.study`) hands them its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .alt import number, set_alt, with_alt
from .style import GREY, category_style, finish


def _percent(value: float) -> str:
    return f"{value:.0%}"


@with_alt
def plot_seed_bands(values: Mapping[str, Mapping[int, float]], *, fit: Sequence[int],
                    margin: float | Mapping[str, float],
                    title: str = "", ylabel: str = "accuracy", ax=None):
    """Each category's seeds as markers (filled: the seeds its band was fitted on; hollow: held out) over its band.

    The band is the fitted seeds' min-max widened by ``margin`` each side (``SeedStudy.held_out``), drawn as a grey
    bar; a held-out seed outside it is what the band would have got wrong.

    Args:
        values: ``{category: {seed: value}}``, e.g. ``{"softmax": {0: 0.94, 1: 0.93, ...}, "linear": ...}``.
        fit: the seeds each band is fitted on (the others are held out).
        margin: the headroom on each side, in the values' unit: one for all, or ``{category: margin}``.
        title, ylabel, ax: as for :func:`~attention_lib.plotting.plot_lines`.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: when there is no category, or a category lacks a fitted seed.

    Example:
        >>> fig = plot_seed_bands({"a": {0: 0.9, 1: 0.92, 2: 0.91}, "b": {0: 0.3, 1: 0.35, 2: 0.31}}, fit=[0, 1],
        ...                       margin=0.05)
        >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
        ['a', 'b']
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if not values:
        raise ValueError("plot_seed_bands needs at least one category: {category: {seed: value}}.")
    fit = set(fit)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
    said = []
    for i, (category, seeds) in enumerate(values.items()):
        fitted = [v for s, v in seeds.items() if s in fit]
        if not fitted:
            raise ValueError(f"category {category!r} has none of the fitted seeds {sorted(fit)}; it has "
                             f"{sorted(seeds)}.")
        wide = margin[category] if isinstance(margin, Mapping) else margin
        low, high = min(fitted) - wide, max(fitted) + wide
        ax.bar(i, high - low, bottom=low, width=0.6, color=GREY, alpha=0.25, edgecolor=GREY)
        style = category_style(i)
        held = {s: v for s, v in seeds.items() if s not in fit}
        ax.plot([i + 0.12 * (j - len(fitted) / 2) for j in range(len(fitted))], fitted, linestyle="none",
                marker=style["marker"], color=style["color"], markersize=7)
        ax.plot([i + 0.12 * (j - len(held) / 2) + 0.06 for j in range(len(held))], list(held.values()),
                linestyle="none", marker=style["marker"], markerfacecolor="none", color=style["color"],
                markersize=7, markeredgewidth=1.5)
        outside = [s for s, v in held.items() if not low - 1e-12 <= v <= high + 1e-12]
        said.append(f"{category}: seeds from {_percent(min(seeds.values()))} to {_percent(max(seeds.values()))}, "
                    f"band {_percent(low)} to {_percent(high)}, "
                    + (f"held-out seeds {outside} outside" if outside else "every held-out seed inside"))
    ax.set_xticks(range(len(values)), list(values))
    if all(0 <= v <= 1 for seeds in values.values() for v in seeds.values()):
        ax.set_ylim(0, 1.02)  # shares: the whole scale, so that a gap is seen at its size
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(handles=[Line2D([], [], marker="o", color=GREY, linestyle="none", label="seeds the band is fitted on"),
                       Line2D([], [], marker="o", color=GREY, markerfacecolor="none", linestyle="none",
                              label="held-out seeds")], fontsize=8, loc="lower left")
    widened = (", ".join(f"{c} {number(m)}" for c, m in margin.items()) if isinstance(margin, Mapping)
               else number(margin))
    set_alt(ax, f"{title or ylabel}, per category, each seed a marker over its band (the fitted seeds' range "
                f"widened by {widened}): " + "; ".join(said) + ".")
    return finish(ax.figure)


@with_alt
def plot_state_sweep(repeats: Sequence[int], curves: Mapping[str, Sequence[Sequence[float]]], *, title: str = "",
                     ylabel: str = "accuracy on the repeated part", ax=None):
    """Accuracy against the repeated part's length, one curve per model: the mean over seeds, their range shaded.

    Args:
        repeats: the repeat lengths (the x axis).
        curves: ``{label: [one value per repeat length, for each seed]}``.
        title, ylabel, ax: as for :func:`~attention_lib.plotting.plot_lines`.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: when a seed's values do not match ``repeats``, or a curve has no seed.

    Example:
        >>> fig = plot_state_sweep([2, 4], {"softmax": [[1.0, 0.9], [1.0, 0.8]], "small state": [[0.9, 0.2]]})
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['softmax', 'small state']
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.8))
    said = []
    for i, (label, seeds) in enumerate(curves.items()):
        if not seeds or any(len(values) != len(repeats) for values in seeds):
            raise ValueError(f"curve {label!r} needs, for each seed, one value per repeat length {list(repeats)}; "
                             f"got {[len(v) for v in seeds]} values.")
        columns = list(zip(*seeds, strict=True))
        mean = [sum(c) / len(c) for c in columns]
        style = category_style(i)
        ax.plot(repeats, mean, label=label, linewidth=2, markersize=6, **style)
        if len(seeds) > 1:
            ax.fill_between(repeats, [min(c) for c in columns], [max(c) for c in columns], color=style["color"],
                            alpha=0.15, linewidth=0)
        said.append(f"{label} from {_percent(mean[0])} at {repeats[0]} to {_percent(mean[-1])} at {repeats[-1]}")
    ax.set_xticks(list(repeats))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("length of the repeated part (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    set_alt(ax, f"{title or ylabel}: mean over seeds against the repeated part's length, " + "; ".join(said) + ".")
    return finish(ax.figure)
