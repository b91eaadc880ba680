"""How ring attention cuts a sequence over its ranks, and what each rank then computes: layouts, masks, counts.

Built step by step in ``notebooks/16_ring_attention.ipynb``. :func:`chunk_positions` says which global positions
a rank holds (``"contiguous"``, or ``"zigzag"``: rank ``r`` holds chunks ``r`` and ``2P - 1 - r`` of ``2P``);
:func:`ring_block_mask` is the causal mask between two chunks from their global positions;
:func:`block_to_compute` the part of a block the ring computes; :func:`useful_scores`, :func:`computed_scores`
and :func:`useful_scores_formula` count each rank's work. Lengths that do not divide are refused, not padded.
"""

from __future__ import annotations

import torch

from .distributed import check_world
from .validation import check_index, check_int

LAYOUTS = ("contiguous", "zigzag")  #: the layouts :func:`chunk_positions` knows


def check_layout(layout) -> str:
    """``layout`` itself, checked: one of :data:`LAYOUTS` (TypeError if not a string, else ValueError)."""
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a string, one of {LAYOUTS}, but got {type(layout).__name__} ({layout!r}).")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, but got {layout!r}.")
    return layout


def chunks_per_rank(layout: str) -> int:
    """1 for ``"contiguous"``, 2 for ``"zigzag"``: how many pieces of the sequence each rank holds."""
    return 1 if check_layout(layout) == "contiguous" else 2


def chunk_positions(n: int, world: int, rank: int, layout: str = "contiguous") -> torch.Tensor:
    """The global positions ``(n / world,)`` that ``rank`` holds, in the order it holds them.

    Built step by step in ``notebooks/16_ring_attention.ipynb``. ``"contiguous"``: rank ``r`` holds
    positions ``r·C .. (r+1)·C - 1`` with ``C = n / world``. ``"zigzag"``: the sequence is cut into
    ``2·world`` chunks of ``c = n / (2·world)``; rank ``r`` holds chunk ``r`` and chunk ``2·world - 1 - r``.

    Raises:
        TypeError: if a size is not an int, or ``layout`` not a string.
        ValueError: if ``world < 1``, ``rank`` is outside ``0 .. world - 1``, the layout is unknown, or ``n`` is not
            a multiple of ``world`` (contiguous) or ``2·world`` (zigzag): refused, not padded.

    Example:
        >>> chunk_positions(8, 2, 0, "zigzag")
        tensor([0, 1, 6, 7])
        >>> chunk_positions(8, 2, 1)
        tensor([4, 5, 6, 7])
    """
    world = check_world(world)
    rank = check_index(rank, "rank", world, fix="a rank is 0 .. world - 1")
    pieces = chunks_per_rank(layout) * world
    c = check_split(n, world, layout)
    chunks = [rank] if layout == "contiguous" else [rank, pieces - 1 - rank]
    return torch.cat([torch.arange(i * c, (i + 1) * c) for i in chunks])


