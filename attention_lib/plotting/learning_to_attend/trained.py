"""Pictures of a trained model: its attention maps (per layer and head, or along training) and its loss curve.

Built in ``notebooks/12_learning_to_attend.ipynb``. matplotlib is imported inside each function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ...validation import check_index
from ..alt import number, set_alt, with_alt
from ..basic import _as_numpy, plot_heatmap
from ..style import finish

#: Okabe & Ito's colour-blind-safe palette (orange, sky blue, bluish green, vermillion, blue, reddish purple).
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#000000")
_LINESTYLES = ("-", "--", "-.", ":")


def _as_layers(attention) -> list[torch.Tensor]:
    if isinstance(attention, torch.Tensor):
        attention = [attention]
    layers = [torch.as_tensor(a).detach().cpu() for a in attention]
    if not layers or any(a.dim() != 3 or a.shape[-1] != a.shape[-2] for a in layers):
        found = [tuple(a.shape) for a in layers]
        raise ValueError(f"attention must be one (H, L, L) map per layer (one input: take [0] of the model's "
                         f"(N, H, L, L) maps), but got shapes {found}.")
    return layers


@with_alt
def plot_attention_grid(attention, tokens: Sequence[str], *, query_labels: Sequence[str] | None = None,
                        title: str = "", annotate: bool | None = None):
    """Draw every head of every layer of one input: a grid, one row per layer, one column per head.

    Built in ``notebooks/12_learning_to_attend.ipynb``.

    Args:
        attention: one ``(H, L, L)`` map per layer (a tuple or list), or a single ``(H, L, L)`` tensor.
        tokens: the ``L`` input tokens, labelling the keys (columns) and, by default, the queries (rows).
        query_labels: other labels for the rows, e.g. ``"8 -> 1"`` to show each position's answer.
        title: a title over the grid.
        annotate: write the weights in the cells (default: when ``L <= 12``).

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if a map is not ``(H, L, L)`` or the labels do not match ``L``.

    Example:
        >>> fig = plot_attention_grid((torch.full((2, 3, 3), 1 / 3),), ["a", "b", "c"])
        >>> [ax.get_title() for ax in fig.axes if ax.get_title()]
        ['layer 0, head 0', 'layer 0, head 1']
    """
    import matplotlib.pyplot as plt

    layers = _as_layers(attention)
    H, L = layers[0].shape[0], layers[0].shape[-1]
    fig, axes = plt.subplots(len(layers), H, figsize=(0.6 + (1.3 + 0.55 * L) * H, 0.9 + (0.6 + 0.45 * L) *
                                                      len(layers)), squeeze=False)
    for layer, maps in enumerate(layers):
        for head in range(H):
            plot_heatmap(maps[head], query_labels if query_labels is not None else tokens, tokens,
                         title=f"layer {layer}, head {head}", vmin=0.0, vmax=1.0, ax=axes[layer, head],
                         annotate=annotate, fmt=".1f")
    if title:
        fig.suptitle(title)
    return finish(fig)


@with_alt
def plot_attention_over_training(snapshots: Mapping[int, Sequence[torch.Tensor]], tokens: Sequence[str], *,
                                 layer: int = 0, head: int = 0, example: int = 0, title: str = ""):
    """Draw one head's map on one input after several numbers of training steps, left to right.

    Built in ``notebooks/12_learning_to_attend.ipynb``: watch the pattern emerge.

    Args:
        snapshots: ``{step: attention}``, each ``attention`` one ``(N, H, L, L)`` map per layer (as in
            :class:`attention_lib.training.TrainingRun`).
        tokens: the ``L`` tokens of input ``example``.
        layer, head, example: which map to show.
        title: a title over the row.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``snapshots`` is empty or ``layer``/``head``/``example`` is out of range.

    Example:
        >>> snaps = {0: (torch.full((1, 2, 2, 2), 0.5),), 10: (torch.eye(2).expand(1, 2, 2, 2),)}
        >>> fig = plot_attention_over_training(snaps, ["a", "b"])
        >>> [ax.get_title() for ax in fig.axes if ax.get_title()]
        ['after 0 steps', 'after 10 steps']
    """
    import matplotlib.pyplot as plt

    if not snapshots:
        raise ValueError("snapshots is empty; train with snapshot_steps=(0, 50, ...) to record some.")
    steps = sorted(snapshots)
    first = snapshots[steps[0]]
    N, H = first[0].shape[:2]
    for name, value, size in (("layer", layer, len(first)), ("head", head, H), ("example", example, N)):
        check_index(value, name, size)
    L = len(tokens)
    ncols = min(3, len(steps))
    nrows = -(-len(steps) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(0.4 + (1.3 + 0.5 * L) * ncols, (0.9 + 0.45 * L) * nrows + 0.4),
                             squeeze=False)
    for ax in axes.flat[len(steps):]:
        ax.axis("off")
    for ax, step in zip(axes.flat, steps, strict=False):  # spare axes stay empty
        plot_heatmap(snapshots[step][layer][example, head, :L, :L], tokens, tokens, title=f"after {step} steps",
                     vmin=0.0, vmax=1.0, ax=ax, fmt=".1f")
    fig.suptitle(title or f"layer {layer}, head {head} during training")
    return finish(fig)


@with_alt
def plot_loss_curves(curves: Mapping[str, Sequence[float]], *, title: str = "training loss",
                     xlabel: str = "training step", ylabel: str = "cross-entropy loss", logy: bool = True):
    """Draw one or more loss curves over the training steps, each in its own colour and line style.

    Built in ``notebooks/12_learning_to_attend.ipynb``. On a log axis the ticks are plain numbers.

    Args:
        curves: ``{name: losses}``, one loss per step.
        title, xlabel, ylabel: text for the axes.
        logy: a logarithmic loss axis (losses fall by orders of magnitude).

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``curves`` is empty or a curve is empty.

    Example:
        >>> fig = plot_loss_curves({"with positions": [2.3, 0.1, 0.01], "without": [2.3, 1.7, 1.6]})
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['with positions', 'without']
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    if not curves or any(len(_as_numpy(v).reshape(-1)) == 0 for v in curves.values()):
        raise ValueError("plot_loss_curves needs at least one non-empty curve, e.g. {'loss': run.losses}.")
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    for i, (name, losses) in enumerate(curves.items()):
        y = _as_numpy(losses).reshape(-1)
        ax.plot(range(1, len(y) + 1), y, label=name, color=OKABE_ITO[i % len(OKABE_ITO)],
                linestyle=_LINESTYLES[i % len(_LINESTYLES)], linewidth=2)
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return finish(fig)


