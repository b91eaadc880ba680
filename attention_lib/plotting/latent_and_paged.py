"""Pictures of lesson 17 (``notebooks/17_latent_and_paged.ipynb``): the cache bill of published models, and the
blocks of a pool with the sequences that hold them. matplotlib is imported inside each function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .alt import number, set_alt, with_alt
from .style import GREY, HATCHES, OKABE_ITO, finish

#: The colour of each kind of attention in the cache bill (Okabe-Ito), with a hatch each, readable without colour.
KINDS = ("MHA", "GQA", "MQA", "MLA")


@with_alt
def plot_cache_bill(models: Sequence[str], kinds: Sequence[str], numbers: Sequence[int], *, title: str = ""):
    """Draw the numbers a cache holds per token per layer, one horizontal bar per model, on a log axis.

    Built in ``notebooks/17_latent_and_paged.ipynb``. Each kind of attention (MHA, GQA, MQA, MLA) has its own
    colour and hatch, and each bar carries its number.

    Raises:
        ValueError: if the three lists differ in length or a kind is not one of :data:`KINDS`.

    Example:
        >>> fig = plot_cache_bill(["a", "b"], ["MHA", "MLA"], [40960, 576])
        >>> len(fig.axes[0].patches)
        2
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not len(models) == len(kinds) == len(numbers):
        raise ValueError(f"models, kinds and numbers need one entry per bar, but got {len(models)}, {len(kinds)} "
                         f"and {len(numbers)}.")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"kinds must be among {list(KINDS)}, but got {unknown}.")
    fig, ax = plt.subplots(figsize=(7.0, 0.9 + 0.38 * len(models)))
    rows = range(len(models))[::-1]  # the first model on top
    for row, kind, value in zip(rows, kinds, numbers, strict=True):
        i = KINDS.index(kind)
        ax.barh(row, value, color=OKABE_ITO[i], hatch=HATCHES[i], edgecolor="white")
        ax.text(value * 1.08, row, f"{value:,}", va="center", fontsize=9)
    ax.set_yticks(list(rows), [f"{m} ({k})" for m, k in zip(models, kinds, strict=True)])
    ax.set_xscale("log")
    ax.set_xlim(min(numbers) / 2, max(numbers) * 4)
    ax.set_xlabel("numbers cached per token per layer (log scale)")
    ax.set_title(title or "the cache bill: what one token costs in each layer")
    ax.legend(handles=[Patch(facecolor=OKABE_ITO[i], hatch=HATCHES[i], label=k) for i, k in enumerate(KINDS)
                       if k in kinds], loc="lower right", fontsize=8)
    big, small = max(range(len(numbers)), key=numbers.__getitem__), min(range(len(numbers)), key=numbers.__getitem__)
    set_alt(fig, f"Horizontal bar chart '{ax.get_title()}', {len(models)} models on a log axis: the largest is "
                 f"{models[big]} ({kinds[big]}) with {numbers[big]:,} numbers, the smallest {models[small]} "
                 f"({kinds[small]}) with {numbers[small]:,}, {number(numbers[big] / numbers[small])} times fewer.")
    return finish(fig)


@with_alt
def plot_pool(num_blocks: int, tables: Mapping[str, Sequence[int]], *, filled: Mapping[str, int] | None = None,
              block_size: int = 4, title: str = ""):
    """Draw a pool of blocks as a row of cells, each labelled with the sequences whose block tables hold it.

    Built in ``notebooks/17_latent_and_paged.ipynb``. A block held by one sequence takes that sequence's colour
    and hatch; a block held by several is drawn grey and marked "shared"; a free block is white. With ``filled``
    (``{name: positions}``), each sequence's last block shows how many of its ``block_size`` slots are used.

    Raises:
        ValueError: if a table names a block outside ``0 .. num_blocks - 1``.

    Example:
        >>> fig = plot_pool(6, {"a": [0, 1], "b": [0, 2]})
        >>> [t.get_text() for t in fig.axes[0].texts][:3]
        ['shared\\na[0]\\nb[0]', 'a[1]', 'b[1]']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    holders: dict[int, list[str]] = {}
    for name, table in tables.items():
        for j, block in enumerate(table):
            if not 0 <= block < num_blocks:
                raise ValueError(f"the table of {name!r} names block {block}, but the pool has blocks 0 .. "
                                 f"{num_blocks - 1}.")
            holders.setdefault(block, []).append(f"{name}[{j}]")
    names = list(tables)
    fig, ax = plt.subplots(figsize=(max(4.0, 2.0 + 0.9 * num_blocks), 2.2))
    for block in range(num_blocks):
        held = holders.get(block, [])
        owner = names.index(held[0].split("[")[0]) if len(held) == 1 else None
        color = "white" if not held else (GREY if owner is None else OKABE_ITO[owner % len(OKABE_ITO)])
        ax.add_patch(Rectangle((block, 0), 0.92, 1, facecolor=color, edgecolor=GREY,
                               hatch="" if owner is None else HATCHES[owner % len(HATCHES)]))
        label = "\n".join((["shared"] if len(held) > 1 else []) + held)
        ax.text(block + 0.46, 0.5, label, ha="center", va="center", fontsize=6.5,
                bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0} if held else None)
    for name, positions in (filled or {}).items():
        if tables[name]:
            last, used = tables[name][-1], positions - block_size * (len(tables[name]) - 1)
            ax.text(last + 0.46, -0.25, f"{name}: {used}/{block_size} used", ha="center", fontsize=7)
    ax.set_xlim(-0.1, num_blocks)
    ax.set_ylim(-0.45, 1.3)
    ax.set_xticks([b + 0.46 for b in range(num_blocks)], [str(b) for b in range(num_blocks)])
    ax.set_yticks([])
    ax.set_xlabel("block of the pool")
    ax.set_title(title or "the pool: which sequence holds each block (name[j]: block j of its table)")
    handles = [Patch(facecolor=OKABE_ITO[i % len(OKABE_ITO)], hatch=HATCHES[i % len(HATCHES)], label=n)
               for i, n in enumerate(names)]
    ax.legend(handles=handles + [Patch(facecolor=GREY, label="shared"), Patch(facecolor="white", edgecolor=GREY,
                                                                              label="free")],
              loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    shared = sum(len(h) > 1 for h in holders.values())
    set_alt(fig, f"A row of {num_blocks} blocks, '{ax.get_title()}': {len(holders)} in use, {shared} of them shared, "
                 f"{num_blocks - len(holders)} free; " + "; ".join(f"{n} holds blocks {list(t)}"
                                                                   for n, t in tables.items()) + ".")
    return finish(fig)