def check_split(n, world, layout: str = "contiguous") -> int:
    """The length ``c`` of one chunk when ``n`` positions are cut for ``world`` ranks in ``layout``, checked.

    Raises:
        TypeError: if ``n`` or ``world`` is not an int, or ``layout`` not a string.
        ValueError: if ``n < 1``, ``world < 1``, the layout is unknown, or ``n`` does not divide.

    Example:
        >>> check_split(48, 4), check_split(48, 4, "zigzag")
        (12, 6)
    """
    world = check_world(world)
    pieces = chunks_per_rank(layout) * world
    n = check_int(n, "n", minimum=1)
    if n % pieces:
        fit = ((n + pieces - 1) // pieces) * pieces
        fits = f"n={fit}" if fit == pieces else f"n={fit} or n={fit - pieces}"
        raise ValueError(f"the {layout} layout cuts the sequence into {pieces} equal chunks ({chunks_per_rank(layout)}"
                         f" per rank x world={world}), so n must be a multiple of {pieces}, but found n={n}; "
                         f"ring attention does not pad: pad or cut the sequence to {fits}.")
    return n // pieces


def shard(x: torch.Tensor, world: int, rank: int, layout: str = "contiguous", dim: int = -2) -> torch.Tensor:
    """The part of ``x`` that ``rank`` holds: the positions :func:`chunk_positions` gives, along ``dim``.

    Example:
        >>> shard(torch.arange(8.0)[:, None], 2, 1, "zigzag").flatten()
        tensor([2., 3., 4., 5.])
    """
    return x.index_select(dim, chunk_positions(x.shape[dim], world, rank, layout).to(x.device))


def ring_block_mask(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """The causal mask ``(Lq, Lk)`` between two chunks, from their **global** positions (``True`` = may attend).

    Example:
        >>> ring_block_mask(torch.tensor([2, 3]), torch.tensor([0, 3])).int()
        tensor([[1, 0],
                [1, 1]], dtype=torch.int32)
    """
    return k_positions[None, :] <= q_positions[:, None]  # (1, Lk) <= (Lq, 1) -> (Lq, Lk)


def useful_scores(n: int, world: int, layout: str = "contiguous", is_causal: bool = True) -> list[int]:
    """The scores each rank computes that are not masked, counted hop by hop from the ring's own masks.

    Example:
        >>> useful_scores(48, 4), useful_scores(48, 4, "zigzag")
        ([78, 222, 366, 510], [294, 294, 294, 294])
    """
    counts, _ = [], check_split(n, world, layout)
    for rank in range(world):
        mine = chunk_positions(n, world, rank, layout)
        held = [chunk_positions(n, world, (rank - hop) % world, layout) for hop in range(world)]
        counts.append(sum(int(ring_block_mask(mine, k).sum()) if is_causal else mine.numel() * k.numel()
                          for k in held))
    return counts


def useful_scores_formula(n: int, world: int, layout: str = "contiguous") -> list[int]:
    """:func:`useful_scores` of causal attention in closed form: a chunk of ``c`` queries starting at ``s``
    sees ``s + 1 .. s + c`` keys, ``c·s + c(c + 1)/2`` scores in all.

    Example:
        >>> useful_scores_formula(48, 4, "zigzag")
        [294, 294, 294, 294]
    """
    c = check_split(n, world, layout)
    chunks = {r: [r] if layout == "contiguous" else [r, 2 * world - 1 - r] for r in range(world)}
    return [sum(c * (i * c) + c * (c + 1) // 2 for i in chunks[r]) for r in range(world)]


def block_to_compute(mask: torch.Tensor | None):
    """The part of a block of scores the ring computes: ``(rows, cols, mask)``, slices of the queries and keys
    and the mask of that part (``None`` where all of it may attend), or ``None`` when nothing may attend.

    The part is the smallest rectangle holding every ``True`` of ``mask`` ``(Lq, Lk)``. Zigzag blocks off the
    diagonal are halves: the first half of the keys for all queries, or all keys for the second half of the
    queries, as in torch's ``_templated_ring_attention`` with load balancing.

    Example:
        >>> block_to_compute(ring_block_mask(chunk_positions(16, 4, 1, "zigzag"), chunk_positions(16, 4, 0, "zigzag")))
        (slice(0, 4, None), slice(0, 2, None), None)
    """
    if mask is None:  # not causal: the whole block
        return slice(None), slice(None), None
    rows, cols = mask.any(dim=-1).nonzero().flatten(), mask.any(dim=-2).nonzero().flatten()
    if rows.numel() == 0:
        return None  # the whole chunk is in the future of every query here: skipped
    rows, cols = slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1)
    part = mask[rows, cols]
    return rows, cols, None if bool(part.all()) else part


def computed_scores(n: int, world: int, layout: str = "contiguous") -> list[int]:
    """The scores each rank of a causal ring computes, masked ones included: the parts
    :func:`block_to_compute` keeps, hop by hop. Compare with :func:`useful_scores`.

    Example:
        >>> computed_scores(48, 4), computed_scores(48, 4, "zigzag")
        ([144, 288, 432, 576], [360, 360, 360, 360])
    """
    check_split(n, world, layout)
    mine = [chunk_positions(n, world, rank, layout) for rank in range(world)]
    parts = [[block_to_compute(ring_block_mask(mine[r], mine[(r - hop) % world])) for hop in range(world)]
             for r in range(world)]
    return [sum(len(mine[r][p[0]]) * len(mine[r][p[1]]) for p in parts[r] if p is not None) for r in range(world)]
