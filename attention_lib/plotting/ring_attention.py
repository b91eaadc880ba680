"""Lesson 16's pictures: which rank computes each score of causal attention, and the work per rank.

Built for ``notebooks/16_ring_attention.ipynb``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ..ring_attention import block_to_compute, chunk_positions, ring_block_mask, useful_scores
from .alt import set_alt, with_alt
from .style import GREY, OKABE_ITO, category_style, finish, plain_log_ticks


def score_owners(n: int, world: int, layout: str) -> torch.Tensor:
    """``(n, n)``: the rank that computes each score of causal attention (query row, key column), ``-1`` where
    the key is in the query's future (no one computes it).

    Example:
        >>> score_owners(4, 2, "contiguous")
        tensor([[ 0, -1, -1, -1],
                [ 0,  0, -1, -1],
                [ 1,  1,  1, -1],
                [ 1,  1,  1,  1]])
    """
    owners = torch.full((n, n), -1)
    for rank in range(world):
        owners[chunk_positions(n, world, rank, layout)] = rank  # a rank computes every score of its queries ...
    return owners.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -1)  # ... that are not in the future


@with_alt
def plot_score_owners(n: int, world: int, layouts: Sequence[str] = ("contiguous", "zigzag"), *, title: str = ""):
    """The causal score table of length ``n``, each score coloured by the rank that computes it, one panel
    per layout; each panel's legend gives every rank's count of useful scores.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_score_owners(16, 2)
        >>> [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
        ['rank 0: 68', 'rank 1: 68']
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, len(layouts), figsize=(4.2 * len(layouts), 4.4))
    axes = list(axes) if len(layouts) > 1 else [axes]
    colours = ListedColormap(["white", *OKABE_ITO[:world]])
    described = []
    for ax, layout in zip(axes, layouts, strict=True):
        owners = score_owners(n, world, layout)
        ax.imshow((owners + 1).numpy(), cmap=colours, vmin=0, vmax=world, interpolation="nearest")
        counts = useful_scores(n, world, layout)
        for rank in range(world):  # a marker on each rank's first query row, so the panel reads without colour
            rows = chunk_positions(n, world, rank, layout)
            ax.plot([-1.5] * len(rows), rows.tolist(), linestyle="none", clip_on=False,
                    **{k: v for k, v in category_style(rank).items() if k != "linestyle"}, markersize=4)
        handles = [Line2D([], [], linestyle="none", markersize=7, label=f"rank {r}: {counts[r]}",
                          **{k: v for k, v in category_style(r).items() if k != "linestyle"}) for r in range(world)]
        ax.legend(handles=handles, loc="upper right", fontsize=8, title="useful scores", title_fontsize=8)
        ax.set_xlim(-2, n - 0.5)
        ax.set_title(f"{layout}: rank r holds {'chunk r' if layout == 'contiguous' else 'chunks r and 2P-1-r'}",
                     fontsize=10)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.grid(False)
        described.append(f"{layout}: " + ", ".join(f"rank {r} {c} useful" for r, c in enumerate(counts)))
    axes[0].figure.suptitle(title or f"causal attention, n = {n}, {world} ranks: who computes each useful score",
                            fontsize=11)
    set_alt(fig, f"Two lower-triangular score tables of {n} positions coloured by the rank that holds each useful "
                 f"score. " + "; ".join(described) + ".")
    return finish(fig)


