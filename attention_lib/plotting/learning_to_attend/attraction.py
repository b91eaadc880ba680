"""Agreement attraction as a picture: accuracy, and how often the verb looks at its subject, by attractors.

Built in ``notebooks/12_learning_to_attend.ipynb``: the analogue of the accuracy-by-attractors plot of Linzen, Dupoux
& Goldberg (2016). matplotlib is imported inside the function.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..alt import set_alt, with_alt
from ..style import category_style, finish

_PANELS = ("verb given the right form", "verb's strongest key on the subject")


def _parts(value) -> tuple[float, float, float]:
    """``(middle, low, high)`` of a value or of a ``(mean, lowest, highest)`` spread."""
    if isinstance(value, tuple | list):
        mean, low, high = (float(v) for v in value)
        return mean, low, high
    return float(value), float(value), float(value)


@with_alt
def plot_attraction(curves: Mapping[str, Mapping[int, tuple]], *, title: str = "agreement attraction"):
    """Two panels by the number of attractors: the share of verbs given the right form, and of verbs whose strongest
    key is the subject; one line per model, in the course's colours, markers and line styles.

    Built in ``notebooks/12_learning_to_attend.ipynb``.

    Args:
        curves: ``{label: {m: (accuracy, on_subject)}}``, as
            :func:`~attention_lib.training.learning_to_attend.by_attractors` returns; each value may also be a
            ``(mean, lowest, highest)`` spread over several runs, drawn as the mean with a bar from the lowest to
            the highest.
        title: the title over both panels.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``curves`` is empty or a curve has no points.

    Example:
        >>> fig = plot_attraction({"2 blocks": {0: (1.0, 0.9), 1: (0.9, 0.8)}})
        >>> [ax.get_ylabel() for ax in fig.axes]
        ['verb given the right form', "verb's strongest key on the subject"]
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    if not curves or any(not points for points in curves.values()):
        raise ValueError("plot_attraction needs at least one curve with points, e.g. {'model': {0: (1.0, 0.9)}}.")
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.0), sharex=True)
    described = []
    for i, (label, points) in enumerate(curves.items()):
        counts = sorted(points)
        style = category_style(i)
        for panel, ax in enumerate(axes):
            mid, low, high = zip(*(_parts(points[m][panel]) for m in counts), strict=True)
            ax.plot(counts, mid, label=label, markersize=7, linewidth=2, **style)
            if any(h > lo for lo, h in zip(low, high, strict=True)):
                ax.vlines(counts, low, high, color=style["color"], linewidth=1.5, alpha=0.6)
        accuracy = [_parts(points[m][0])[0] for m in counts]
        described.append(f"{label}: {round(100 * accuracy[0])} % right with {counts[0]} attractors, "
                         f"{round(100 * accuracy[-1])} % with {counts[-1]}")
    for panel, ax in enumerate(axes):
        ax.set_ylabel(_PANELS[panel])
        ax.set_xlabel("attractors: distractors whose number disagrees with the subject")
        ax.set_ylim(-0.03, 1.03)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_xticks(sorted({m for points in curves.values() for m in points}))
        ax.grid(True, alpha=0.3)
    axes[0].axhline(0.5, color="#8C8C8C", linestyle=":", linewidth=1)
    axes[0].legend(loc="lower left")
    fig.suptitle(title)
    set_alt(fig, f"Two line plots by the number of attractors, 0 to {max(max(p) for p in curves.values())}: left, "
                 f"the share of verbs given the right form; right, the share whose strongest key is the subject. "
                 + "; ".join(described) + ".")
    return finish(fig)
