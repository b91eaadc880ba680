"""The benchmark's decoding part: time per generated token by prefix length, with and without a key/value cache.

Run with the rest by ``python -m attention_lib.bench``, or alone (in well under a minute with ``--quick``) by
``python -m attention_lib.bench --decoding``. The model is a :class:`~attention_lib.TinyLlama` of lesson 15's
shape, wider (width 64, 4 heads, 2 layers, random weights: time does not depend on them). For each prefix
length ``P`` three ways of writing the next token are timed, interleaved, with medians:

- **no cache**: the model reads all ``P + 1`` tokens again (what ``generate(..., use_cache=False)`` does);
- **cache**: it reads the new token only, with a :class:`~attention_lib.KVCache` pre-allocated for every position;
- **grown cache**: the same, with a :class:`~attention_lib.ConcatCache`, which grows by ``torch.cat`` at every step
  (a copy of all the past, as transformers' ``DynamicCache`` does).

Every way runs the package's one decoding loop, :func:`~attention_lib.generation.generation_steps`, timed by the
one per-token timer, :func:`time_per_token` (lesson 15's timing cell calls it too). The grouped-query part,
:mod:`attention_lib.bench.grouped_query`, times one attention step at a long context for 16, 4 and 1 KV heads.

The targets: with the cache, a token at a 2,048 prefix at least 15x faster than without; and the cached
per-token time grows at most 2x from a 128 to a 2,048 prefix.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch

from ..cache import ConcatCache
from ..generation import generation_steps
from ..llama import TinyLlama
from .grouped_query import run_grouped_query
from .targets import print_target_lines

#: The model timed: lesson 15's architecture, at the width of the issue's prototype.
SHAPE = {"vocab_size": 32, "embed_dim": 64, "num_heads": 4, "num_layers": 2, "mlp_dim": 128}
METHODS = ("no cache", "cache", "grown cache")


@torch.no_grad()
def time_per_token(model, prefixes: Sequence[int] = (4, 16, 64, 256, 1024), *, repeats: int = 5, steps: int = 4,
                   ways: Sequence[str] = ("no cache", "cache"), vocab: int | None = None,
                   seed: int = 0) -> dict[str, list[float]]:
    """Median seconds to write one token after a prefix of each length, ``{way: [seconds per prefix]}``.

    Built step by step in ``notebooks/15_generation.ipynb``; the benchmark's decoding table. Each way (of
    :data:`METHODS`) runs :func:`~attention_lib.generation.generation_steps` on a random prefix of ``P`` tokens and
    times each of its ``steps`` later steps (the prefill is not timed): without a cache a step reads the whole text
    again, with one it reads the new token only. The ways run interleaved, in an order that rotates from repeat to
    repeat (so a slow moment of the machine hits all alike), after one untimed round; a way's time at a prefix is
    the median over repeats of the median step.

    Raises:
        ValueError: for a way that is not one of :data:`METHODS`.

    Example:
        >>> model = TinyLlama(vocab_size=10).eval()
        >>> times = time_per_token(model, (4, 8), repeats=1, steps=2)
        >>> sorted(times), len(times["cache"])
        (['cache', 'no cache'], 2)
    """
    unknown = [w for w in ways if w not in METHODS]
    if unknown:
        raise ValueError(f"ways must be among {list(METHODS)}, but got {unknown}.")
    vocab = model.config["vocab_size"] if vocab is None else vocab
    caches = {"no cache": None, "cache": None, "grown cache": ConcatCache}
    result: dict[str, list[float]] = {w: [] for w in ways}
    for P in prefixes:
        prefix = torch.randint(0, vocab, (1, P), generator=torch.Generator().manual_seed(seed + P))
        per: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(repeats + 1):  # round 0 warms up
            for way in ways[r % len(ways):] + ways[:r % len(ways)]:
                cache = None if caches[way] is None else caches[way](len(model.layers), P + steps + 1)
                run = generation_steps(model, prefix, steps + 1, use_cache=way != "no cache", cache=cache)
                next(run)  # the prefill and the first token: not timed
                times = []
                for _ in range(steps):
                    start = time.perf_counter()
                    next(run)  # one step: the model reads the new token (or the whole text) and writes the next
                    times.append(time.perf_counter() - start)
                if r:
                    per[way].append(statistics.median(times))
        for way in ways:
            result[way].append(statistics.median(per[way]))
    return result


def time_decoding(prefixes=(16, 128, 512, 1024, 2048), *, repeats: int = 3, steps: int = 8, seed: int = 0
                  ) -> dict[tuple[str, int], float]:
    """Median seconds per generated token, ``{(method, prefix): seconds}``, for each method of :data:`METHODS`, on
    the benchmark's model (:data:`SHAPE`), by :func:`time_per_token`.

    Example:
        >>> times = time_decoding((4, 8), repeats=1, steps=2)
        >>> sorted(times) == sorted((m, p) for m in METHODS for p in (4, 8))
        True
    """
    torch.manual_seed(seed)
    model = TinyLlama(**SHAPE).eval()
    times = time_per_token(model, prefixes, repeats=repeats, steps=steps, ways=METHODS, seed=seed)
    return {(m, P): times[m][i] for m in METHODS for i, P in enumerate(prefixes)}


def decoding_targets(times: dict[tuple[str, int], float]) -> list[tuple[str, float | None, str, float]]:
    """The decoding targets: ``[(text, value or None, ">=" or "<=", limit)]``, ``None`` where not measured."""

    def ratio(a, b):
        return times[a] / times[b] if a in times and b in times else None

    return [("cache: per-token time at a 2,048 prefix >= 15x faster than no cache",
             ratio(("no cache", 2048), ("cache", 2048)), ">=", 15.0),
            ("cache: per-token time grows <= 2x from a 128 to a 2,048 prefix",
             ratio(("cache", 2048), ("cache", 128)), "<=", 2.0)]


def print_decoding(times: dict[tuple[str, int], float], repeats: int, steps: int) -> list:
    """Print the table and the targets (met, MISSED or not measured); return the targets."""
    prefixes = sorted({p for _, p in times})
    print(f"\n== decoding (CPU): time per generated token (ms) by prefix length, TinyLlama {SHAPE} (random "
          f"weights), batch 1, torch threads {torch.get_num_threads()}; medians of {repeats} interleaved repeats of "
          f"{steps} steps")
    print(f"  {'prefix':>6}  " + "  ".join(f"{m:>12}" for m in METHODS) + f"  {'no cache / cache':>16}"
          f"  {'grown / cache':>13}")
    for P in prefixes:
        row = "  ".join(f"{times[m, P] * 1e3:>12.3f}" for m in METHODS)
        print(f"  {P:>6}  {row}  {times['no cache', P] / times['cache', P]:>16.1f}  "
              f"{times['grown cache', P] / times['cache', P]:>13.2f}")
    return print_target_lines("decoding targets (a target is judged on a quiet machine)", decoding_targets(times),
                              unmeasured="run the prefixes 128 and 2048")


def run_decoding(quick: bool = False, repeats: int | None = None) -> dict:
    """Time, print and return ``{"times": ..., "targets": ..., "grouped_query": ...}`` (``quick``: prefixes 16 to
    512, fewer steps, and the grouped-query step at S = 2,048 instead of 8,192)."""
    prefixes = (16, 128, 512) if quick else (16, 128, 512, 1024, 2048)
    repeats = repeats or (3 if quick else 5)
    steps = 4 if quick else 8
    times = time_decoding(prefixes, repeats=repeats, steps=steps)
    return {"times": times, "targets": print_decoding(times, repeats, steps),
            "grouped_query": run_grouped_query(quick)}