@with_alt
def plot_bytes_per_rank(worlds: Sequence[int], held: Mapping[str, Sequence[int]], *, title: str = ""):
    """What one rank holds (MiB) as the world grows, one curve per kind of tensor, on log axes.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_bytes_per_rank([1, 2], {"Q, K, V": [2**20, 2**19]})
        >>> fig.axes[0].get_lines()[0].get_ydata().tolist()
        [1.0, 0.5]
        >>> import math  # a ring of one receives nothing: no point on the log axis
        >>> math.isnan(plot_bytes_per_rank([1, 2], {"K/V arriving": [0, 2**20]}).axes[0].get_lines()[0].get_ydata()[0])
        True
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.8, 3.6))
    for i, (name, values) in enumerate(held.items()):
        # nothing held (0 bytes, e.g. no K/V arriving on a ring of one) has no place on a log axis: left out
        ax.plot(list(worlds), [v / 2**20 if v else float("nan") for v in values], label=name, **category_style(i))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_log_ticks(ax, "y")
    ax.set_xticks(list(worlds), labels=[str(w) for w in worlds])
    ax.set_xlabel("processes in the ring (world)")
    ax.set_ylabel("MiB held by one rank")
    ax.grid(True, color=GREY, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "what one rank holds as the ring grows", fontsize=10)
    first, last = list(held.items())[0], list(held.items())[-1]
    set_alt(fig, f"MiB held by one rank against world {list(worlds)}: {first[0]} falls from {first[1][0] / 2**20:.1f} "
                 f"to {first[1][-1] / 2**20:.1f}; {last[0]} from {last[1][0] / 2**20:.1f} to "
                 f"{last[1][-1] / 2**20:.1f}.")
    return finish(fig)


def computed_owners(n: int, world: int, layout: str = "zigzag") -> tuple[torch.Tensor, torch.Tensor]:
    """``(owners, masked)``, both ``(n, n)``: the rank whose causal ring computes each score (``-1``: no rank),
    and whether that computed score is masked (computed only because it lies in the rectangle computed).

    Example:
        >>> owners, masked = computed_owners(4, 2, "contiguous")
        >>> owners
        tensor([[ 0,  0, -1, -1],
                [ 0,  0, -1, -1],
                [ 1,  1,  1,  1],
                [ 1,  1,  1,  1]])
        >>> masked.int().sum().item()
        2
    """
    owners, masked = torch.full((n, n), -1), torch.zeros(n, n, dtype=torch.bool)
    mine = [chunk_positions(n, world, rank, layout) for rank in range(world)]
    for rank in range(world):
        for hop in range(world):
            there = mine[(rank - hop) % world]
            part = block_to_compute(ring_block_mask(mine[rank], there))
            if part is None:
                continue
            rows, cols, mask = part
            q, k = mine[rank][rows], there[cols]
            owners[q[:, None], k[None, :]] = rank
            if mask is not None:
                masked[q[:, None], k[None, :]] = ~mask
    return owners, masked


@with_alt
def plot_computed_blocks(n: int, world: int, layout: str = "zigzag", *, title: str = ""):
    """The causal score table of length ``n``: each score the ring computes, coloured and numbered by its rank;
    ``×`` where a computed score is masked (it lies in a rectangle computed whole); blank where no rank computes.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_computed_blocks(8, 2)
        >>> len([t for t in fig.axes[0].texts if t.get_text() == "×"])
        12
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D

    owners, masked = computed_owners(n, world, layout)
    fig, ax = plt.subplots(figsize=(7.2, 5.0))
    ax.imshow((owners + 1).numpy(), cmap=ListedColormap(["white", *OKABE_ITO[:world]]), vmin=0, vmax=world,
              interpolation="nearest")
    for i in range(n):
        for j in range(n):
            if owners[i, j] >= 0:
                ax.text(j, i, "×" if masked[i, j] else str(int(owners[i, j])), ha="center", va="center",
                        fontsize=6 if n > 12 else 8, color="black")
    computed = [int((owners == r).sum()) for r in range(world)]
    useful = [int(((owners == r) & ~masked).sum()) for r in range(world)]
    handles = [Line2D([], [], linestyle="none", markersize=7, label=f"rank {r}: {computed[r]} computed",
                      **{k: v for k, v in category_style(r).items() if k != "linestyle"}) for r in range(world)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, title="× computed, masked",
              title_fontsize=8)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.tick_params(labelsize=6)
    ax.grid(False)
    ax.set_title(title or f"{layout} ring, n = {n}, {world} ranks: the scores each rank computes", fontsize=10)
    set_alt(fig, f"The causal score table of {n} positions, each computed score numbered by the rank that computes "
                 f"it in the {layout} layout; " + ", ".join(f"rank {r} computes {c} scores, {u} of them useful"
                                                           for r, (c, u) in enumerate(zip(computed, useful,
                                                                                          strict=True))) + ".")
    return finish(fig)


@with_alt
def plot_ring_hops(world: int, *, title: str = ""):
    """Which rank's key/value chunk each rank holds at each hop of a ring of ``world``: a grid of ranks (rows) by
    hops (columns), each cell numbered and coloured by the chunk held.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_ring_hops(3)
        >>> [t.get_text() for t in fig.axes[0].texts][:3]
        ['0', '2', '1']
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    held = torch.tensor([[(rank - hop) % world for hop in range(world)] for rank in range(world)])
    fig, ax = plt.subplots(figsize=(1.1 * world + 1.6, 0.7 * world + 1.0))
    ax.imshow(held.numpy(), cmap=ListedColormap(OKABE_ITO[:world]), vmin=-0.5, vmax=world - 0.5)
    for rank in range(world):
        for hop in range(world):
            ax.text(hop, rank, str(int(held[rank, hop])), ha="center", va="center", fontsize=11, color="black")
    ax.set_xticks(range(world), labels=[f"hop {h}" for h in range(world)])
    ax.set_yticks(range(world), labels=[f"rank {r}" for r in range(world)])
    ax.grid(False)
    ax.set_title(title or "whose keys and values each rank holds", fontsize=10)
    set_alt(fig, f"A grid of {world} ranks by {world} hops; each cell is the chunk the rank holds at that hop. "
                 + "; ".join(f"rank {r}: " + ", ".join(str(int(c)) for c in held[r]) for r in range(world)) + ".")
    return finish(fig)
