"""Pictures of memory-efficient attention: the online softmax block by block, and the tiles a causal mask skips.

Built for ``notebooks/10_memory_efficient.ipynb``. :func:`online_softmax_steps` records the running numbers of
one query as its keys arrive a block at a time; :func:`plot_online_softmax_steps` draws how they evolve and
:func:`plot_causal_tiles` which tiles of scores a causal mask computes, masks or skips.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..memory import online_softmax_update
from .style import GREY, HATCHES, OKABE_ITO, category_style


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
    :func:`attention_lib.memory.online_softmax_update`; the record adds what the update does inside it (the
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
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, but block_size={block_size!r}.")
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


def plot_online_softmax_steps(steps: list[OnlineSoftmaxStep], *, title: str = ""):
    """Draw how the running max, the correction, the running sum and the output estimate evolve, block by block.

    Built for ``notebooks/10_memory_efficient.ipynb``. Three panels share the x axis (after block 1, 2, ...):
    the running max with each block's own max; the correction factor and the running sum; the running
    estimate ``running_output / running_sum`` of every output feature, which reaches the exact output (dotted
    lines, from the full softmax) after the last block.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_online_softmax_steps(online_softmax_steps(torch.arange(4.0), torch.eye(4), 2))
        >>> len(fig.axes)
        3
    """
    import matplotlib.pyplot as plt

    x = list(range(1, len(steps) + 1))
    labels = [f"{s.first}-{s.last}" if s.last > s.first else f"{s.first}" for s in steps]
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.6))
    ax = axes[0]
    ax.plot(x, [s.running_max for s in steps], label="running max m", **category_style(0))
    ax.plot(x, [s.block_max for s in steps], label="this block's max", color=OKABE_ITO[1], marker="s",
            linestyle="none", markersize=8)
    ax.set_title("the maximum only grows")
    ax = axes[1]
    ax.plot(x, [s.correction for s in steps], label="correction exp(old m - new m)", **category_style(3))
    ax.plot(x, [s.running_sum for s in steps], label="running sum l", **category_style(2))
    ax.set_title("old numbers shrink when m grows")
    ax = axes[2]
    final = steps[-1].estimate
    for i in range(final.shape[0]):
        style = category_style(i)
        ax.plot(x, [float(s.estimate[i]) for s in steps], label=f"output[{i}] = o / l", **style)
        ax.axhline(float(final[i]), color=style["color"], linestyle=":", linewidth=1)
    ax.set_title("o / l reaches the output (dotted)")
    for ax in axes:
        ax.set_xticks(x, labels=labels)
        ax.set_xlabel("after the block of keys")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return _finish(fig)


#: What happens to a tile of scores under a causal mask, in the order of the colours.
TILE_KINDS: tuple[str, ...] = ("computed", "computed, then masked (diagonal)", "skipped (all in the future)")


def causal_tile_kinds(n: int, block_size: int) -> torch.Tensor:
    """For a causal self-attention of length ``n`` in blocks: ``(T, T)`` codes 0, 1, 2 from :data:`TILE_KINDS`.

    The same rule as :func:`attention_lib.memory.key_blocks`: a tile whose keys all come after its queries is
    skipped; a tile with some key after some query is computed and then masked.

    Example:
        >>> causal_tile_kinds(6, 2)
        tensor([[1, 2, 2],
                [0, 1, 2],
                [0, 0, 1]])
    """
    starts = range(0, n, block_size)
    rows = []
    for q0 in starts:
        q1 = min(q0 + block_size, n)
        rows.append([2 if k0 >= q1 else 1 if min(k0 + block_size, n) - 1 > q0 else 0 for k0 in starts])
    return torch.tensor(rows)


def plot_causal_tiles(n: int, block_size: int, *, title: str = ""):
    """Draw the tiles of a causal attention of length ``n``: computed, masked on the diagonal, or skipped.

    Built for ``notebooks/10_memory_efficient.ipynb``. Three colours with hatches and a legend, and the kind
    written in every tile, so the picture reads without colour too.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_causal_tiles(1000, 256)
        >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()][2]
        'skipped (all in the future)'
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    kinds = causal_tile_kinds(n, block_size)
    T = kinds.shape[0]
    colors = (OKABE_ITO[0], OKABE_ITO[1], "#E8E8E8")
    short = ("computed", "masked", "skipped")
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 + 1.0 * T), 2.2 + 0.9 * T))
    for i in range(T):
        for j in range(T):
            kind = int(kinds[i, j])
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=colors[kind], hatch=HATCHES[kind], edgecolor="white",
                                   linewidth=2))
            ax.text(j + 0.5, i + 0.5, short[kind], ha="center", va="center", fontsize=8,
                    color="white" if kind == 0 else "black")
    labels = [f"{s}-{min(s + block_size, n) - 1}" for s in range(0, n, block_size)]
    ax.set_xlim(0, T)
    ax.set_ylim(T, 0)
    ax.set_xticks([j + 0.5 for j in range(T)], labels=labels, rotation=30)
    ax.set_yticks([i + 0.5 for i in range(T)], labels=labels)
    ax.set_xlabel("keys (block)")
    ax.set_ylabel("queries (block)")
    ax.set_aspect("equal")
    handles = [Patch(facecolor=c, hatch=h, edgecolor=GREY, label=k) for c, h, k in zip(colors, HATCHES, TILE_KINDS,
                                                                                       strict=False)]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, ncol=1)
    ax.set_title(title or f"causal, n = {n:,}, blocks of {block_size}:\n{int((kinds < 2).sum())} of {T * T} "
                          f"tiles computed", fontsize=10)
    return _finish(fig)


def _finish(fig):
    """An opaque white background (readable in a dark notebook theme) and a tight layout."""
    fig.patch.set_facecolor("white")
    fig.tight_layout()
    return fig
