"""The benchmark's grouped-query part: one decoding step at a long context, for 16, 4 and 1 key/value heads.

Run with the rest by ``python -m attention_lib.bench``, or with the decoding part alone by ``python -m
attention_lib.bench --decoding`` (``--quick``: a 2,048-token context instead of 8,192, in seconds). One
:class:`~attention_lib.GroupedQueryAttention` layer (``E = 1024``, 16 query heads of 64, random weights, batch 1,
``need_weights=False``) reads one new token over a :class:`~attention_lib.KVCache` already holding ``S - 1``
positions. Timed interleaved with medians (:func:`~attention_lib.bench.measure.time_paired`); the cache is cropped
back before every step, so every step reads the same ``S`` keys. Its peak allocation is measured too
(:func:`~attention_lib.bench.measure.peak_memory`).

Why fewer KV heads should be faster in proportion: at one query per step the step does ``2 · H · S · Dh``
multiply-adds per product on ``2 · Hkv · S · Dh`` numbers of cache, so it reads each cached number about
``G = H / Hkv`` times and is bound by the memory it reads, not by arithmetic (Shazeer 2019; Pope et al., 2022;
Ainslie et al., 2023). The targets: 4 KV heads in at most 0.6x MHA's time, 1 KV head in at most 0.5x, and no step
allocating ``G`` times its cache (what broadcasting the group dimension did: an expanded copy of the keys).
That proportion is the memory-bound argument (a GPU at long context). The layer's step also runs its four
projections, whose weights shrink far less than the cache ((2 E² + 2 E · Hkv · Dh) numbers), so the attention core
alone, the folded queries against the cached keys and values (:func:`attention_core_step`), is timed too.
"""

from __future__ import annotations

import statistics

import torch

from ..attention import calculate_attention
from ..cache import KVCache
from ..grouped_query import GroupedQueryAttention, group_heads
from .measure import MiB, peak_memory, time_paired
from .targets import print_target_lines

#: The layer timed, and the key/value heads compared (16: MHA; 4: GQA, G = 4; 1: MQA, G = 16).
SHAPE = {"embed_dim": 1024, "num_heads": 16}
KV_HEADS = (16, 4, 1)
#: The targets: the step's time against MHA's, at most this.
TIME_TARGETS = {4: 0.6, 1: 0.5}


def prefilled_step(num_kv_heads: int, S: int, *, seed: int = 0):
    """One decoding step of a layer with ``num_kv_heads`` KV heads over ``S`` keys: ``(step, cache)``.

    ``step()`` crops the cache back to ``S - 1`` positions, then runs the layer on one new token, so each call
    reads the same ``S`` keys. The cache is filled with random keys and values (time does not depend on them).

    Example:
        >>> step, cache = prefilled_step(2, 8)
        >>> tuple(step().shape), cache.get_seq_length()
        ((1, 1, 1024), 8)
    """
    torch.manual_seed(seed)
    layer = GroupedQueryAttention(SHAPE["embed_dim"], SHAPE["num_heads"], num_kv_heads).eval()
    Dh = SHAPE["embed_dim"] // SHAPE["num_heads"]
    cache = KVCache(num_layers=1, max_cache_len=S)
    g = torch.Generator().manual_seed(seed)
    cache.update(torch.randn(1, num_kv_heads, S - 1, Dh, generator=g), torch.randn(1, num_kv_heads, S - 1, Dh,
                                                                                   generator=g), layer_idx=0)
    x = torch.randn(1, 1, SHAPE["embed_dim"], generator=g)  # (N, L, E): the new token

    @torch.no_grad()
    def step() -> torch.Tensor:
        cache.crop(S - 1)
        return layer(x, cache=cache)[0]  # (1, 1, E)

    return step, cache


def attention_core_step(num_kv_heads: int, S: int, *, seed: int = 0):
    """The attention of one decoding step alone, without the projections: ``core() -> (1, Hkv, G, Dh)``.

    One query per head, folded into its group's rows, ``(1, H, 1, Dh) -> (1, Hkv, G, Dh)``, against ``S`` cached
    keys and values ``(1, Hkv, S, Dh)``: what :class:`~attention_lib.GroupedQueryAttention` computes between its
    projections.

    Example:
        >>> tuple(attention_core_step(4, 8)().shape)
        (1, 4, 4, 64)
    """
    H, Dh = SHAPE["num_heads"], SHAPE["embed_dim"] // SHAPE["num_heads"]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, H, 1, Dh, generator=g)  # (N, H, L, Dh): the new token's queries
    k, v = torch.randn(1, num_kv_heads, S, Dh, generator=g), torch.randn(1, num_kv_heads, S, Dh, generator=g)

    @torch.no_grad()
    def core() -> torch.Tensor:
        return calculate_attention(group_heads(q, num_kv_heads), k, v)[0]  # (1, Hkv, G, Dh)

    return core


