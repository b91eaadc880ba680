"""The exercises of ``notebooks/16_ring_attention.ipynb``: the zigzag positions, and the bug gallery predicted.

1. The learner writes ``zigzag_positions(n, world, rank)``: the global positions rank ``rank`` holds when the
   sequence is cut into ``2·world`` chunks and rank ``r`` holds chunks ``r`` and ``2·world - 1 - r``, what
   :func:`attention_lib.ring_attention.chunk_positions` does with ``layout="zigzag"``. The lesson states the rule
   in words and asks for it before any zigzag code appears; the checker refuses the package's function.
2. Before the bug gallery runs, the learner predicts, for each bug, which ranks of a causal ring of 4 get a wrong
   output; :func:`check_ring_bug_predictions` compares with what the ring measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from ...ring_attention import chunk_positions
from ...validation import is_int
from .._allowed import PLAIN, Allowed
from .._checker import CheckResult, check_function

_INPUTS = [(16, 4, 1), (24, 3, 2), (8, 2, 0)]
_LATER = [(16, 4, 2), (16, 4, 1)]  # after the drawn ring: the first ring again at another rank, then as at first


def _drawn() -> tuple[int, int, int]:
    """A fourth ``(n, world, rank)``, drawn at check time from a seeded generator (so the same on every run, and
    not shown in the lesson: an answer that looks the three inputs up fails here)."""
    g = torch.Generator().manual_seed(16)
    world = int(torch.randint(5, 9, (1,), generator=g))  # 5 .. 8 ranks: none of the fixed inputs has so many
    c, rank = int(torch.randint(2, 5, (1,), generator=g)), int(torch.randint(1, world - 1, (1,), generator=g))
    return 2 * world * c, world, rank


def _inputs(trial: int) -> tuple[int, int, int]:
    """``(n, world, rank)``: a middle rank of 4, the last rank of 3 (its two chunks meet), rank 0 of 2, one drawn
    by :func:`_drawn`, then rank 2 of the first ring (same n and world, other positions) and the first again."""
    if trial < len(_INPUTS):
        return _INPUTS[trial]
    return _drawn() if trial == len(_INPUTS) else _LATER[trial - len(_INPUTS) - 1]


TRIALS = len(_INPUTS) + 1 + len(_LATER)


def _zigzag(n, world, rank):
    return chunk_positions(n, world, rank, "zigzag")


def _chunks(n, world, chunks, size=None):
    size = n // (2 * world) if size is None else size
    return torch.cat([torch.arange(i * size, (i + 1) * size) for i in chunks])


MISTAKES = [
    (lambda n, world, rank: torch.arange(rank * (n // world), (rank + 1) * (n // world)),
     "that is the contiguous layout (rank r holds one chunk of n // world positions, which is also chunks 2r and "
     "2r + 1 of the small ones: neighbours, so the imbalance stays). Cut the sequence into 2 * world "
     "chunks of n // (2 * world) and give rank r two of them: chunk r and chunk 2 * world - 1 - r."),
    (lambda n, world, rank: _chunks(n, world, [rank, 2 * world - rank]),
     "off by one at the far end: chunks are numbered 0 .. 2 * world - 1, so rank r's second chunk is "
     "2 * world - 1 - r (rank 0 gets the last one, 2 * world - 1)."),
    (lambda n, world, rank: torch.cat([_chunks(n, world, [rank]), _chunks(n, world, [2 * world - 1 - rank]).flip(0)]),
     "the right positions, but the second chunk is reversed: keep every chunk's positions in increasing order "
     "(torch.arange(start, stop))."),
    (lambda n, world, rank: _chunks(n, world, [rank, world + rank]),
     "chunk r and chunk world + r take the same place in each half of the sequence, so the second chunk still "
     "has more past for the later ranks. Mirror it instead: the second chunk is 2 * world - 1 - r, so rank 0 takes "
     "the last chunk and rank world - 1 the middle one."),
    (lambda n, world, rank: _chunks(n, world, [rank, (2 * world - 1 - rank) % world]),
     "no % world: there are 2 * world chunks, numbered 0 .. 2 * world - 1, and the second chunk of rank r is "
     "2 * world - 1 - r, in the second half of the sequence (the % folds it back into the first half)."),
    (lambda n, world, rank: torch.arange(rank, n, world),
     "that is Brandon et al.'s striped layout (rank r holds positions r, r + world, r + 2·world, ...), which also "
     "balances causal work, but this exercise asks for the zigzag: two contiguous chunks, r and 2 * world - 1 - r."),
    (lambda n, world, rank: _chunks(n, world, [world - 1 - rank, world + rank]),
     "that is the zigzag mirrored: chunks world - 1 - r and world + r meet in the middle (rank 0 takes the two "
     "middle chunks, rank world - 1 the first and the last). The exercise's rank r holds chunk r from the start and "
     "chunk 2 * world - 1 - r from the end: rank 0 holds the first and the last chunk."),
    (lambda n, world, rank: _chunks(n, world, [rank, (2 * world - rank) % (2 * world)]),
     "chunks[-r] is chunk 2 * world - r, one too far: the last chunk is chunks[-1], so rank r's second chunk is "
     "chunks[-1 - r], chunk 2 * world - 1 - r (and at rank 0, chunks[-0] is chunks[0], the first chunk again)."),
    (lambda n, world, rank: _chunks(n, world, [2 * world - 1 - rank, rank]),
     "the right positions in the wrong order: list chunk r first, then chunk 2 * world - 1 - r, so that the "
     "positions increase (the ring's masks pair each query with its position in this order)."),
]

#: Plain tensor operations; the package's layout (chunk_positions, shard) is the answer, so it is refused.
ALLOWED = Allowed(PLAIN, said="torch.arange, torch.cat and indexing",
                  library_hint="write the positions yourself from torch.arange and torch.cat: your function called "
                               "{call}, which does it for you.")


def _negative_slice(n, world, rank):
    """Chunks cut from the end with ``x[-(r + 1) * c : -r * c]``: at rank 0 the end is ``-0``, which is 0."""
    c, x = n // (2 * world), torch.arange(n)
    return torch.cat([x[rank * c:(rank + 1) * c], x[-(rank + 1) * c:-rank * c]])


def _shape_hint(args, shape) -> str:
    n, world, rank = args
    c = n // (2 * world)
    said = f"for n = {n}, world = {world}, rank = {rank} your function returned shape {shape}"
    if rank == 0 and shape == (c,):
        return (f"{said}: chunk 0 only. Cut from the end with x[-(r + 1) * c : -r * c], rank 0's slice ends at -0, "
                f"which is 0, so x[-{c}:-0] is x[-{c}:0], empty. Write its end as n - r * c (or count chunks from "
                f"the start: chunk 2 * world - 1 - r begins at (2 * world - 1 - r) * c).")
    return f"{said}; rank r holds n // world positions: two chunks of n // (2 * world)."


def _one_world(fn) -> str:
    """A hint when the answer is right for every trial of one ring size and wrong for another: a size written in."""
    right: dict[int, list[bool]] = {}
    for trial in range(TRIALS):
        n, world, rank = args = _inputs(trial)
        try:
            got = fn(*args)
            right.setdefault(world, []).append(bool(torch.equal(got.long(), _zigzag(*args))))
        except Exception:  # noqa: BLE001 - the checker already said what raised
            return ""
    good = sorted(w for w, oks in right.items() if all(oks))
    bad = sorted(w for w, oks in right.items() if not all(oks))
    if good and bad:
        return (f" Hint: your function is right for every ring of {' and '.join(map(str, good))} ranks and wrong for "
                f"{' and '.join(map(str, bad))}: is a number written for one ring size (such as 7 - r, or 8 chunks, "
                f"for 4 ranks)? Take every size from n and world: chunk 2 * world - 1 - r.")
    return ""


def _first_wrong(fn) -> str:
    """Where the answer first differs: ``(n, world, rank)``, what it gave and what was expected."""
    for trial in range(TRIALS):
        args = _inputs(trial)
        try:
            got = fn(*args)
        except Exception:  # noqa: BLE001 - the checker already said what raised
            return ""
        expected = _zigzag(*args)
        if not (isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.equal(got.long(), expected)):
            shown = got.tolist() if isinstance(got, torch.Tensor) and got.numel() <= 16 else type(got).__name__
            return (f" (First wrong for n = {args[0]}, world = {args[1]}, rank = {args[2]}: your function gave "
                    f"{shown}, the zigzag layout {expected.tolist()}.)")
    return ""


def check_zigzag_positions(fn: Callable) -> CheckResult:
    """Check ``zigzag_positions(n, world, rank)``, the exercise of ``notebooks/16_ring_attention.ipynb``.

    Args:
        fn: ``(n, world, rank) -> positions``, a 1-D integer tensor of the ``n / world`` global positions rank
            ``rank`` holds: chunk ``rank`` then chunk ``2·world - 1 - rank``, chunks of ``n / (2·world)``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> check_zigzag_positions(lambda n, world, rank: _chunks(n, world, [rank, 2 * world - 1 - rank])).status
        'passed'
        >>> print(check_zigzag_positions(MISTAKES[0][0]))
        ❌ zigzag_positions: not quite. Hint: that is the contiguous layout ...
    """
    result = check_function(fn, _zigzag, _inputs, name="zigzag_positions", mistakes=MISTAKES, allowed=ALLOWED,
                            trials=TRIALS, atol=0, rtol=0, shape_hint=_shape_hint)
    if result.status == "failed" and "expected shape" not in result.message and "not allowed" not in result.message:
        return CheckResult("failed", result.message + _first_wrong(fn) + _one_world(fn))
    if not result.passed:
        return result
    dtype = fn(*_inputs(0)).dtype
    if dtype != torch.int64:
        return CheckResult("failed", f"❌ zigzag_positions: the right positions, but of dtype {dtype}; positions "
                           f"index tensors, so return torch.int64 (torch.arange of Python ints gives it: drop the "
                           f"dtype= or the .float()/.int()).")
    return CheckResult("passed", "✅ zigzag_positions: right for rank 1 of 4, rank 2 of 3 and rank 0 of 2 "
                                 "(n = 16, 24, 8), and for one more ring the checker drew, then rank 2 of 4 and "
                                 "rank 1 of 4 again. Well done!")


#: The three bugs of the gallery, each with why it breaks the ranks it breaks (shown once predicted).
WHY = {
    "forgets to rescale": "rank 0 folds one chunk only (every other chunk is in its future and skipped), so it has "
                          "nothing to rescale; every other rank folds several chunks, and when a later chunk raises a "
                          "query's max, the sum and blend so far stay measured against the old one.",
    "skips the last hop": "the last hop brings rank r the chunk of rank r + 1 (mod 4). For ranks 0-2 that chunk is in "
                          "the future and skipped anyway; only rank 3 needed it: chunk 0, the start of the sequence.",
    "masks with local positions": "a mask from positions 0 .. C-1 is the lower triangle on every hop. It is right on "
                                  "the diagonal hop only: rank 0 sees half of every future chunk, and the others lose "
                                  "half of every past chunk, so every rank is wrong.",
}


def check_ring_bug_predictions(predictions, measured: Mapping[str, Sequence[int]]) -> CheckResult:
    """Compare the learner's predicted ``{bug: [ranks with a wrong output]}`` with the ring's ``measured`` ones.

    Built for ``notebooks/16_ring_attention.ipynb`` (a causal contiguous ring of 4). The measurement and the
    reasons are shown only once every bug has a prediction.

    Example:
        >>> measured = {"forgets to rescale": [1, 2, 3], "skips the last hop": [3],
        ...             "masks with local positions": [0, 1, 2, 3]}
        >>> check_ring_bug_predictions(dict(measured), measured).status
        'passed'
        >>> check_ring_bug_predictions({"skips the last hop": [3]}, measured).status
        'not attempted'
    """
    if not isinstance(predictions, Mapping) or any(predictions.get(bug) in (None, ...) for bug in measured):
        missing = [bug for bug in measured if not isinstance(predictions, Mapping) or predictions.get(bug) in
                   (None, ...)]
        return CheckResult("not attempted", f"📝 bug predictions: no predictions yet for {missing}. Predict every "
                           f"bug first: a list of the ranks (0-3) whose output is wrong, e.g. [0, 2] or []. The "
                           f"measurement appears here once you have predicted them all.")
    lines, right = [], 0
    for bug, ranks in measured.items():
        guess = predictions[bug]
        if not isinstance(guess, Sequence | set) or isinstance(guess, str) or not all(
                is_int(r) and 0 <= r < 4 for r in guess):
            return CheckResult("failed", f"❌ bug predictions: a prediction is a list of ranks 0-3 (ints, not "
                               f"True/False), but for {bug!r} got {guess!r}; e.g. [1, 3], or [] for none.")
        if len(set(guess)) != len(guess):
            return CheckResult("failed", f"❌ bug predictions: for {bug!r} you listed a rank twice ({list(guess)!r}); "
                               f"name each wrong rank once, e.g. [1, 3].")
        hit = set(guess) == set(ranks)
        right += hit
        lines.append(f"{'✅' if hit else '❌'} {bug}: you predicted {sorted(set(guess))}, the ring measured "
                     f"{sorted(ranks)}. Why: {WHY[bug]}")
    verdict = "passed" if right == len(measured) else "failed"
    head = f"{'✅' if verdict == 'passed' else '❌'} bug predictions: {right} of {len(measured)} right."
    return CheckResult(verdict, "\n".join([head, *lines]))
