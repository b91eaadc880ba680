"""Pictures of induction heads forming: the loss curves with the phase change marked, the heads' scores over
training, and two heads' maps on one sequence with the cells their pattern predicts outlined.

Built in ``notebooks/13_induction_heads.ipynb``. matplotlib is imported inside each function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from .alt import number, set_alt, with_alt
from .basic import _as_numpy, plot_heatmap
from .style import GREY, category_style, finish


def _smooth(y, window: int):
    import numpy as np

    y = np.asarray(y, dtype=float)
    if len(y) < window:
        return np.arange(1, len(y) + 1), y
    return np.arange(window // 2 + 1, len(y) - window + window // 2 + 2), np.convolve(y, np.ones(window) / window,
                                                                                      mode="valid")


def _mark_phase(ax, phase, label: bool) -> None:
    ax.axvspan(phase.begins, phase.ends, color=GREY, alpha=0.2, lw=0,
               label=f"middle half of the drop (steps {phase.begins}-{phase.ends})" if label else None)
    ax.axvline(phase.step, color=GREY, linestyle="--", linewidth=1.5,
               label=f"phase change (step {phase.step})" if label else None)


@with_alt
def plot_phase_change(curves: Mapping[str, Sequence[float]], phase, *, scores: Mapping[str, tuple] | None = None,
                      window: int = 20, title: str = "the phase change"):
    """Loss curves over training with the phase change marked; below them, optionally, head scores over training.

    Built in ``notebooks/13_induction_heads.ipynb``. Each curve is drawn raw (thin) and as its moving average over
    ``window`` steps (thick, with markers), in the course's Okabe-Ito colours; the phase change is a dashed line
    and the middle half of the drop a grey band.

    Args:
        curves: ``{name: losses}``, one loss per step (steps count from 1).
        phase: a :class:`attention_lib.attention_only.PhaseChange`.
        scores: optional ``{name: (steps, values)}``, drawn in a second panel with the same steps.
        window: the moving average's width.
        title: the title over the figure.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``curves`` is empty.

    Example:
        >>> from attention_lib.attention_only import phase_change
        >>> curve = [3.0] * 50 + [0.5] * 50
        >>> fig = plot_phase_change({"repeated part": curve}, phase_change(curve), scores={"s": ([0, 100], [0, 1])})
        >>> len(fig.axes)
        2
    """
    import matplotlib.pyplot as plt

    if not curves:
        raise ValueError("plot_phase_change needs at least one loss curve, e.g. {'repeated': run.repeated_losses}.")
    rows = 2 if scores else 1
    fig, axes = plt.subplots(rows, 1, figsize=(7.0, 3.4 * rows), sharex=True, squeeze=False)
    ax = axes[0, 0]
    for i, (name, losses) in enumerate(curves.items()):
        style = category_style(i)
        y = _as_numpy(losses).reshape(-1)
        ax.plot(range(1, len(y) + 1), y, color=style["color"], alpha=0.25, linewidth=0.8)
        x, s = _smooth(y, window)
        ax.plot(x, s, label=f"{name} (mean of {window} steps)", linewidth=2, markevery=max(1, len(x) // 12),
                markersize=6, **style)
    _mark_phase(ax, phase, label=True)
    ax.set_ylabel("next-token loss")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    ax.set_title(title)
    if scores:
        ax2 = axes[1, 0]
        for i, (name, (steps, values)) in enumerate(scores.items()):
            style = category_style(i + 2)
            ax2.plot(_as_numpy(steps), _as_numpy(values), label=name, linewidth=2, markersize=5, **style)
        _mark_phase(ax2, phase, label=False)
        ax2.set_ylabel("head score")
        ax2.set_ylim(0, 1)
        ax2.grid(True, alpha=0.3)
        ax2.legend(fontsize=8, loc="center right")
    axes[-1, 0].set_xlabel("training step")
    names = ", ".join(curves)
    set_alt(fig, f"Line plot '{title}' of the loss over {len(next(iter(curves.values())))} training steps ({names}): "
                 f"the first curve falls from {number(phase.before)} to {number(phase.after)}, halfway down at step "
                 f"{phase.step}, with the middle half of the fall between steps {phase.begins} and {phase.ends} "
                 f"(the grey band)" + (f"; below it, the head scores {', '.join(scores)} over the same steps"
                                      if scores else "") + ".")
    return finish(fig)


@with_alt
def plot_head_maps(maps: Sequence[torch.Tensor], tokens: Sequence[str], *, titles: Sequence[str],
                   targets: Sequence[Sequence[tuple[int, int]]] = (), threshold: float = 0.1, suptitle: str = ""):
    """Draw attention maps of one sequence side by side, weights of at least ``threshold`` written in their cells,
    and the cells a pattern predicts outlined.

    Built in ``notebooks/13_induction_heads.ipynb`` for the previous-token head (outlined: the cells just left of
    the diagonal) and the induction head (outlined: one step after the earlier copy of each token).

    Args:
        maps: ``(L, L)`` attention maps (row = the position attending), one per panel.
        tokens: the ``L`` tokens, labelling both axes (with their positions).
        titles: one title per map.
        targets: per map, the ``(row, column)`` cells to outline (may be empty).
        threshold: the smallest weight written as a number (smaller ones would only clutter the picture).
        suptitle: a title over the figure.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if the numbers of maps, titles and targets differ, or a map is not ``(L, L)``.

    Example:
        >>> fig = plot_head_maps([torch.eye(3)], "abc", titles=["itself"], targets=[[(0, 0)]])
        >>> fig.axes[0].get_title()
        'itself'
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    maps = [_as_numpy(m) for m in maps]
    targets = list(targets) or [[] for _ in maps]
    if not maps or len(titles) != len(maps) or len(targets) != len(maps):
        raise ValueError(f"plot_head_maps needs one title and one target list per map, but got {len(maps)} maps, "
                         f"{len(titles)} titles and {len(targets)} target lists.")
    L = len(tokens)
    if any(m.shape != (L, L) for m in maps):
        raise ValueError(f"each map must be ({L}, {L}), one row and column per token, but got "
                         f"{[m.shape for m in maps]}.")
    labels = [f"{t} {i}" for i, t in enumerate(tokens)]
    fig, axes = plt.subplots(1, len(maps), figsize=(0.6 + (1.4 + 0.36 * L) * len(maps), 1.4 + 0.34 * L),
                             squeeze=False)
    for ax, m, title, cells in zip(axes[0], maps, titles, targets, strict=True):
        plot_heatmap(m, labels, labels, title=title, vmin=0.0, vmax=1.0, ax=ax, annotate=False)
        for i in range(L):
            for j in range(L):
                if m[i, j] >= threshold:
                    ax.text(j, i, f"{m[i, j]:.1f}".lstrip("0"), ha="center", va="center", fontsize=7,
                            color="black" if m[i, j] > 0.5 else "white")
        for row, col in cells:
            ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="#E69F00", linewidth=1.6))
        if cells:
            ax.set_xlabel("key (attended to)\norange squares: where the pattern predicts")
            on_target = sum(m[r, c] for r, c in cells) / len(cells)
            set_alt(ax, f"Heatmap '{title}' of {L} x {L} attention weights on '{''.join(tokens)}': the "
                        f"{len(cells)} outlined cells, where the pattern predicts, hold {number(on_target)} of "
                        f"their rows' weight on average.")
    if suptitle:
        fig.suptitle(suptitle)
    return finish(fig)