def time_grouped_query(S: int = 8192, *, repeats: int = 7) -> dict[int, dict[str, float]]:
    """Per KV-head count: ``{"seconds": median step, "ratio": paired median ratio to MHA's step, "core_ratio":
    the same for the attention core alone (:func:`attention_core_step`), "cache_bytes": the layer's keys and
    values, "peak_bytes": the step's peak allocation}``.

    Example:
        >>> result = time_grouped_query(64, repeats=1)
        >>> sorted(result), result[16]["ratio"], result[16]["core_ratio"]
        ([1, 4, 16], 1.0, 1.0)
        >>> result[4]["cache_bytes"] * 4 == result[16]["cache_bytes"]
        True
    """
    steps = {kv: prefilled_step(kv, S) for kv in KV_HEADS}
    times = time_paired({kv: step for kv, (step, _) in steps.items()}, (), repeats)
    cores = time_paired({kv: attention_core_step(kv, S) for kv in KV_HEADS}, (), repeats)
    result = {}
    for kv, (step, cache) in steps.items():
        ratios = [a / b for a, b in zip(times[kv], times[KV_HEADS[0]], strict=True)]
        core_ratios = [a / b for a, b in zip(cores[kv], cores[KV_HEADS[0]], strict=True)]
        result[kv] = {"seconds": statistics.median(times[kv]), "ratio": statistics.median(ratios),
                      "core_ratio": statistics.median(core_ratios), "cache_bytes": cache.allocated_bytes(),
                      "peak_bytes": peak_memory(step)}
    return result


def grouped_query_targets(result: dict[int, dict[str, float]]) -> list[tuple[str, float, str, float]]:
    """``[(text, value, "<=" or "<", limit)]``: the time ratios, and each GQA/MQA step's peak over ``G`` x its cache.

    Example:
        >>> fake = {16: {"ratio": 1.0, "peak_bytes": 1, "cache_bytes": 16}, 4: {"ratio": 0.5, "peak_bytes": 1,
        ...         "cache_bytes": 4}, 1: {"ratio": 0.2, "peak_bytes": 1, "cache_bytes": 1}}
        >>> [round(t[1], 3) for t in grouped_query_targets(fake)]
        [0.5, 0.2, 0.062, 0.062]
    """
    H = SHAPE["num_heads"]
    targets = [(f"{kv} KV heads: a decoding step <= {limit}x MHA's time", result[kv]["ratio"], "<=", limit)
               for kv, limit in TIME_TARGETS.items()]
    targets += [(f"{kv} KV heads: the step's peak allocation < G = {H // kv} x its cache", result[kv]["peak_bytes"]
                 / (H // kv * result[kv]["cache_bytes"]), "<", 1.0) for kv in TIME_TARGETS]
    return targets


def print_grouped_query(result: dict[int, dict[str, float]], S: int, repeats: int) -> list:
    """Print the table and the targets (met or MISSED); return the targets."""
    print(f"\n== grouped-query attention (CPU): one decoding step at S={S:,}, GroupedQueryAttention {SHAPE} "
          f"(head size {SHAPE['embed_dim'] // SHAPE['num_heads']}), batch 1, need_weights=False, torch threads "
          f"{torch.get_num_threads()}; medians of {repeats} interleaved repeats")
    print(f"  {'KV heads':>8} {'G':>3} {'ms':>9} {'x MHA':>6} {'core x MHA':>10} {'cache MiB':>10} {'peak MiB':>9} "
          f"{'peak / (G x cache)':>19}")
    for kv, r in result.items():
        G = SHAPE["num_heads"] // kv
        core = r.get("core_ratio", float("nan"))
        print(f"  {kv:>8} {G:>3} {r['seconds'] * 1e3:>9.3f} {r['ratio']:>6.2f} {core:>10.2f} "
              f"{r['cache_bytes'] / MiB:>10.2f} "
              f"{r['peak_bytes'] / MiB:>9.3f} {r['peak_bytes'] / (G * r['cache_bytes']):>19.4f}")
    return print_target_lines("grouped-query targets (a time target is judged on a quiet machine)",
                              grouped_query_targets(result), digits=3)


def run_grouped_query(quick: bool = False, repeats: int | None = None) -> dict:
    """Time, print and return ``{"S": ..., "result": ..., "targets": ...}`` (``quick``: S = 2,048, fewer repeats)."""
    S, repeats = (2048 if quick else 8192), repeats or (5 if quick else 15)
    result = time_grouped_query(S, repeats=repeats)
    return {"S": S, "result": result, "targets": print_grouped_query(result, S, repeats)}
