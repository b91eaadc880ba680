"""The tiles of a FlexAttention block mask, drawn as lesson 10 draws its causal tiles: full, partial or skipped.

Built for ``notebooks/20_flex_attention.ipynb``; the tiles come from
:func:`attention_lib.flex.tiles_of_block_mask` (or :func:`~attention_lib.flex.tiles_of_mask`).
"""

from __future__ import annotations

import torch

from ..flex.blocks import TILE_KINDS
from .alt import set_alt, with_alt
from .style import GREY, HATCHES, PROGRESS_COLORS, finish


@with_alt
def plot_block_tiles(tiles: torch.Tensor, block_size: int, *, L: int, S: int | None = None, title: str = ""):
    """Draw the tiles of a block mask: full (computed, no mask), partial (computed, then masked), skipped.

    Built for ``notebooks/20_flex_attention.ipynb``. Lesson 10's colours and hatches, the kind written in every tile
    and a legend, so the picture reads without colour; the title counts the tiles skipped.

    Args:
        tiles: ``(rows, columns)`` codes 0, 1, 2 (:data:`~attention_lib.flex.TILE_KINDS`).
        block_size: the side of a tile; L, S: the numbers of queries and keys (``S`` defaults to ``L``).
        title: the title's first line (the count is added below it).

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> from attention_lib.flex import tiles_of_mask
        >>> fig = plot_block_tiles(tiles_of_mask(torch.ones(8, 8, dtype=torch.bool).tril(), 2), 2, L=8)
        >>> fig.axes[0].get_title().splitlines()[-1]
        '6 of 16 tiles skipped (37.5 %)'
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    S = L if S is None else S
    rows, columns = tiles.shape
    short = ("full", "partial", "skipped")
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 + 0.55 * columns), 2.4 + 0.5 * rows))
    for i in range(rows):
        for j in range(columns):
            kind = int(tiles[i, j])
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=PROGRESS_COLORS[kind], hatch=HATCHES[kind],
                                   edgecolor="white", linewidth=2))
            ax.text(j + 0.5, i + 0.5, short[kind][0].upper(), ha="center", va="center", fontsize=8,
                    color="white" if kind == 0 else "black")

    def labels(n: int, count: int) -> list[str]:
        return [f"{s}-{min(s + block_size, n) - 1}" for s in range(0, count * block_size, block_size)]

    ax.set_xlim(0, columns)
    ax.set_ylim(rows, 0)
    ax.set_xticks([j + 0.5 for j in range(columns)], labels=labels(S, columns), rotation=90, fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(rows)], labels=labels(L, rows), fontsize=7)
    ax.set_xlabel("keys (block)")
    ax.set_ylabel("queries (block)")
    ax.set_aspect("equal")
    handles = [Patch(facecolor=c, hatch=h, edgecolor=GREY, label=f"{s[0].upper()} = {k}")
               for c, h, s, k in zip(PROGRESS_COLORS, HATCHES, short, TILE_KINDS, strict=False)]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=8, ncol=1)
    counts = [int((tiles == k).sum()) for k in range(3)]
    total = rows * columns
    ax.set_title(f"{title}\n{counts[2]} of {total} tiles skipped ({100 * counts[2] / total:.1f} %)".lstrip("\n"),
                 fontsize=10)
    set_alt(ax, f"A grid of {rows} x {columns} tiles of scores, {L:,} queries down and {S:,} keys across in blocks "
                f"of {block_size}: {counts[0]} full (computed without a mask), {counts[1]} partial (computed, then "
                f"masked), {counts[2]} skipped (every score blocked, never computed).")
    return finish(fig)
