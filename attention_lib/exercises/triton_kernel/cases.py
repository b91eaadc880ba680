"""The inputs of lesson 14's kernel checkers, and what a right kernel (and some wrong ones) make of them.

Each :class:`Case` is one launch, built to catch one slip: several tiles (the maximum grows), ragged lengths, several
heads (each with its own offset, and gaps between heads: the tensors are views into larger buffers), ``Ev != E``,
``BLOCK_L != BLOCK_S``, packed QKV (rows with gaps between them), and the causal mask with ``L < S`` and ``L > S``;
packed, the output's rows have gaps too. Past the end of every key and value (and, causal, past the last tile any
program may visit) the buffers hold large keys and ``NaN`` values (and ``NaN`` queries past the last query), as
memory past a tensor holds anything: a kernel that reads there, or visits a tile it should skip, gets ``NaN``, the
same on every run. In the interpreter the checker also watches every load (:mod:`~.reads`): the tiles of keys loaded,
those loaded with a mask, and any read that lands outside the tensors it was given.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import torch

from ...memory_efficient.triton_launch import interpreted, launch, runs_interpreted, tile_ends

FILL = 123.0  # what the output and log-sum-exp buffers hold past the last query: the kernel must leave it alone
PAD = 16  # rows past the end of each head's keys and values


@dataclass(frozen=True)
class Case:
    """One launch: ``heads = (N, H)``, ``L`` queries, ``S`` keys, ``E``/``Ev`` features, tiles of ``blocks``;
    ``slip`` names the hint for a wrong answer that no diagnosis explains."""

    name: str
    heads: tuple[int, int]
    L: int
    S: int
    E: int
    Ev: int
    is_causal: bool
    blocks: tuple[int, int]
    slip: str
    packed: bool = False  # query, key and value are views of packed buffers: rows 2E + Ev, E + Ev + 8, Ev + 8 apart
    falling: bool = False  # the first tile's keys are 60 times larger: the maximum falls after it, by far

    @property
    def B(self) -> int:  # noqa: N802 - the kernel's B = N * H
        return self.heads[0] * self.heads[1]


#: The cases of :func:`~.checkers.check_attention_kernel`, in order (the first wrong one gives the hint).
CASES = (
    Case("one tile of 16 keys", (1, 1), 16, 16, 16, 16, False, (16, 16), "update"),
    Case("16 queries, 64 keys in 4 tiles", (1, 1), 16, 64, 16, 16, False, (16, 16), "no rescale"),
    Case("ragged: 20 queries, 33 keys (one in the last tile)", (1, 1), 20, 33, 16, 16, False, (16, 16),
         "ragged tile unmasked"),
    Case("2 sentences x 3 heads", (2, 3), 20, 37, 16, 16, False, (16, 16), "heads"),
    Case("E = 32, Ev = 16", (1, 2), 20, 37, 32, 16, False, (16, 16), "value dim"),
    Case("BLOCK_L = 32, BLOCK_S = 16", (2, 2), 40, 37, 16, 16, False, (32, 16), "blocks"),
    Case("packed rows: q's 48, k's 40 and v's 24 numbers apart", (1, 2), 40, 40, 16, 16, False, (16, 16),
         "row strides", packed=True),
    Case("falling scores: the first tile's far above the rest", (1, 1), 16, 48, 16, 16, False, (16, 16),
         "running max", falling=True),
)

#: The causal cases :func:`~.checkers.check_causal_kernel` adds after :data:`CASES`.
CAUSAL_CASES = (
    Case("causal, 48 queries and keys", (1, 1), 48, 48, 16, 16, True, (16, 16), "no causal mask"),
    Case("causal, 16 queries, 64 keys: 16-63 in the future", (1, 1), 16, 64, 16, 16, True, (16, 16),
         "future tiles visited"),
    Case("causal, BLOCK_L = 32, BLOCK_S = 16, 64 queries, 80 keys", (1, 2), 64, 80, 16, 32, True, (32, 16),
         "key_end in BLOCK_S"),
    Case("causal, BLOCK_L = 16, BLOCK_S = 32, 40 queries, 50 keys", (2, 1), 40, 50, 32, 16, True, (16, 32),
         "future tiles visited"),
    Case("causal, 64 queries, 40 keys (L > S)", (1, 2), 64, 40, 16, 16, True, (16, 16), "full_end past S"),
)


def case_inputs(case: Case, device="cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``query (B, L, E)``, ``key (B, S, E)``, ``value (B, S, Ev)`` for ``case`` (``B = N * H``).

    Each is a view into a ``(B, rows + 16, .)`` buffer whose rows past the end hold large keys, ``NaN`` values and
    ``NaN`` queries; causal with ``S > L``, the keys no query may see
    hold them too. Packed, they are column slices of packed buffers whose rows are 2E + Ev, E + Ev + 8 and Ev + 8
    numbers apart (a fused QKV projection's layout, each with its own row stride). The
    keys of tile ``j`` (of 16) are scaled by ``j + 1``, so that the maximum grows from tile to tile (with ``falling``,
    the first tile's by 60 and the others' by 1, so that it falls after the first tile, by far). The whole
    buffers move to ``device``, then the views are cut: the padding is there on a GPU too.
    """
    g = torch.Generator().manual_seed(1400 + 7 * case.L + case.S + case.E)
    B, S, E, Ev = case.B, case.S, case.E, case.Ev
    q = torch.randn(B, case.L, E, generator=g)
    k = torch.randn(B, S, E, generator=g) * (1 + torch.arange(S) // 16)[:, None]
    if case.falling:  # scores of about +-100 in the first tile, of a few units after it
        k = k / (1 + torch.arange(S) // 16)[:, None] * torch.where(torch.arange(S) < 16, 60.0, 1.0)[:, None]
    v = torch.randn(B, S, Ev, generator=g)
    never = never_visited(case)
    if never < S:  # causal: the tiles after the last query's tile are in every query's future
        k[:, never:], v[:, never:] = 4.0, float("nan")
    if case.packed:  # views of packed buffers whose rows are 2E + Ev, E + Ev + 8 and Ev + 8 numbers apart
        qkv = torch.full((B, case.L + PAD, 2 * E + Ev), float("nan"))  # a fused QKV projection's rows: [q | k | v]
        kv = torch.full((B, S + PAD, E + Ev + 8), 4.0)  # a KV projection's rows: [k | v | 8 more]
        vs = torch.full((B, S + PAD, Ev + 8), float("nan"))
        qkv[:, :case.L, :E], kv[:, :S, :E], vs[:, :S, :Ev] = q, k, v
        qkv, kv, vs = qkv.to(device), kv.to(device), vs.to(device)
        return qkv[:, :case.L, :E], kv[:, :S, :E], vs[:, :S, :Ev]
    query, key, value = (torch.full((B, n + PAD, d), fill) for n, d, fill in (
        (case.L, E, float("nan")), (S, E, 4.0), (S, Ev, float("nan"))))
    query[:, :case.L], key[:, :S], value[:, :S] = q, k, v
    return query.to(device)[:, :case.L], key.to(device)[:, :S], value.to(device)[:, :S]


def _key_ends(case: Case) -> list[tuple[int, int]]:
    return tile_ends(case.L, case.S, *case.blocks, case.is_causal)


def never_visited(case: Case) -> int:
    """The first key of the tiles no program visits (``S`` if every tile is visited)."""
    block_s = case.blocks[1]
    return min(case.S, -(-max(key_end for _, key_end in _key_ends(case)) // block_s) * block_s)


def visited_tiles(case: Case) -> int:
    """How many tiles of keys the programs visit, over every program and head."""
    return case.B * sum(len(range(0, key_end, case.blocks[1])) for _, key_end in _key_ends(case))


def edge_tiles(case: Case) -> int:
    """How many tiles of keys need a mask, over every program and head: those that run past ``S`` and, with
    ``is_causal``, those that hold a key after some query of their block (the diagonal)."""
    return case.B * sum(len(range(full_end, key_end, case.blocks[1])) for full_end, key_end in _key_ends(case))


def allowed(case: Case, last_key: torch.Tensor | None = None) -> torch.Tensor:
    """``(L, S)``, ``True`` = query ``i`` may see key ``j``: every key, or with ``is_causal`` keys ``0..i``;
    ``last_key`` (one per query) cuts each row after it too."""
    rows, cols = torch.arange(case.L)[:, None], torch.arange(case.S)[None, :]
    seen = cols <= rows if case.is_causal else torch.ones(case.L, case.S, dtype=torch.bool)
    return seen if last_key is None else seen & (cols <= last_key[:, None])


def attention(query, key, value, seen: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The output ``(B, L, Ev)`` and natural log-sum-exp ``(B, L)`` over the keys ``seen`` ``(L, S)``, in float64
    (the values of keys no query sees are never read: they may hold ``NaN``)."""
    scores = (query.double() @ key.double().transpose(-2, -1) * scale).masked_fill(~seen, float("-inf"))
    value = value.double().masked_fill(~seen.any(dim=0)[:, None], 0.0)  # (S, 1): keys nobody sees
    return torch.softmax(scores, dim=-1) @ value, torch.logsumexp(scores, dim=-1)  # (B, L, S) @ (B, S, Ev)


def expected_output(case: Case, query, key, value) -> tuple[torch.Tensor, torch.Tensor]:
    """The output and log-sum-exp of ``case`` (only the keys each query may see), in float32."""
    output, lse = attention(query, key, value, allowed(case), case.E ** -0.5)
    return output.float(), lse.float()


@dataclass(frozen=True)
class Ran:
    """What a kernel made of a case: its output and log-sum-exp (on the CPU), whether it left the memory after
    them alone, and (in the interpreter) how many tiles of keys it loaded with a mask and without, and which input
    it read outside of (``None`` if none)."""

    output: torch.Tensor
    lse: torch.Tensor
    untouched: bool
    masked_key_loads: int | None
    key_loads: int | None
    read_outside: str | None = None
    wrote_outside: str | None = None  # "Out" or "Lse": a store landed outside that tensor
    only_past_the_end: bool = False  # ... only in the rows after the last query
    selected_tiles: int | None = None  # tiles of keys loaded without a mask, yet masked with tl.where
    between_rows: bool = False  # stores landed in the gaps between Out's rows (its rows assumed Ev apart)
    tiles_past_s: int | None = None  # tiles of keys loaded wholly past the last key (every key masked)


def run_case(kernel, case: Case) -> Ran:
    """Run ``kernel`` on ``case``: compiled on a GPU for a compiled kernel, else in Triton's interpreter."""
    from .reads import watching_reads

    compiled = (torch.cuda.is_available() and not runs_interpreted(torch.device("cuda"))
                and type(kernel).__name__ == "JITFunction")  # a kernel made with TRITON_INTERPRET=1 is interpreted
    device = torch.device("cuda" if compiled else "cpu")
    query, key, value = case_inputs(case, device)
    B, L = case.B, case.L
    # Out and Lse lie inside allocations large enough for any store computed from the kernel's arguments (another
    # tensor's strides, a missing mask): a store outside them lands in memory the checker owns and watches.
    inputs = (query, key, value)
    reach = B * max(t.stride(0) for t in inputs) + (L + PAD) * max(t.stride(1) for t in inputs)
    width = case.Ev + 8 if case.packed else case.Ev  # packed, Out's rows have 8 numbers after them too
    size = B * (L + PAD) * width
    out_memory = torch.full((size + reach,), FILL, device=device)
    lse_memory = torch.full((B * L + reach,), FILL, device=device)
    grid = out_memory[:size].view(B, L + PAD, width)
    output = grid[:, :L, :case.Ev]
    lse = lse_memory[:B * L].view(B, L)
    watch = contextlib.nullcontext({}) if compiled else watching_reads({"query": query, "key": key, "value": value})
    with warnings.catch_warnings(), watch as seen:  # a wrong kernel makes NumPy warn about 0 / 0: the check says it
        warnings.simplefilter("ignore", RuntimeWarning)
        launch(query, key, value, output, lse, is_causal=case.is_causal, scale=None,
               block_sizes=case.blocks, kernel=kernel if compiled else interpreted(kernel))
    rows = grid[:, L:]  # Out's rows past the last query
    between = not bool((grid[:, :L, case.Ev:] == FILL).all())  # the gaps between Out's rows (packed)
    elsewhere = not bool((out_memory[size:] == FILL).all())
    past = not bool((rows == FILL).all()) or not bool((lse_memory[B * L:] == FILL).all())
    wrote_outside = "Out" if elsewhere or between or not bool((rows == FILL).all()) else "Lse" if past else None
    return Ran(output.cpu(), lse.cpu(), not (past or elsewhere or between), seen.get("masked"), seen.get("all"),
               seen.get("outside"), wrote_outside, past and not (elsewhere or between), seen.get("selected"),
               between and not elsewhere, seen.get("past"))
