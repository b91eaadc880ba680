"""Checkers for ``notebooks/17_latent_and_paged.ipynb``: reading one sequence's keys through its block table, and
predictions of what each bug of the latent and paged caches does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..paged import read_blocks
from ._allowed import PLAIN, Allowed
from ._checker import CheckResult, check_function
from .predictions import AMOUNTS, grade_amounts

#: (num_blocks, B, Hkv, Dh, S) per trial: a part-full last block, full blocks, a single part-full block, and 9
#: positions in 3 blocks of 4 (where the length over the number of blocks, rounded up, is not B).
_SIZES = ((8, 4, 2, 3, 10), (6, 2, 1, 2, 6), (5, 4, 3, 4, 3), (7, 4, 2, 3, 9))


def _table_inputs(seed: int) -> tuple:
    g = torch.Generator().manual_seed(1700 + seed)
    num_blocks, B, Hkv, Dh, S = _SIZES[seed % len(_SIZES)]
    store = torch.randn(num_blocks, B, Hkv, Dh, generator=g)  # (num_blocks, B, Hkv, Dh): one layer's keys
    table = torch.randperm(num_blocks, generator=g)[:-(-S // B)]  # the sequence's blocks, in no pool order
    return store, table, S


def _reference(store, table, length):
    return read_blocks(store, table[None], length)[0]  # (Hkv, S, Dh)


def _end_to_end(store, table, length):  # what read_blocks does for one table, in plain indexing (for the slips)
    return store[table].flatten(0, 1)[:length].transpose(0, 1)  # (blocks, B, Hkv, Dh) -> (Hkv, S, Dh)


def _pool_order(store, table, length):
    return _end_to_end(store, torch.arange(len(table)), length)


def _off_by_one(store, table, length):
    return _end_to_end(store, table.roll(1), length)


def _off_by_one_forward(store, table, length):  # position p read from the next block, table[p // B + 1]
    return _end_to_end(store, table.roll(-1), length)


def _slot_major(store, table, length):  # position p read from block p % blocks, slot p // blocks
    return store[table].transpose(0, 1).flatten(0, 1)[:length].transpose(0, 1)


def _guessed_block_size(store, table, length):  # B worked out from the length, not read from the store
    B = -(-length // len(table))
    return torch.stack([store[table[p // B], p % B] for p in range(length)], dim=1)


def _position_as_block(store, table, length):  # position p read from block table[p % blocks]: the slot forgotten
    return store[table[torch.arange(length) % len(table)], 0].transpose(0, 1)


def _reshaped_not_transposed(store, table, length):  # (S, Hkv, Dh) reshaped to (Hkv, S, Dh): heads and positions mixed
    return store[table].flatten(0, 1)[:length].reshape(store.shape[2], length, store.shape[3])


def _reshaped_before_cut(store, table, length):  # every slot reshaped to (Hkv, slots, Dh), then cut: heads mixed
    return store[table].reshape(store.shape[2], -1, store.shape[3])[:, :length]


def _slot_forgotten(store, table, length):  # the right block for position p, but always its slot 0
    B = store.shape[1]
    return torch.stack([store[table[p // B], 0] for p in range(length)], dim=1)


def _block_size_rounded_down(store, table, length):  # B guessed as length // blocks
    B = max(1, length // len(table))
    return torch.stack([store[table[min(p // B, len(table) - 1)], p % B] for p in range(length)], dim=1)


def _table_sorted(store, table, length):  # the table's blocks read in the pool's order, not the table's
    return _end_to_end(store, table.sort().values, length)


def _table_reversed(store, table, length):
    return _end_to_end(store, table.flip(0), length)


def _last_positions(store, table, length):  # the last `length` slots of the blocks, not the first
    return store[table].flatten(0, 1)[-length:].transpose(0, 1)


_ORDER_HINT = ("the blocks were read in another order than the table's: the table lists the sequence's blocks in "
               "position order, so block table[0] holds positions 0 .. B - 1, table[1] the next B, and so on; "
               "read them as listed, neither sorted nor reversed.")

#: The slips of reading through a block table, each with the hint that names it.
MISTAKES: list[tuple[Callable, str]] = [
    (_pool_order, "you read the pool's first blocks, 0, 1, 2, ...: a sequence's blocks are wherever the free list "
                  "put them, so read block table[p // B] for position p, in the table's order."),
    (_off_by_one, "every position was read from the block before its own (table[p // B - 1]): the block of "
                  "position p is table[p // B], counting from 0, so block 0 of the table holds positions 0 .. B - 1."),
    (_off_by_one_forward, "every position was read from the block after its own (table[p // B + 1]): the block "
                          "of position p is table[p // B], counting from 0, so block 0 of the table holds positions "
                          "0 .. B - 1."),
    (_slot_major, "the blocks were interleaved: position p lives in block table[p // B] at slot p % B, so lay the "
                  "blocks end to end (store[table] is (blocks, B, Hkv, Dh); flatten the first two dimensions)."),
    (_position_as_block, "each position was read from slot 0 of a block: within its block, position p sits at "
                         "slot p % B."),
    (_reshaped_not_transposed, "every number is a key of the sequence, but in the wrong place: a reshape of "
                               "(S, Hkv, Dh) into (Hkv, S, Dh) keeps the memory order and mixes heads with "
                               "positions; swap the two dimensions with .transpose(0, 1) instead."),
    (_reshaped_before_cut, "every number is a key of the sequence, but in the wrong place: a reshape of the "
                           "blocks' (slots, Hkv, Dh) into (Hkv, slots, Dh) keeps the memory order and mixes heads "
                           "with positions; swap the two dimensions with .transpose(0, 1) instead."),
    (_slot_forgotten, "each position was read from slot 0 of its block: within block table[p // B], position p "
                      "sits at slot p % B."),
    (_block_size_rounded_down, "you worked out the block size from the length and the table (length // blocks): "
                               "that is B only by luck; read it from the store, B = store.shape[1]."),
    (_table_sorted, _ORDER_HINT),
    (_table_reversed, _ORDER_HINT),
    (_last_positions, "you kept the last length slots of the blocks: a sequence starts at slot 0 of its first "
                      "block, and the unused slots are at the end of its last one, so keep the first length "
                      "positions ([:length])."),
    (_guessed_block_size, "you worked out the block size from the length and the table (length / blocks, rounded "
                          "up): that is B only by luck (9 positions in 3 blocks of 4 give 3); read it from the store, "
                          "B = store.shape[1]."),
]


def _shape_hint(inputs, shape) -> str:
    store, table, S = inputs
    B, Hkv, Dh = store.shape[1:]
    if shape == (Hkv, len(table) * B, Dh):
        return (f"you returned all {len(table) * B} slots of the {len(table)} blocks: the last block is part-full, "
                f"so keep the first length = {S} positions only.")
    if shape == (Hkv, S - 1, Dh):
        return (f"you returned {S - 1} positions, one short: keep positions 0 .. length - 1, all length = {S} of "
                f"them ([:length], not [:length - 1]).")
    if S % B and shape == (Hkv, S // B * B, Dh):
        return (f"you kept the {S // B} full blocks only: the last block is part-full and holds positions "
                f"{S // B * B} .. {S - 1}; take every block of the table, then keep the first length = {S} positions.")
    if shape == (S, Hkv, Dh):
        return "the store keeps positions before heads, (B, Hkv, Dh) per block: transpose to (Hkv, S, Dh) at the end."
    return "return (Hkv, S, Dh): one key per head and position, positions in order."


#: Indexing, reshapes and arithmetic, and Python numbers read from the table (the package's own cache keeps its
#: tables as lists); the package's reading of a table, :func:`~attention_lib.paged.read_blocks`, is the answer.
ALLOWED = Allowed(PLAIN | {"item", "py_int", "py_index", "tolist"}, said="indexing, reshapes and arithmetic",
                  library_hint="this exercise asks you to write the lookup yourself; your function called {call}, "
                               "which reads the block table for you: index `store` with the table instead.")


def check_read_through_table(fn: Callable) -> CheckResult:
    """Check ``fn(store, table, length)``: one sequence's keys read through its block table, ``(Hkv, S, Dh)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``store (num_blocks, B, Hkv, Dh)`` holds one
    layer's keys for the whole pool, ``table`` (1-D int64) the sequence's blocks in order, ``length`` its ``S``
    positions. Four fixed inputs (:data:`_SIZES`): a part-full last block, full blocks, one part-full block, and
    9 positions in 3 blocks of 4; the store must come back unchanged (the pool is every sequence's).

    Example:
        >>> check_read_through_table(_end_to_end).status
        'passed'
        >>> check_read_through_table(_off_by_one).message[:70]
        '❌ reading through the block table: not quite. Hint: every position was'
    """
    name = "reading through the block table"
    result = check_function(fn, _reference, _table_inputs, name=name, mistakes=MISTAKES, shape_hint=_shape_hint,
                            trials=len(_SIZES), atol=0.0, rtol=0.0, allowed=ALLOWED)
    for trial in range(len(_SIZES) if result.passed else 0):
        store, table, S = _table_inputs(trial)
        before = store.clone()
        fn(store, table, S)
        if not torch.equal(store, before):
            return CheckResult("failed", f"❌ {name}: the keys are right, but your function changed `store`: the "
                               f"pool holds every sequence's keys, so read it and never write into it (no in-place "
                               f"operation such as `.transpose_()`, `+=` or an assignment into `store`).")
    return result


#: Why each bug of lesson 17 does what it does.
WHY = {
    "latent rotated, not the rotary key": "A bug of the model, not of its cache (that reads right): the latent makes "
                                          "the values and the position-free keys, so turning it puts absolute "
                                          "positions into both, while the rotary key stays unturned: no logit after "
                                          "the first position is DeepSeek's (at position 0 RoPE turns by nothing), "
                                          "and moving the text changes them.",
    "block table off by one block": "Every continuation outgrows one block, and then its blocks are read in the "
                                    "wrong order (block 0 from its last block, block j from block j - 1); only the "
                                    "words, sometimes, survive.",
    "copy-on-write forgotten": "Only a part-full shared block is overwritten, and only the sibling that wrote "
                               "first reads the other's key: prompts whose last block is full are read right.",
}


def _bands() -> str:
    """The answers with their shares, from :data:`AMOUNTS`: ``"'all' (90 % or more), ..."``."""
    def band(low, high):
        return f"{low:.0%} or more" if high > 1 else f"under {high:.0%}" if low == 0 else f"{low:.0%}-{high:.0%}"
    return ", ".join(f"{word!r} ({band(*bounds)})" for word, bounds in AMOUNTS.items())


def check_gallery_predictions(predictions: Mapping[str, str] | None, gallery: Mapping[str, Mapping[str, float]]
                              ) -> CheckResult:
    """Check predictions, made before measuring, of how many continuations each bug leaves with the right logits.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``predictions[bug]`` is ``"all"`` (90 % or
    more), ``"most"`` (50-90 %), ``"some"`` (10-50 %) or ``"none"`` (under 10 %), the bands of :data:`AMOUNTS`;
    ``gallery[bug]["right logits"]`` is the measured share: for a cache bug, continuations that read their cache
    right (the logits of one whole causal pass at every step); for the rotated latent, a model bug, prompts that
    give transformers' logits. The measurements and the reasons are shown once every bug has a prediction.

    Example:
        >>> gallery = {"copy-on-write forgotten": {"right logits": 0.7}}
        >>> check_gallery_predictions({"copy-on-write forgotten": "most"}, gallery).status
        'passed'
    """
    name = "what each bug does"
    return grade_amounts(name, predictions, {bug: measured["right logits"] for bug, measured in gallery.items()}, WHY,
                         f"📝 {name}: no predictions yet. Fill in `my_predictions` with one of {_bands()} for each "
                         f"bug, run it, then run this cell again.")
