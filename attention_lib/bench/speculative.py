"""The benchmark's speculative part: lesson 15's shipped model writing with lesson 18's drafts, against itself alone.

Run with the decoding part by ``python -m attention_lib.bench [--quick] --decoding``. Lesson 18
(``notebooks/18_speculative_decoding.ipynb``) builds it. The target model is lesson 15's shipped ``mha`` seed-0 model;
the drafts are lesson 18's distilled seed-0 drafts: the one-block draft (methods ``k=K``) and the table of no layers,
:func:`~attention_lib.training.speculative_decoding.table_draft`, a bigram model distilled from the target's own
greedy texts (methods ``table k=K``). Each text is one of lesson 15's held-out-seed sentences cut after its first two
words, written greedily to the end of the target's sentence. For every text the methods take turns (plain cached
greedy, then speculative decoding with each draft and ``k``, in an order that rotates from text to text), so that a
machine whose speed drifts slows each alike; a method's time is its total over the texts, one per repeat, and a
ratio is the median of the per-repeat ratios. Every speculative text is checked identical to the plain one.

The target: with the distilled table at ``k = 5`` (:data:`TARGET_K`), speculative decoding at least 1.3x faster than
plain cached greedy, with identical text. The one-block draft is timed beside it: at this size a step's cost is
mostly Python's work per layer, so its step costs about half the target's (``c``, printed) and its speed-up stays
near ``tokens per call / (1 + k*c)``; the table's step is a row lookup.
"""

from __future__ import annotations

import statistics
import time

import torch

from ..experiments.speculative_decoding import time_call
from ..generation import generate
from ..speculative import speculative_rounds
from ..training.shipped import load_shipped
from ..training.speculative_decoding import make_texts, sentence_length, table_draft
from .decoding import run_decoding
from .serving import run_serving
from .targets import print_target_lines

KS = (1, 2, 3, 4, 5, 6, 8)
TARGET_K = 5
#: The ``k`` at which the table draft is timed (the target is at :data:`TARGET_K`).
TABLE_KS = (5, 8)


def _texts(n: int):
    target = load_shipped("generation-mha-seed0").model
    draft = load_shipped("draft-distilled-seed0").model
    prompts = [text[:3] for text in make_texts(n, seed=1234)]
    return target, draft, prompts, [sentence_length(target, p) for p in prompts]


@torch.no_grad()
def time_speculative(ks=KS, *, texts: int = 40, repeats: int = 3, threads: int | None = 1, table_ks=()) -> dict:
    """Seconds per repeat of each method over ``texts`` texts, and tokens per target call at each ``k``.

    ``threads``: time on that many torch threads, restored afterwards (``None``: as they are). ``table_ks``: also
    time the :func:`table_draft` at these ``k`` (methods ``"table k=K"``; their tokens per call under the same name).

    Returns:
        ``{"times": {"plain": [s per repeat], "k=1": [...], ...}, "per call": {k: tokens per target call},
        "tokens": tokens written per repeat, "identical": True, "draft step / target step": c, "verify / target
        step": v, "verify rows": max(ks) + 1}``, ``c`` the median ratio of one decoding step of each (what each
        drafted token costs, in target steps), ``v`` what one target call over ``max(ks) + 1`` new tokens costs.

    Raises:
        AssertionError: if a speculative text differs from the plain one.

    Example:
        >>> result = time_speculative((2,), texts=2, repeats=1)
        >>> sorted(result["times"]), result["identical"]
        (['k=2', 'plain'], True)
    """
    before = torch.get_num_threads()
    torch.set_num_threads(before if threads is None else threads)
    try:
        target, draft, prompts, lengths = _texts(texts)
        drafts = {f"k={k}": (draft, k) for k in ks}
        if table_ks:
            table = table_draft(target)
            drafts |= {f"table k={k}": (table, k) for k in table_ks}
        names = ["plain", *drafts]
        times = {m: [0.0] * repeats for m in names}
        calls = dict.fromkeys(drafts, 0)
        for r in range(repeats):
            for i, (prompt, n) in enumerate(zip(prompts, lengths, strict=True)):
                first = (r + i) % len(names)
                written = {}
                for m in names[first:] + names[:first]:
                    start = time.perf_counter()
                    if m == "plain":
                        written[m] = generate(target, prompt[None], n)
                    else:
                        rounds = list(speculative_rounds(target, drafts[m][0], prompt[None], n,
                                                         num_draft_tokens=drafts[m][1]))
                        written[m] = rounds[-1].tokens
                    times[m][r] += time.perf_counter() - start
                    if m != "plain" and r == 0:
                        calls[m] += len(rounds)
                for m in names[1:]:
                    assert torch.equal(written[m], written["plain"]), f"{m} wrote another text than plain greedy"
        step = [time_call(target, 1) for _ in range(3)]
        cost = statistics.median(time_call(draft, 1) / s for s in step)
        verify = statistics.median(time_call(target, max(ks) + 1) / s for s in step)
        per_call = {int(m[2:]) if m.startswith("k=") else m: sum(lengths) / calls[m] for m in drafts}
        result = {"times": times, "per call": per_call, "tokens": sum(lengths), "identical": True,
                  "draft step / target step": cost, "verify / target step": verify, "verify rows": max(ks) + 1}
        if table_ks:
            result["table step / target step"] = statistics.median(time_call(table, 1) / s for s in step)
        return result
    finally:
        torch.set_num_threads(before)


