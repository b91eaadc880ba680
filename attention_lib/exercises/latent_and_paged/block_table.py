"""The checker of reading one sequence's keys through its block table (``notebooks/17_latent_and_paged.ipynb``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...paged import read_blocks
from .._allowed import PLAIN, Allowed
from .._checker import CheckResult, check_function
from ._trials import helper_called, helper_refusal, kept_after_next_call

#: (num_blocks, B, Hkv, Dh, S) and what each trial is: a part-full last block (twice, with new values), full blocks,
#: a single part-full block, 9 positions in 3 blocks of 4 (where the length over the number of blocks, rounded up,
#: is not B), and the first shapes as a transposed view, in float64 and in bfloat16 (a pool holds any of them).
TRIALS = (((8, 4, 2, 3, 10), "a part-full last block"), ((8, 4, 2, 3, 10), "the same shapes again, new values"),
          ((6, 2, 1, 2, 6), "full blocks"), ((5, 4, 3, 4, 3), "a single part-full block"),
          ((7, 4, 2, 3, 9), "9 positions in 3 blocks of 4"),
          ((8, 4, 2, 3, 10), "a store that is a transposed view (not contiguous)"),
          ((8, 4, 2, 3, 10), "a float64 store"), ((8, 4, 2, 3, 10), "a bfloat16 store"))
_SIZES = tuple(size for size, _ in TRIALS)


def _table_inputs(seed: int) -> tuple:
    g = torch.Generator().manual_seed(1700 + seed)
    (num_blocks, B, Hkv, Dh, S), said = TRIALS[seed % len(TRIALS)]
    if "transposed" in said:  # the same numbers laid out (num_blocks, Hkv, B, Dh) in memory
        store = torch.randn(num_blocks, Hkv, B, Dh, generator=g).transpose(1, 2)
    else:
        store = torch.randn(num_blocks, B, Hkv, Dh, generator=g)  # (num_blocks, B, Hkv, Dh): one layer's keys
    store = store.double() if "float64" in said else store.bfloat16() if "bfloat16" in said else store
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


def _trial_of(args: tuple) -> int:
    return next(t for t in range(len(TRIALS)) if torch.equal(_table_inputs(t)[0], args[0]))


def _where_from(store, key) -> tuple[int, int] | None:
    """The (block, slot) of the pool that holds ``key (Hkv, Dh)``, or ``None``."""
    found = (store == key.to(store.dtype)).flatten(2).all(-1).nonzero()  # (matches, 2)
    return tuple(found[0].tolist()) if len(found) else None


def _explain(got, expected, args) -> str:
    store, table, S = args
    trial, B = _trial_of(args), store.shape[1]
    said = TRIALS[trial][1]
    for earlier in range(trial):
        if TRIALS[earlier][0] == TRIALS[trial][0] and torch.equal(got.to(expected.dtype).double(),
                                                                  _reference(*_table_inputs(earlier)).double()):
            return (f"on {said}, your function returned the keys of an earlier input of the same shapes: read them "
                    f"from the arguments of each call, not from a result kept from before.")
    wrong = [p for p in range(S) if not torch.equal(got[:, p].to(expected.dtype), expected[:, p])]
    p = wrong[0]
    came = _where_from(store, got[:, p])
    source = f"block {came[0]}, slot {came[1]} of the pool" if came else "no slot of the pool"
    text = (f"on {said} (store {tuple(store.shape)}, table {table.tolist()}, length {S}), {len(wrong)} of {S} "
            f"positions are wrong, the first at position {p}: it lives in block table[{p} // {B}] = "
            f"{int(table[p // B])}, slot {p} % {B} = {p % B}, but your key there is the one in {source}.")
    for dim, what in ((0, "num_blocks"), (2, "Hkv"), (3, "Dh")):
        other = store.shape[dim]
        if other != B and came is not None and p // other < len(table) and came == (int(table[p // other]),
                                                                                     p % other):
            return (f"{text} Hint: that is the block and slot of position {p} for blocks of {other}, the store's "
                    f"{what} (store.shape[{dim}]): the block size is store.shape[1] = {B}.")
    return text


def check_read_through_table(fn: Callable) -> CheckResult:
    """Check ``fn(store, table, length)``: one sequence's keys read through its block table, ``(Hkv, S, Dh)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``store (num_blocks, B, Hkv, Dh)`` holds one
    layer's keys for the whole pool, ``table`` (1-D int64) the sequence's blocks in order, ``length`` its ``S``
    positions. Eight inputs (:data:`TRIALS`): a part-full last block (twice, with new values), full blocks, one
    part-full block, 9 positions in 3 blocks of 4, a transposed view, float64 and bfloat16; the store and the
    table must come back unchanged (the pool is every sequence's), and the checker's own helpers are refused.

    Example:
        >>> def read(store, table, length):
        ...     return store[table].flatten(0, 1)[:length].transpose(0, 1)  # (Hkv, S, Dh)
        >>> check_read_through_table(read).status
        'passed'
        >>> check_read_through_table(lambda store, table, length: read(store, table.roll(1), length)).message[:70]
        '❌ reading through the block table: not quite. Hint: every position was'
    """
    name = "reading through the block table"
    helper = helper_called(fn, _table_inputs(0), frozenset({"_reference", "_end_to_end"}))
    if helper is not None:
        return CheckResult("failed", helper_refusal(name, helper))
    result = check_function(fn, _reference, _table_inputs, name=name, mistakes=MISTAKES, shape_hint=_shape_hint,
                            trials=len(TRIALS), atol=0.0, rtol=0.0, allowed=ALLOWED, explain=_explain,
                            keep_inputs=True, inputs_said=f"{len(TRIALS)} inputs (part-full and full blocks, a "
                                                          f"transposed view, float64 and bfloat16)")
    if result.status == "error" and "IndexError" in result.message and "out of bounds" in result.message:
        generic = "print the shape of each tensor, line by line (x.shape), and compare them with the shapes the " \
                  "exercise asks for."
        said = ("an index ran past the table or a block: position p lives in block table[p // B], slot p % B, where "
                "B = store.shape[1] is the number of slots per block (read from the store: it is 2 or 4 here, not a "
                "number written in, and not another of the store's sizes).")
        message = result.message.replace(generic, said) if generic in result.message else f"{result.message}\n{said}"
        return CheckResult("error", message)
    if result.passed and not kept_after_next_call(fn, _reference, _table_inputs, 0, 1):
        return CheckResult("failed", f"❌ {name}: right on each input, but the keys returned for {TRIALS[0][1]} "
                                     f"changed when your function ran again on new values: return a new tensor (or "
                                     f"a view of the store) each call, not a buffer you reuse or a result "
                                     f"remembered from before.")
    return result
