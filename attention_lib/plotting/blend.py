"""One query's output as a visible mix: a stack of slices ``weights[j] * value[j]``, one per word (lesson 06).

matplotlib is imported inside the function; each word keeps one Okabe-Ito colour and one hatch, so the slices
can be told apart without colour.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .alt import number, set_alt, with_alt
from .style import GREY, HATCHES, OKABE_ITO, finish


@with_alt
def plot_mix(weights: torch.Tensor, value: torch.Tensor, tokens: Sequence[str], features: Sequence[str], *,
             title: str = "", ax=None):
    """Draw one query's output as stacked bars: for each feature, one slice ``weights[j] * value[j, f]`` per word.

    Built step by step in ``notebooks/06_blend.ipynb``. The height of each stack is the output's value for that
    feature, marked with a black dash; with non-negative values you can see how much each word contributes.

    Args:
        weights: ``(S,)``, one query's attention weights (a row of the ``(L, S)`` weights).
        value: ``(S, Ev)``, the value vectors.
        tokens: ``S`` labels, one per word (the legend).
        features: ``Ev`` labels, one per value feature (the x axis).
        title: the axes title.
        ax: draw into this axes instead of a new figure.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if the shapes or the numbers of labels do not match.

    Example:
        >>> fig = plot_mix(torch.tensor([0.25, 0.75]), torch.tensor([[4.0, 0.0], [0.0, 4.0]]), ["a", "b"],
        ...                ["x", "y"])
        >>> [round(float(p.get_height()), 2) for p in fig.axes[0].patches]  # a's slices, then b's
        [1.0, 0.0, 0.0, 3.0]
    """
    import matplotlib.pyplot as plt

    if weights.dim() != 1 or value.dim() != 2 or weights.shape[0] != value.shape[0]:
        raise ValueError(f"plot_mix needs one query's weights (S,) and the values (S, Ev), but got "
                         f"weights.shape={tuple(weights.shape)} and value.shape={tuple(value.shape)}; "
                         f"pick one row, e.g. weights[2].")
    if len(tokens) != value.shape[0] or len(features) != value.shape[1]:
        raise ValueError(f"plot_mix needs {value.shape[0]} tokens and {value.shape[1]} features, but got "
                         f"{len(tokens)} tokens and {len(features)} features.")
    slices = (weights[:, None] * value).detach().to("cpu", torch.float64)  # (S, 1) * (S, Ev) -> (S, Ev)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.8 + 0.9 * len(features), 3.2))
    positions = list(range(len(features)))
    bottom_pos = torch.zeros(len(features), dtype=torch.float64)
    bottom_neg = torch.zeros(len(features), dtype=torch.float64)
    for token, row in zip(tokens, slices, strict=True):
        bottom = torch.where(row >= 0, bottom_pos, bottom_neg)
        k = len(ax.containers)
        ax.bar(positions, row.numpy(), bottom=bottom.numpy(), label=str(token), edgecolor="white",
               color=OKABE_ITO[k % len(OKABE_ITO)], hatch=HATCHES[k % len(HATCHES)])
        bottom_pos += row.clamp(min=0)
        bottom_neg += row.clamp(max=0)
    total = slices.sum(dim=0)  # (Ev,): the output vector itself
    ax.hlines(total.numpy(), [p - 0.4 for p in positions], [p + 0.4 for p in positions], colors="black",
              linewidth=2, zorder=3, label="output")
    ax.axhline(0.0, color=GREY, linewidth=0.8)
    low, high = float(bottom_neg.min()), float(bottom_pos.max())
    pad = 0.1 * max(high - low, 1e-6)
    ax.set_ylim(low - pad if low < 0 else 0.0, high + pad)  # room above the tallest stack for its output line
    ax.set_xticks(positions, labels=[str(f) for f in features])
    ax.set_ylabel("contribution to the output")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    biggest = int(slices.abs().max(dim=1).values.argmax())  # the word that contributes most
    named = f" '{title}'" if title else ""
    output = ", ".join(f"{f} {number(v)}" for f, v in zip(features, total, strict=True))
    set_alt(ax, f"Stacked bars{named}: one query's output, feature by feature, as the sum of each word's weight "
                f"times its value; output = {output}; "
                f"the largest share comes from '{tokens[biggest]}' (weight {number(weights[biggest])}).")
    return finish(ax.figure)
