"""Lesson 16's hop loop: the learner writes what one rank of the ring does, and the checker runs it on a ring of
real processes and reads the result rank by rank.

The answer is ``ring_forward(query, key, value, positions, rank, is_causal, pass_on)``: this rank's output
``(N, H, C, Ev)``, from its queries ``(N, H, C, E)``, the key/value chunk it starts with, every rank's global
positions (``positions[r]``, a tensor of ``C``), and ``pass_on(key, value)``, which sends the chunk it is given to
rank ``r + 1`` and returns rank ``r - 1``'s. The checker first runs it alone (a ring of one), then on every rank
of the ring it is given, on the trials of :mod:`.hop_trials`; it names a ring turned backwards, a fold that does
not rescale, a hop skipped, a causal mask from local positions, ranks that do not pass alike, and refuses an
answer that gathers every chunk before computing by the bytes each rank held.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..._ring_hops import PassOn
from ...distributed import ProcessRing
from .._checker import CheckResult
from .._compare import difference
from .._crashes import explain_crash
from .._running import run_learner
from .._trials import CHANGED_INPUT
from . import hop_trials as trials
from .hop_trials import ALLOWED, NAME, PARAMS, TRIALS, simulate, whole_sequence
from .shipping import NotShippable, ship

#: Each slip the checker names, with its hint.
SLIPS = {
    "turned backwards": "your ring runs backwards: pass_on sends your chunk to rank r + 1 and hands you the chunk of "
                        "rank r - 1, so at hop h you hold the chunk of rank (rank - h) % world. Your masks took it "
                        "for rank (rank + h)'s chunk.",
    "no rescale": "when a chunk raises a query's running max, the sum and blend folded so far must be multiplied by "
                  "exp(old max - new max) (lesson 10's correction): fold every chunk with online_softmax_update.",
    "the last hop skipped": "your loop folds world - 1 chunks: a ring of P ranks folds P chunks (its own, then P - 1 "
                            "that arrive), so the loop runs P times and passes P - 1 times.",
    "the own chunk skipped": "your loop never folds the rank's own chunk: at hop 0 a rank holds its own keys and "
                             "values; fold them before the first pass_on.",
    "local positions": "the causal mask must compare the queries' global positions, positions[rank], with those of the "
                       "chunk held, positions[source]; yours compares every chunk as if it were the rank's own (0 .. "
                       "C-1 on both sides, or positions[rank] for the keys too): the lower triangle on every hop, "
                       "right only on the rank's own chunk.",
    "strict mask": "a query sees its own position too: the mask allows key position j for query position i when "
                   "j <= i (positions[source][None, :] <= positions[rank][:, None]); yours uses j < i, so every query "
                   "loses its own key (and the first position sees nothing at all).",
    "no mask": "with is_causal=True a query at global position i may attend to positions 0 .. i only: mask each "
               "block from the global positions, and skip a chunk whose every key is in the future.",
    "no scale": "the scores are scaled by 1 / sqrt(E), E = query.shape[-1], as SDPA does.",
    "scaled by Ev": "the scale is 1 / sqrt(E), the size of the queries and keys (query.shape[-1]), which the score "
                    "sums over; yours took the values' size, value.shape[-1] (12 here, where E is 16).",
    "no division": "the output is the running blend divided by the running sum, once, after the last hop.",
}
STOPPED = ("the ranks did not pass alike: {counts}. A pass is collective: both neighbours take part, so every rank "
           "calls pass_on the same number of times, in the same order, or its neighbour waits for ever (the "
           "checker stopped them). Skip the fold of a chunk in the future, never its pass.")
EXTRA_PASS = ("right numbers, but rank {rank} called pass_on {hops} times on a ring of {world} ({said}): the last pass "
              "sends a chunk that no rank folds, the whole chunk's bytes for nothing. A ring of P ranks folds P "
              "chunks and passes P - 1 times: pass after every fold but the last.")
NO_SKIP = ("right numbers, but with is_causal=True rank {rank} folded {folds} chunks where {due} have a key its "
           "queries may see (the trial '{trial}'): a chunk whose every key is in the future adds nothing but its "
           "cost, and the exercise asks to skip its fold (if not allowed.any(): fold nothing; pass it on all the "
           "same).")
IN_FLOAT32 = ("right to float32's precision, not to float64's: the trials run in float64, so the running state must "
              "too. Start it in the inputs' dtype (query.new_full(...), query.new_zeros(...)), and leave out .float() "
              "and dtype=torch.float32.")
GATHERED = ("right numbers, but not a ring: at its peak rank {rank} held {held:.1f} KiB during your function, where "
            "the package's ring holds {ring:.1f} KiB, {extra:.1f} more key/value chunks (one is {chunk:.1f} KiB). "
            "That is what collecting every chunk before computing does (an all-gather): no correctness check can "
            "tell it from a ring, only the bytes each rank holds. Fold each chunk as it arrives and let it go.")


def _said(trial, world: int) -> str:
    return (f"the trial '{trial.name}' (n = {trials.C * world} positions, world {world}, each rank's query "
            f"{(trials.BATCH, trials.HEADS, trials.C, trials.E)})")


def _alone(fn) -> CheckResult | None:
    """The answer alone, a ring of one in this process: not attempted, crashes, refusals and wrong results."""
    for trial in TRIALS[:2]:
        q, k, v = whole_sequence(trial, 1)
        args = (q, k, v, [torch.arange(q.shape[-2])], 0, trial.is_causal, PassOn())
        run = run_learner(fn, args, ALLOWED)
        if run.refused is not None:
            return CheckResult("failed", f"❌ {NAME}: not allowed here. Hint: {run.refused}")
        if isinstance(run.error, NotImplementedError) and run.failed_op is None or run.result is None:
            return CheckResult("not attempted", f"📝 {NAME}: not attempted yet. Replace `raise NotImplementedError` "
                               f"with your code (and return the output) and run this cell again.")
        if run.error is not None:
            return CheckResult("error", explain_crash(NAME, run.error, args, params=PARAMS, failed_op=run.failed_op))
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=trial.is_causal)
        differs = difference(run.result, expected, 1e-9, 1e-7)
        if differs is not None:
            slip = next((s for s in SLIPS if difference(simulate(q, k, v, args[3], 0, trial.is_causal, s),
                                                        run.result, 1e-9, 1e-7) is None), None)
            hint = SLIPS[slip] if slip else IN_FLOAT32 if difference(run.result, expected, 1e-5, 1e-4) is None else (
                "a ring of one folds its own chunk once: that is attention as in SDPA.")
            if slip in ("the last hop skipped", "the own chunk skipped"):
                hint = ("alone, a rank holds one chunk, its own, and must fold it once: your loop folded none (0 / 0 "
                        "is nan). The loop runs world times: fold the chunk held, then pass it on (world - 1 passes).")
            return CheckResult("failed", f"❌ {NAME}: alone (a ring of one process, is_causal={trial.is_causal}, "
                               f"query {tuple(q.shape)}) your function differs from SDPA: {differs}. Hint: {hint}")
    return None


def check_ring_forward(fn, processes: ProcessRing) -> CheckResult:
    """Check the learner's ``ring_forward``, the hop-loop exercise of ``notebooks/16_ring_attention.ipynb``.

    Args:
        fn: ``(query, key, value, positions, rank, is_causal, pass_on) -> output``, one rank's hop loop.
        processes: a running :class:`~attention_lib.distributed.ProcessRing` of at least 3 processes.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).
    """
    said = _alone(fn)
    if said is not None:
        return said
    if not isinstance(processes, ProcessRing) or processes.world < 3:
        return CheckResult("error", f"💥 {NAME}: the checker runs your function on a running ProcessRing of at least "
                           f"3 processes (the lesson's ring4), but got {processes!r}.")
    try:
        shipped = ship(fn)
    except NotShippable as why:
        return CheckResult("error", f"💥 {NAME}: {why}")
    try:
        per_rank = processes.run(trials.hop_loop_worker, shipped)
    except (RuntimeError, TimeoutError) as error:
        return CheckResult("error", f"💥 {NAME}: the ring stopped ({str(error).splitlines()[0]}); start it again "
                           f"(ProcessRing(4)) and look for a pass_on that some rank never reaches.")
    return _verdict(per_rank)


def _verdict(per_rank: list[dict]) -> CheckResult:
    world = len(per_rank)
    if "setup" in per_rank[0]:
        return CheckResult("error", f"💥 {NAME}: your function could not be rebuilt in the ring's processes: "
                           f"{per_rank[0]['setup']}")
    for index, trial in enumerate(TRIALS):
        reports = [p["reports"][index] for p in per_rank]
        for rank, report in enumerate(reports):
            for key in ("refused", "error"):
                if key == "refused" and key in report:
                    return CheckResult("failed", f"❌ {NAME}: not allowed here (rank {rank}, {_said(trial, world)}). "
                                       f"Hint: {report[key]}")
                if key in report:
                    return CheckResult("error", f"{report[key]}\n(On rank {rank}, {_said(trial, world)}.)")
        if any("stopped" in r for r in reports):
            counts = "calls of pass_on " + ", ".join(f"rank {r}: {report['hops']}" for r, report in enumerate(reports))
            return CheckResult("failed", f"❌ {NAME}: on {_said(trial, world)}, {STOPPED.format(counts=counts)}")
        wrong = _wrong_ranks(trial, reports, world)
        if wrong:
            wrong = _kept_between_calls(index, per_rank) or wrong
            return CheckResult("failed", f"❌ {NAME}: {wrong}")
    said = _wasted(per_rank)
    if said is not None:
        return CheckResult("failed", f"❌ {NAME}: {said}")
    for rank, p in enumerate(per_rank):
        changed = next((r for r in p["reports"] if r["changed"]), None)
        if changed is not None:
            ops = ", ".join(changed["in_place"]) or "an in-place operation"
            return CheckResult("failed", f"❌ {NAME}: right numbers, but on rank {rank} "
                               + CHANGED_INPUT.format(name=changed["changed"][0], ops=ops))
        report = p["reports"][0]
        if report["peak"] > report["ring_peak"] + 0.75 * report["chunk"]:
            return CheckResult("failed", f"❌ {NAME}: " + GATHERED.format(
                rank=rank, held=report["peak"] / 1024, ring=report["ring_peak"] / 1024, chunk=report["chunk"] / 1024,
                extra=(report["peak"] - report["ring_peak"]) / report["chunk"]))
    return CheckResult("passed", f"✅ {NAME}: right on every rank of a ring of {world} processes, on {len(TRIALS)} "
                       f"trials ({'; '.join(t.name for t in TRIALS)}), inputs left as they were, and no rank held "
                       f"more key/value chunks than the package's ring. Well done!")


def _wasted(per_rank: list[dict]) -> str | None:
    """A pass too many, or a fold of a chunk wholly in the future, of an answer with right numbers (``None`` if
    neither). Folds are counted only when the learner folds with ``online_softmax_update``."""
    world = len(per_rank)
    for index, trial in enumerate(TRIALS):
        for rank, p in enumerate(per_rank):
            report = p["reports"][index]
            if report["hops"] > world - 1:
                return EXTRA_PASS.format(rank=rank, hops=report["hops"], world=world, said=_said(trial, world))
            due = trials.folds_due(trial, world, rank)
            if report.get("folds", 0) > due:
                return NO_SKIP.format(rank=rank, folds=report["folds"], due=due, trial=trial.name)
    return None


def _kept_between_calls(index: int, per_rank: list[dict]) -> str | None:
    """A wrong result of trial ``index`` that equals another trial's (other inputs): kept between calls."""
    trial, world = TRIALS[index], len(per_rank)
    expected = F.scaled_dot_product_attention(*whole_sequence(trial, world), is_causal=trial.is_causal)
    for rank, p in enumerate(per_rank):
        mine = p["reports"][index].get("result")
        right = expected[..., trials.positions_of(trial, world)[rank], :]
        if not isinstance(mine, torch.Tensor) or mine.shape != right.shape or difference(mine, right) is None:
            continue
        for other, report in zip(TRIALS, p["reports"], strict=True):
            theirs = report.get("result")
            if (other.seed != trial.seed and isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor)
                    and mine.shape == theirs.shape and torch.equal(mine, theirs)):
                return (f"on {_said(trial, len(per_rank))}, rank {rank} returned exactly its result of the trial "
                        f"'{other.name}', whose inputs differ: your function keeps something between calls (a "
                        f"result remembered for a shape, or a buffer it returns and a later call overwrites). "
                        f"Compute every call afresh and return a new tensor.")
    return None


