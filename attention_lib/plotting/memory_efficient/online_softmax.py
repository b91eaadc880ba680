"""The online softmax, pictured: one query's running numbers as its keys arrive a block at a time.

Built for ``notebooks/10_memory_efficient.ipynb``. :func:`online_softmax_steps` records the running numbers;
:func:`plot_online_softmax_steps` draws how they evolve over all the blocks, and
:func:`plot_online_softmax_block` draws one step with its arithmetic written out (the explorer's picture).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...memory_efficient.forward import online_softmax_update
from ...validation import check_int
from ..alt import number, set_alt, with_alt
from ..style import GREY, HATCHES, OKABE_ITO, PROGRESS_COLORS, category_style, finish


def _vector(x: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(v):.3f}" for v in x) + "]"


@dataclass(frozen=True)
class OnlineSoftmaxStep:
    """The running numbers of one query after one block of keys (``first..last``, both included)."""

    first: int
    last: int
    block_max: float
    old_max: float
    running_max: float
    correction: float
    old_sum: float
    block_sum: float
    running_sum: float
    old_output: torch.Tensor
    block_output: torch.Tensor
    running_output: torch.Tensor

    @property
    def estimate(self) -> torch.Tensor:
        """The output over the keys seen so far, ``running_output / running_sum``: ``(Ev,)``."""
        return self.running_output / self.running_sum if self.running_sum > 0 else torch.zeros_like(
            self.running_output)


def online_softmax_steps(scores: torch.Tensor, value: torch.Tensor, block_size: int) -> list[OnlineSoftmaxStep]:
    """Fold one query's keys into the online softmax ``block_size`` at a time, recording every step.

    Built step by step in ``notebooks/10_memory_efficient.ipynb``. Each step is computed by
    :func:`attention_lib.online_softmax_update`; the record adds what the update does inside it (the
    block's max, the correction ``exp(old max - new max)``, the block's own sum and blend).

    Args:
        scores: ``(S,)``, the scaled scores of one query.
        value: ``(S, Ev)``, the values of the keys.
        block_size: keys per block (a positive int).

    Returns:
        One :class:`OnlineSoftmaxStep` per block, in order. After the last, ``estimate`` is the attention
        output ``softmax(scores) @ value``.

    Raises:
        ValueError: if the shapes do not fit or ``block_size < 1``.

    Example:
        >>> steps = online_softmax_steps(torch.tensor([0.0, 2.0, 1.0]), torch.eye(3), block_size=2)
        >>> [(s.first, s.last, s.running_max) for s in steps]
        [(0, 1, 2.0), (2, 2, 2.0)]
        >>> torch.allclose(steps[-1].estimate.float(), torch.softmax(torch.tensor([0.0, 2.0, 1.0]), -1))
        True
    """
    if scores.dim() != 1 or value.dim() != 2 or value.shape[0] != scores.shape[0]:
        raise ValueError(f"expected the scores of one query (S,) and values (S, Ev), but got scores.shape="
                         f"{tuple(scores.shape)} and value.shape={tuple(value.shape)}; pick one row, e.g. scores[3].")
    block_size = check_int(block_size, "block_size", minimum=1)
    scores, value = scores.detach().double().cpu(), value.detach().double().cpu()
    state = (torch.full((1, 1), -math.inf, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64),
             torch.zeros(1, value.shape[1], dtype=torch.float64))  # (1, 1), (1, 1), (1, Ev): one query
    steps = []
    for first in range(0, scores.shape[0], block_size):
        block = slice(first, min(first + block_size, scores.shape[0]))
        new = online_softmax_update(*state, scores[None, block], value[block])
        shift = new[0] if bool(torch.isfinite(new[0])) else torch.zeros(1, 1, dtype=torch.float64)
        weights = torch.exp(scores[None, block] - shift)  # (1, B): this block's un-normalised weights
        steps.append(OnlineSoftmaxStep(
            first=first, last=block.stop - 1, block_max=float(scores[block].max()), old_max=float(state[0]),
            running_max=float(new[0]), correction=float(torch.exp(state[0] - shift)), old_sum=float(state[1]),
            block_sum=float(weights.sum()), running_sum=float(new[1]), old_output=state[2][0],
            block_output=(weights @ value[block])[0], running_output=new[2][0]))  # (1, B) @ (B, Ev) -> (1, Ev)
        state = new
    return steps


@with_alt
def plot_online_softmax_steps(steps: list[OnlineSoftmaxStep], *, title: str = ""):
    """Draw how the running max, the correction, the running sum and the output estimate evolve, block by block.

    Built for ``notebooks/10_memory_efficient.ipynb``. Four panels share the x axis (after block 1, 2, ...), each
    with its own labelled y axis: the running max with each block's own max; the correction factor
    ``exp(old m - new m)`` (between 0 and 1); the running sum; the running estimate ``running_output /
    running_sum`` of every output feature, which reaches the exact output (dotted lines, from the full softmax)
    after the last block.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_online_softmax_steps(online_softmax_steps(torch.arange(4.0), torch.eye(4), 2))
        >>> [ax.get_ylabel() for ax in fig.axes]
        ['score', 'correction exp(old m - new m)', 'running sum l', 'output so far o / l']
    """
    import matplotlib.pyplot as plt

    x = list(range(1, len(steps) + 1))
    labels = [f"{s.first}-{s.last}" if s.last > s.first else f"{s.first}" for s in steps]
    fig, grid = plt.subplots(2, 2, figsize=(11, 6.6))
    axes = list(grid.flat)
    ax = axes[0]
    ax.plot(x, [s.running_max for s in steps], label="running max m", **category_style(0))
    ax.plot(x, [s.block_max for s in steps], label="this block's max", color=OKABE_ITO[1], marker="s",
            linestyle="none", markersize=8)
    ax.set_ylabel("score")
    ax.set_title("the maximum only grows")
    ax = axes[1]
    ax.plot(x, [s.correction for s in steps], label="correction", **category_style(3))
    ax.axhline(1.0, color=GREY, linestyle="--", linewidth=1, label="1: m did not move")
    ax.set_ylim(-0.05, 1.1)
    ax.set_ylabel("correction exp(old m - new m)")
    ax.set_title("below 1 whenever m grows")
    ax = axes[2]
    ax.plot(x, [s.running_sum for s in steps], label="running sum l", **category_style(2))
    ax.set_ylabel("running sum l")
    ax.set_title("the old sum shrinks by the correction, the block adds")
    ax = axes[3]
    final = steps[-1].estimate
    for i in range(final.shape[0]):
        style = category_style(i)
        ax.plot(x, [float(s.estimate[i]) for s in steps], label=f"output[{i}]", **style)
        ax.axhline(float(final[i]), color=style["color"], linestyle=":", linewidth=1)
    ax.set_ylabel("output so far o / l")
    ax.set_title("o / l reaches the exact output (dotted)")
    for ax in axes:
        ax.set_xticks(x, labels=labels)
        ax.set_xlabel("after the block of keys")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return set_alt(finish(fig), _steps_alt(steps, labels, title))


def _series(values) -> str:
    return ", ".join(number(v) for v in values)


def _steps_alt(steps: list[OnlineSoftmaxStep], labels: list[str], title: str) -> str:
    """The text alternative of :func:`plot_online_softmax_steps`: every panel's numbers, block by block."""
    final = steps[-1].estimate
    corrections = [("0 (nothing to correct yet)" if b == 0 else number(s.correction)
                    + (" (m did not move)" if s.correction == 1 and b > 0 else ""))
                   for b, s in enumerate(steps)]
    outputs = "; ".join(f"output[{i}] {_series(float(s.estimate[i]) for s in steps)} (exact {number(float(final[i]))})"
                        for i in range(final.shape[0]))
    return (f"{title + '. ' if title else ''}4 panels, after each of {len(steps)} blocks of keys "
            f"({', '.join(labels)}). (1) The running max m: {_series(s.running_max for s in steps)}; each block's own "
            f"max: {_series(s.block_max for s in steps)}. (2) The correction exp(old m - new m): "
            f"{', '.join(corrections)}. (3) The running sum l: {_series(s.running_sum for s in steps)}. (4) The output "
            f"so far o / l, which lands on the exact output after the last block: {outputs}.")