@with_alt
def plot_shipped_overview(sentence: str = "near the dogs the cat purr(s)", digits: str = "3 1 4 1 5 9 2 6"):
    """The picture of what the shipped models learned: reversal's anti-diagonal, and a verb finding its subject.

    Built in ``notebooks/12_learning_to_attend.ipynb``; it is the README's figure
    (``plot_shipped_overview().savefig("docs/12_learned_attention.png", dpi=100)``). Left: head 0 of the
    reversal model on ``digits``, labelled by position and digit. Right: the agreement model's verb-to-subject
    head (:func:`~attention_lib.training.learning_to_attend.subject_head`) on ``sentence``, whose subject need
    not be first.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: for an input the models cannot read.

    Example:
        >>> fig = plot_shipped_overview()
        >>> [ax.get_title().split(":")[0] for ax in fig.axes if ax.get_title()]
        ['reversal, layer 0, head 0', 'agreement, layer 1, head 0']
    """
    import matplotlib.pyplot as plt

    from ...training.learning_to_attend import load_trained, subject_head

    reversal, agreement = load_trained("reversal"), load_trained("agreement")
    layer, head = subject_head(agreement.model)
    fig, axes = plt.subplots(1, 2, figsize=(13.0, 5.2), gridspec_kw={"width_ratios": [1, 1.05]})
    tokens, answers, attention = reversal.run(digits)
    digit_tokens, reversal_maps = tokens, attention
    plot_heatmap(attention[0][0], [f"{i}: {t} → {a}" for i, (t, a) in enumerate(zip(tokens, answers, strict=True))],
                 [f"{i}: {t}" for i, t in enumerate(tokens)], title="reversal, layer 0, head 0: the anti-diagonal",
                 vmin=0.0, vmax=1.0, fmt=".1f", ax=axes[0])
    tokens, answers, attention = agreement.run(sentence)
    rows = [f"{t} → {a}" if a else t for t, a in zip(tokens, answers, strict=True)]
    plot_heatmap(attention[layer][head], rows, tokens, vmin=0.0, vmax=1.0, fmt=".1f", ax=axes[1],
                 title=f"agreement, layer {layer}, head {head}: where the verb looks")
    fig.suptitle("What the shipped tiny transformers of lesson 12 attend to")
    mirror = float(torch.stack([reversal_maps[0][0][i, -1 - i] for i in range(len(digit_tokens))]).mean())
    verb = next(i for i, a in enumerate(answers) if a)  # the one position with an answer
    subject = max(range(verb), key=lambda j: float(attention[layer][head][verb, j]))
    set_alt(fig, f"Two heatmaps. Left: reversal head 0 on '{digits}' puts on average {number(mirror)} of each "
                 f"position's weight on its mirror position (the anti-diagonal). Right: agreement layer {layer}, "
                 f"head {head} on '{sentence}': the verb puts {number(float(attention[layer][head][verb, subject]))} "
                 f"of its weight on '{tokens[subject]}' and answers '{answers[verb]}'.")
    return finish(fig)
