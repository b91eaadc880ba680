"""The tiles of memory-efficient attention: which blocks of scores a causal mask computes, masks or skips.

Built for ``notebooks/10_memory_efficient.ipynb`` (the online softmax itself is drawn by
:mod:`attention_lib.plotting.memory_efficient.online_softmax`).
"""

from __future__ import annotations

import torch

from ..alt import set_alt, with_alt
from ..style import GREY, HATCHES, PROGRESS_COLORS, finish

#: What happens to a tile of scores under a causal mask, in the order of the colours.
TILE_KINDS: tuple[str, ...] = ("computed", "computed, then masked (diagonal)", "skipped (all in the future)")


def causal_tile_kinds(n: int, block_size: int) -> torch.Tensor:
    """For a causal self-attention of length ``n`` in blocks: ``(T, T)`` codes 0, 1, 2 from :data:`TILE_KINDS`.

    The same rule as the blocks of :func:`attention_lib.memory_efficient_attention`: a tile whose keys all come
    after its queries is skipped; a tile with some key after some query is computed and then masked.

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


@with_alt
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
    colors = PROGRESS_COLORS
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
    counts = [int((kinds == k).sum()) for k in range(3)]
    set_alt(ax, f"A grid of {T} x {T} tiles of scores, {n:,} queries down and {n:,} keys across in blocks of "
                f"{block_size}: the {counts[1]} tiles on the diagonal are computed, then masked; the {counts[0]} "
                f"below it are computed; the {counts[2]} above it are skipped, all their keys in the future. "
                f"{counts[0] + counts[1]} of {T * T} tiles are computed.")
    return finish(fig)