@with_alt
def plot_online_softmax_block(scores: torch.Tensor, value: torch.Tensor, block: int, block_size: int):
    """Draw the online softmax of one query after ``block`` blocks of ``block_size`` keys, with its numbers.

    Built for ``notebooks/10_memory_efficient.ipynb`` (its explorer draws it). Left: the scores, keys already
    folded in, the current block and the keys still to come told apart by colour and hatch, and the running max
    as a line. Right: this step written out: the block's max, the new running max, the correction
    ``exp(old m - new m)``, the new running sum and blend, and the output so far next to the exact one.

    Args:
        scores: ``(S,)``, one query's scores.
        value: ``(S, Ev)``, the values.
        block: which step to show, ``1..number of blocks``.
        block_size: keys per block.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``block`` is not between 1 and the number of blocks, or the shapes do not fit.

    Example:
        >>> fig = plot_online_softmax_block(torch.tensor([0.5, -1.0, 1.5, 0.2]), torch.eye(4), 2, 2)
        >>> "correction = exp(0.500 - 1.500) = 0.368" in fig.axes[1].texts[0].get_text()
        True
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    scores = torch.as_tensor(scores).detach().double().cpu()  # (S,): drawn on the CPU, whatever the device
    steps = online_softmax_steps(scores, torch.as_tensor(value), block_size)
    if not 1 <= block <= len(steps):
        raise ValueError(f"block must be between 1 and {len(steps)} (the number of blocks of {block_size} keys), "
                         f"but block={block}.")
    step = steps[block - 1]
    fig, (ax, text) = plt.subplots(1, 2, figsize=(10.5, 3.8), gridspec_kw={"width_ratios": [1.0, 1.1]})
    kinds = [0 if j < step.first else 1 if j <= step.last else 2 for j in range(scores.shape[0])]
    colors = PROGRESS_COLORS
    ax.bar(range(scores.shape[0]), scores.numpy(), color=[colors[k] for k in kinds], edgecolor=GREY)
    for patch, kind in zip(ax.patches, kinds, strict=True):
        patch.set_hatch(HATCHES[kind])
    ax.axhline(step.running_max, color=OKABE_ITO[5], linestyle="--", label=f"running max m = {step.running_max:.2f}")
    ax.axhline(0, color=GREY, linewidth=0.8)
    ax.set_xticks(range(scores.shape[0]), labels=[f"key {j}" for j in range(scores.shape[0])], rotation=30)
    ax.set_ylabel("score")
    ax.set_title(f"after block {block} of {len(steps)} (keys {step.first}-{step.last})")
    handles = [Patch(facecolor=c, hatch=h, edgecolor=GREY, label=label) for c, h, label in
               zip(colors, HATCHES, ("folded in already", "this block", "still to come"), strict=False)]
    ax.legend(handles=[*handles, *ax.get_legend_handles_labels()[0]], fontsize=8, loc="upper left")
    old_max = "-inf" if step.old_max == float("-inf") else f"{step.old_max:.3f}"
    lines = [
        f"block max            = {step.block_max:.3f}",
        f"new running max m    = max({old_max}, {step.block_max:.3f}) = {step.running_max:.3f}",
        f"correction = exp({old_max} - {step.running_max:.3f}) = {step.correction:.3f}"
        + ("   (nothing to correct yet)" if block == 1 else "   (m did not move)" if step.correction == 1 else ""),
        f"block's sum of exp(s - m)       = {step.block_sum:.3f}",
        f"running sum l = {step.old_sum:.3f} x {step.correction:.3f} + {step.block_sum:.3f} = {step.running_sum:.3f}",
        f"blend o = {_vector(step.old_output)} x {step.correction:.3f}",
        f"          + {_vector(step.block_output)} = {_vector(step.running_output)}",
        f"output so far o / l = {_vector(step.estimate)}",
        f"exact output        = {_vector(steps[-1].estimate)}" + ("   (equal: all keys seen)"
                                                                  if block == len(steps) else ""),
    ]
    text.axis("off")
    text.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=9,
              transform=text.transAxes)
    return finish(fig)