def speedups(result: dict) -> dict[str, float]:
    """``{"k=K": median over repeats of plain's time / speculative's}``."""
    plain = result["times"]["plain"]
    return {m: statistics.median(p / s for p, s in zip(plain, t, strict=True))
            for m, t in result["times"].items() if m != "plain"}


def speculative_targets(result: dict) -> list[tuple[str, float | None, str, float]]:
    """``[(text, value or None, ">=", limit)]``: the target, ``None`` where the table at ``k = 5`` was not run."""
    value = speedups(result).get(f"table k={TARGET_K}") if result.get("identical") else None
    return [(f"speculative: shipped lesson 15 model with its distilled table draft, k={TARGET_K}, >= 1.3x faster "
             f"than plain cached greedy, identical text", value, ">=", 1.3)]


def print_speculative(result: dict, repeats: int) -> list:
    """Print the table and the target (met, MISSED or not measured); return the targets."""
    tokens = result["tokens"]
    print(f"\n== speculative decoding (CPU, torch threads 1): lesson 15's shipped model (2 blocks, E=32) with lesson "
          f"18's distilled drafts (k=K: 1 block, E=16; table k=K: no layers), {tokens} tokens over the texts, greedy; "
          f"totals of {repeats} repeats, the methods taking turns text by text; every text identical to plain greedy")
    plain = statistics.median(result["times"]["plain"])
    print(f"  {'method':>11}  {'ms per token':>12}  {'tokens per target call':>22}  {'speed-up':>8}")
    print(f"  {'plain':>11}  {plain / tokens * 1e3:>12.3f}  {1.0:>22.2f}  {1.0:>8.2f}")
    for m, ratio in speedups(result).items():
        per_token = statistics.median(result["times"][m]) / tokens * 1e3
        calls = result["per call"][int(m[2:]) if m.startswith("k=") else m]
        print(f"  {m:>11}  {per_token:>12.3f}  {calls:>22.2f}  {ratio:>8.2f}")
    c, v = result.get("draft step / target step"), result.get("verify / target step")
    if c is not None and v is not None:
        print(f"  one draft step costs c = {c:.2f} target steps and one verify call over {result['verify rows']} new "
              f"tokens v = {v:.2f}: a round of k drafts costs about v + k*c target steps and writes the tokens per "
              f"target call above, so the speed-up is at most about their ratio")
    if "table step / target step" in result:
        print(f"  table k=K: a draft of no layers, a bigram table distilled from the target's own greedy texts; its "
              f"step costs c = {result['table step / target step']:.3f} target steps")
    return print_target_lines("speculative target (a target is judged on a quiet machine)",
                              speculative_targets(result), unmeasured=f"run table k={TARGET_K}")


def run_speculative(quick: bool = False, repeats: int | None = None) -> dict:
    """Time, print and return ``{"result": ..., "targets": ...}`` (``quick``: 12 texts, 2 repeats)."""
    repeats = repeats or (2 if quick else 3)
    result = time_speculative(KS, texts=12 if quick else 40, repeats=repeats, table_ks=TABLE_KS)
    return {"result": result, "targets": print_speculative(result, repeats)}


def run_decoding_parts(quick: bool = False) -> dict:
    """The parts of ``--decoding``, each timed, printed and returned: ``{"decoding", "serving", "speculative"}``."""
    return {"decoding": run_decoding(quick), "serving": run_serving(quick), "speculative": run_speculative(quick)}
