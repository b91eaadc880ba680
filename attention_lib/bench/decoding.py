"""The benchmark's decoding part: time per generated token by prefix length, with and without a key/value cache.

Run with the rest by ``python -m attention_lib.bench``, or alone (in well under a minute with ``--quick``) by
``python -m attention_lib.bench --decoding``. The model is a :class:`~attention_lib.TinyLlama` of lesson 15's
shape, wider (width 64, 4 heads, 2 layers, random weights: time does not depend on them). For each prefix
length ``P`` three ways of writing the next token are timed, interleaved, with medians:

- **no cache**: the model reads all ``P + 1`` tokens again (what ``generate(..., use_cache=False)`` does);
- **cache**: it reads the new token only, with a :class:`~attention_lib.KVCache` pre-allocated for every position;
- **grown cache**: the same, with a cache that grows by ``torch.cat`` at every step (a copy of all the past, as
  transformers' ``DynamicCache`` does).

The targets: with the cache, a token at a 2,048 prefix at least 15x faster than without; and the cached
per-token time grows at most 2x from a 128 to a 2,048 prefix.
"""

from __future__ import annotations

import statistics
import time

import torch

from ..cache import KVCache
from ..llama import TinyLlama

#: The model timed: lesson 15's architecture, at the width of the issue's prototype.
SHAPE = {"vocab_size": 32, "embed_dim": 64, "num_heads": 4, "num_layers": 2, "mlp_dim": 128}
METHODS = ("no cache", "cache", "grown cache")


class GrownCache(KVCache):
    """A cache that keeps no room ahead: each update concatenates the past with the new keys (a copy of both)."""

    def update(self, key, value, layer_idx):
        layer_idx = self._check(key, value, layer_idx)
        if self.keys[layer_idx] is None:
            self.keys[layer_idx], self.values[layer_idx] = key, value
        else:  # (N, Hkv, S, Dh) + (N, Hkv, L, Dh) -> a new (N, Hkv, S + L, Dh): the whole past copied
            self.keys[layer_idx] = torch.cat([self.keys[layer_idx], key], dim=2)
            self.values[layer_idx] = torch.cat([self.values[layer_idx], value], dim=2)
        self._seen[layer_idx] += key.shape[2]
        return self.keys[layer_idx], self.values[layer_idx]


def _step_times(model: TinyLlama, tokens: torch.Tensor, method: str, steps: int) -> list[float]:
    """Seconds of each of ``steps`` next-token steps after the prefix ``tokens (1, P)``."""
    P = tokens.shape[1]
    new = tokens[:, -1:]
    times = []
    if method == "no cache":
        for t in range(steps):
            text = torch.cat([tokens, new.expand(1, t + 1)], dim=1)  # (1, P + t + 1): read it all again
            start = time.perf_counter()
            model(text)
            times.append(time.perf_counter() - start)
        return times
    cache = (KVCache if method == "cache" else GrownCache)(len(model.layers), P + steps)
    model(tokens, cache)  # the prefill, untimed
    for _ in range(steps):
        start = time.perf_counter()
        model(new, cache)  # one token in
        times.append(time.perf_counter() - start)
    return times


@torch.no_grad()
def time_decoding(prefixes=(16, 128, 512, 1024, 2048), *, repeats: int = 3, steps: int = 8, seed: int = 0
                  ) -> dict[tuple[str, int], float]:
    """Median seconds per generated token, ``{(method, prefix): seconds}``, for each method of :data:`METHODS`.

    Each repeat times every method in an order that rotates from repeat to repeat (so a slow moment of the
    machine hits all alike); a method's time at a prefix is the median over its repeats of the median step.

    Example:
        >>> times = time_decoding((4, 8), repeats=1, steps=2)
        >>> sorted(times) == sorted((m, p) for m in METHODS for p in (4, 8))
        True
    """
    torch.manual_seed(seed)
    model = TinyLlama(**SHAPE).eval()
    result = {}
    for P in prefixes:
        tokens = torch.randint(0, SHAPE["vocab_size"], (1, P), generator=torch.Generator().manual_seed(seed))
        per = {m: [] for m in METHODS}
        for m in METHODS:
            _step_times(model, tokens[:, :min(P, 16)], m, 1)  # warm up
        for r in range(repeats):
            for m in METHODS[r % 3:] + METHODS[:r % 3]:
                per[m].append(statistics.median(_step_times(model, tokens, m, steps)))
        result |= {(m, P): statistics.median(per[m]) for m in METHODS}
    return result


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
    targets = decoding_targets(times)
    print("\n== decoding targets (a target is judged on a quiet machine)")
    for text, value, sign, limit in targets:
        if value is None:
            print(f"  {'not measured':<12} {text} (run the prefixes 128 and 2048)")
        else:
            met = value >= limit if sign == ">=" else value <= limit
            print(f"  {'met' if met else 'MISSED':<12} {text}: {value:.2f}")
    return targets


def run_decoding(quick: bool = False, repeats: int | None = None) -> dict:
    """Time, print and return ``{"times": ..., "targets": ...}`` (``quick``: prefixes 16 to 512, fewer steps)."""
    prefixes = (16, 128, 512) if quick else (16, 128, 512, 1024, 2048)
    repeats = repeats or (3 if quick else 5)
    steps = 4 if quick else 8
    times = time_decoding(prefixes, repeats=repeats, steps=steps)
    return {"times": times, "targets": print_decoding(times, repeats, steps)}
