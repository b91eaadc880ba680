"""Checkers for ``notebooks/17_latent_and_paged.ipynb``: reading one sequence's keys through its block table, and
predictions of what each bug of the latent and paged caches does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..paged import read_blocks
from ._checker import CheckResult, check_function
from .generation import AMOUNTS, _amount

#: (num_blocks, B, Hkv, Dh, S) per trial: a part-full last block, a full one, and a single part-full block.
_SIZES = ((8, 4, 2, 3, 10), (6, 2, 1, 2, 6), (5, 4, 3, 4, 3))


def _table_inputs(seed: int) -> tuple:
    g = torch.Generator().manual_seed(1700 + seed)
    num_blocks, B, Hkv, Dh, S = _SIZES[seed % len(_SIZES)]
    store = torch.randn(num_blocks, B, Hkv, Dh, generator=g)  # (num_blocks, B, Hkv, Dh): one layer's keys
    table = torch.randperm(num_blocks, generator=g)[:-(-S // B)]  # the sequence's blocks, in no pool order
    return store, table, S


def _reference(store, table, length):
    return read_blocks(store, table[None], length)[0]  # (Hkv, S, Dh)


def _pool_order(store, table, length):
    return _reference(store, torch.arange(len(table)), length)


def _off_by_one(store, table, length):
    return _reference(store, table.roll(1), length)


def _slot_major(store, table, length):  # position p read from block p % blocks, slot p // blocks
    return store[table].transpose(0, 1).flatten(0, 1)[:length].transpose(0, 1)


def _position_as_block(store, table, length):  # position p read from block table[p % blocks]: the slot forgotten
    return store[table[torch.arange(length) % len(table)], 0].transpose(0, 1)


#: The slips of reading through a block table, each with the hint that names it.
MISTAKES: list[tuple[Callable, str]] = [
    (_pool_order, "you read the pool's first blocks, 0, 1, 2, ...: a sequence's blocks are wherever the free list "
                  "put them, so read block table[p // B] for position p, in the table's order."),
    (_off_by_one, "every position was read from the block before its own (table[p // B - 1]): the block of "
                  "position p is table[p // B], counting from 0, so block 0 of the table holds positions 0 .. B - 1."),
    (_slot_major, "the blocks were interleaved: position p lives in block table[p // B] at slot p % B, so lay the "
                  "blocks end to end (store[table] is (blocks, B, Hkv, Dh); flatten the first two dimensions)."),
    (_position_as_block, "each position was read from slot 0 of a block: within its block, position p sits at "
                         "slot p % B."),
]


def _shape_hint(inputs, shape) -> str:
    store, table, S = inputs
    B, Hkv, Dh = store.shape[1:]
    if shape == (Hkv, len(table) * B, Dh):
        return (f"you returned all {len(table) * B} slots of the {len(table)} blocks: the last block is part-full, "
                f"so keep the first length = {S} positions only.")
    if shape == (S, Hkv, Dh):
        return "the store keeps positions before heads, (B, Hkv, Dh) per block: transpose to (Hkv, S, Dh) at the end."
    return "return (Hkv, S, Dh): one key per head and position, positions in order."


def check_read_through_table(fn: Callable) -> CheckResult:
    """Check ``fn(store, table, length)``: one sequence's keys read through its block table, ``(Hkv, S, Dh)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``store (num_blocks, B, Hkv, Dh)`` holds one
    layer's keys for the whole pool, ``table`` (1-D int64) the sequence's blocks in order, ``length`` its ``S``
    positions. Three fixed inputs: a part-full last block, full blocks, and one part-full block.

    Example:
        >>> check_read_through_table(_reference).status
        'passed'
        >>> check_read_through_table(_off_by_one).message[:70]
        '❌ reading through the block table: not quite. Hint: every position was'
    """
    return check_function(fn, _reference, _table_inputs, name="reading through the block table", mistakes=MISTAKES,
                          shape_hint=_shape_hint, atol=0.0, rtol=0.0)


#: Why each bug of lesson 17 does what it does.
WHY = {
    "latent rotated, not the rotary key": "The latent makes the values and the position-free keys, so turning it "
                                          "puts absolute positions into both, while the rotary key stays unturned: "
                                          "no logit is DeepSeek's, and moving the text changes them all.",
    "block table off by one block": "Every key is read from its neighbour's block, as soon as a sequence has a "
                                    "second block; only the words, sometimes, survive.",
    "copy-on-write forgotten": "Only a part-full shared block is overwritten, and only the sibling that wrote "
                               "first reads the other's key: prompts whose last block is full are read right.",
}


def check_gallery_predictions(predictions: Mapping[str, str] | None, gallery: Mapping[str, Mapping[str, float]]
                              ) -> CheckResult:
    """Check predictions, made before measuring, of how many continuations each bug leaves reading right.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``predictions[bug]`` is ``"all"`` (90 % or
    more), ``"most"`` (50-90 %), ``"some"`` (10-50 %) or ``"none"`` (under 10 %); ``gallery[bug]["reads right"]``
    is the measured share. The measurements and the reasons are shown once every bug has a prediction.

    Example:
        >>> gallery = {"copy-on-write forgotten": {"reads right": 0.7}}
        >>> check_gallery_predictions({"copy-on-write forgotten": "most"}, gallery).status
        'passed'
    """
    name = "what each bug does"
    bugs = list(gallery)
    ask = (f"📝 {name}: no predictions yet. Fill in `my_predictions` with one of {list(AMOUNTS)} for each bug, run "
           f"it, then run this cell again.")
    if not isinstance(predictions, Mapping) or all(predictions.get(b) in (None, Ellipsis, "") for b in bugs):
        return CheckResult("not attempted", ask)
    missing = [b for b in bugs if predictions.get(b) in (None, Ellipsis, "")]
    if missing:
        return CheckResult("failed", f"❌ {name}: predict every bug first; missing: {missing}.")
    unknown = {b: p for b, p in predictions.items() if b in bugs and p not in AMOUNTS}
    if unknown:
        return CheckResult("failed", f"❌ {name}: a prediction is one of {list(AMOUNTS)}, but got {unknown}.")
    lines, right = [], 0
    for bug in bugs:
        share = gallery[bug]["reads right"]
        truth = _amount(share)
        right += predictions[bug] == truth
        lines.append(f"  {'✓' if predictions[bug] == truth else '✗'} {bug}: you said {predictions[bug]!r}, measured "
                     f"{share:.0%} ({truth!r}). {WHY.get(bug, '')}")
    head, verdict = ("✅", "passed") if right == len(bugs) else ("❌", "failed")
    return CheckResult(verdict, f"{head} {name}: {right} of {len(bugs)} right.\n" + "\n".join(lines))
