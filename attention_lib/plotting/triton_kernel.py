"""Which tiles of scores each program of the Triton kernel owns, for ``notebooks/14_triton_kernel.ipynb``."""

from __future__ import annotations

from ..memory_efficient.triton_launch import tile_ends
from .alt import set_alt, with_alt
from .style import GREY, HATCHES, OKABE_ITO, finish


def program_tiles(L: int, S: int, block_l: int, block_s: int, is_causal: bool = False) -> list[list[int]]:
    """For each program (block of queries), the starts of the tiles of keys its loops visit, in order.

    The rule of :func:`attention_lib.memory_efficient.triton_kernel.attention_forward_kernel`: every tile of keys,
    or with ``is_causal`` only those up to the program's last query.

    Example:
        >>> program_tiles(40, 40, 16, 16, is_causal=True)
        [[0], [0, 16], [0, 16, 32]]
    """
    return [list(range(0, key_end, block_s)) for _, key_end in tile_ends(L, S, block_l, block_s, is_causal)]


def masked_tiles(L: int, S: int, block_l: int, block_s: int, is_causal: bool = False) -> list[list[int]]:
    """For each program, the starts of the tiles it folds with a mask: the ragged last tile (keys past ``S``) and,
    with ``is_causal``, the tiles on the diagonal (a key after some query of the block). The others it visits
    need no mask.

    Example:
        >>> masked_tiles(100, 100, 32, 32, is_causal=True)  # one per program: its diagonal tile
        [[0], [32], [64], [96]]
    """
    return [list(range(full_end, key_end, block_s)) for full_end, key_end in tile_ends(L, S, block_l, block_s,
                                                                                         is_causal)]


@with_alt
def plot_programs(L: int, S: int, block_l: int, block_s: int, *, is_causal: bool = False, title: str = ""):
    """Draw the ``(L, S)`` scores of one head cut into tiles: each program's row of tiles, its loop's order, the
    tiles folded with a mask (black outline: ragged edges, dashed at the last query and key, and with ``is_causal``
    the diagonal), the others without one, and with ``is_causal`` the skipped tiles.

    Built for ``notebooks/14_triton_kernel.ipynb``. Program ``p`` owns queries ``p * block_l`` to
    ``(p + 1) * block_l - 1``; the number in a tile is the step of its loop at which it is computed.

    Returns:
        The ``matplotlib.figure.Figure``.

    Example:
        >>> fig = plot_programs(100, 77, 32, 32, is_causal=True)
        >>> fig.axes[0].get_xlabel()
        'keys (position)'
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    programs = program_tiles(L, S, block_l, block_s, is_causal)
    masked = masked_tiles(L, S, block_l, block_s, is_causal)
    width_l, width_s = len(programs) * block_l, -(-S // block_s) * block_s  # the tiles cover past L and S
    fig, ax = plt.subplots(figsize=(6.4, 2.6 + 4.2 * width_l / max(width_l, width_s)))
    handles = []
    for p, starts in enumerate(programs):
        color, hatch = OKABE_ITO[p % len(OKABE_ITO)], HATCHES[p % len(HATCHES)]
        for start_s in range(0, width_s, block_s):
            y = p * block_l
            if start_s in starts:
                edge = start_s in masked[p]
                ax.add_patch(Rectangle((start_s, y), block_s, block_l, facecolor=color, hatch=hatch, alpha=0.85,
                                       edgecolor="white", linewidth=2))
                if edge:  # a black outline just inside the white gap
                    ax.add_patch(Rectangle((start_s + 1.5, y + 1.5), block_s - 3, block_l - 3, fill=False,
                                           edgecolor="black", linewidth=2.2))
                ax.text(start_s + block_s / 2, y + block_l / 2, f"step {starts.index(start_s) + 1}"
                        + ("\nmasked" if edge else ""), ha="center", va="center", fontsize=8, color="black",
                        bbox={"facecolor": "white", "alpha": 0.8, "pad": 1, "edgecolor": "none"})
            else:
                ax.add_patch(Rectangle((start_s, y), block_s, block_l, facecolor="#E8E8E8", edgecolor="white",
                                       linewidth=2))
                ax.text(start_s + block_s / 2, y + block_l / 2, "skipped", ha="center", va="center", fontsize=8,
                        color="black")
        handles.append(Patch(facecolor=color, hatch=hatch, edgecolor=GREY,
                             label=f"program {p}: queries {p * block_l}-{min((p + 1) * block_l, L) - 1}"))
    ax.axhline(L, color="black", linestyle="--", linewidth=1.2)
    ax.axvline(S, color="black", linestyle="--", linewidth=1.2)
    handles.append(Patch(facecolor="white", edgecolor="black", linewidth=2.2,
                         label="masked" + (": the diagonal, or past the last key" if is_causal else
                                           ": past the last key")))
    if is_causal:
        ax.plot([0, min(L, S)], [0, min(L, S)], color="black", linestyle=":", linewidth=1.2)
        handles.append(Patch(facecolor="#E8E8E8", edgecolor=GREY, label="skipped: every key in the future"))
    ax.set_xlim(0, width_s)
    ax.set_ylim(width_l, 0)
    ax.set_xticks(range(0, width_s + 1, block_s))
    ax.set_yticks(range(0, width_l + 1, block_l))
    ax.set_xlabel("keys (position)")
    ax.set_ylabel("queries (position)")
    ax.set_aspect("equal")
    computed = sum(len(starts) for starts in programs)
    with_mask = sum(len(starts) for starts in masked)
    total = len(programs) * (width_s // block_s)
    set_alt(ax, f"Diagram of the {L} x {S} scores of one head cut into tiles of {block_l} x {block_s}: "
                f"{len(programs)} programs, one per row of tiles, each owning a block of queries and visiting its "
                f"key tiles in order; {computed} of {total} tiles are computed, {with_mask} of them with a mask ("
                + ("the diagonal tiles, where some key comes after some query, and the tiles past the last key"
                   if is_causal else "the tiles that run past the last key")
                + f") and {computed - with_mask} without one"
                + ("; the others are skipped because every key in them is in the future" if is_causal else "")
                + "; positions past the last query are computed and never stored.")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, ncol=2)
    ax.set_title(title or f"{len(programs)} programs per head, L = {L}, S = {S}, blocks of {block_l} x {block_s}"
                 f"{', causal' if is_causal else ''}\n(dashed: the last query and key; outlined: tiles with a mask)",
                 fontsize=10)
    return finish(fig)