def _wrong_ranks(trial, reports: list[dict], world: int) -> str | None:
    """What is wrong with the ranks' results of ``trial``, or ``None`` when every rank is right."""
    q, k, v = whole_sequence(trial, world)
    positions = trials.positions_of(trial, world)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=trial.is_causal)
    atol, rtol = (1e-9, 1e-7) if trial.dtype == torch.float64 else (1e-5, 1e-4)
    bad = {}
    for rank, report in enumerate(reports):
        if "result" not in report:
            return (f"on {_said(trial, world)}, rank {rank} returned {report.get('returned')}, not this rank's "
                    f"output tensor (a branch or a loop misses this case?).")
        mine = expected[..., positions[rank], :]
        if report["result"].shape != mine.shape:
            return (f"on {_said(trial, world)}, rank {rank}'s output has shape {tuple(report['result'].shape)}, but "
                    f"a rank's output is {tuple(mine.shape)}: its C = {trials.C} queries, each a blend of values of "
                    f"size {v.shape[-1]} (value.shape[-1], which need not be E).")
        differs = difference(report["result"], mine, atol, rtol)
        if differs is not None:
            bad[rank] = differs
    if not bad:
        return None
    first = min(bad)
    where = (f"on {_said(trial, world)}, ranks {sorted(bad)} are wrong"
             + (f" and {sorted(set(range(world)) - set(bad))} right" if len(bad) < world else "")
             + f"; rank {first} (global positions {positions[first].tolist()}): {bad[first]}.")
    results = [r["result"] for r in reports]
    for slip, hint in SLIPS.items():
        if all(difference(simulate(q, k, v, positions, r, trial.is_causal, slip), results[r], atol, rtol) is None
               for r in range(world)):
            return f"{where} Hint: {hint}"
    if trial.dtype == torch.float64 and all(
            difference(results[r], expected[..., positions[r], :], 1e-5, 1e-4) is None for r in range(world)):
        return f"{where} Hint: {IN_FLOAT32}"
    return f"{where} Hint: {_trial_hint(trial)}"


def _trial_hint(trial) -> str:
    if trial.name.startswith("the first trial again"):
        return ("the same inputs as the first trial gave another result now: your function keeps something between "
                "calls (a cache, or a buffer it returns a view of, overwritten by a later call). Compute every call "
                "afresh and return a new tensor.")
    if trial.loud != 1.0:
        return ("on loud scores exp overflows unless the running max is subtracted before it: fold with "
                "online_softmax_update, which does.")
    if trial.transposed:
        return ("the inputs are views here whose dimensions are all out of memory order (not contiguous): use "
                ".reshape, not .view, and index along the last two dimensions only.")
    if trial.layout == "zigzag":
        return ("the positions here are the zigzag layout's (two chunks per rank): take a chunk's positions from "
                "positions[source] rather than computing them from rank * C.")
    return "each rank folds every chunk that arrives, with the mask from the global positions when is_causal."
