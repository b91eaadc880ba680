"""The benchmark's linear-attention part: one decoding step after ``S`` tokens, with a fixed-size state and with a
key/value cache.

Run with the decoding part by ``python -m attention_lib.bench --decoding``, or alone by ``python -m
attention_lib.bench --part linear``. Lesson 19 (``notebooks/19_linear_attention.ipynb``) builds it. Batch 1, 16
heads of 64, one new token (its query, key and value drawn at random: time does not depend on them), after ``S``
tokens, three ways:

- **linear**: :func:`~attention_lib.recurrent_linear_attention` on the one token, from the state the ``S - 1``
  tokens before it left (``(16, 64, 64)`` numbers and a normaliser, whatever ``S``);
- **gated delta**: :func:`~attention_lib.recurrent_gated_delta_rule` likewise (a ``(16, 64, 64)`` state);
- **softmax + cache**: lesson 15's :class:`~attention_lib.KVCache` holding ``S - 1`` keys and values, cropped back
  before every step, the new key and value written, then :func:`~attention_lib.calculate_attention`
  (``need_weights=False``) over the ``S`` of them.

Each way's lengths take turns in a paired timing (:func:`~attention_lib.bench.measure.time_paired`), so a slow
moment of the machine hits them alike and a step only follows steps of its own way; a ratio is the median of the
per-repeat ratios. The targets: a linear
step (and a gated-delta step) at ``S = 8,192`` costs at most 1.2x its step at ``S = 128``; the softmax step's growth
is printed beside them.
"""

from __future__ import annotations

import statistics

import torch

from ..attention import calculate_attention
from ..cache import KVCache
from ..delta_rule import chunk_gated_delta_rule, recurrent_gated_delta_rule
from ..linear_attention import chunk_linear_attention, recurrent_linear_attention
from .measure import time_paired
from .targets import print_target_lines

#: The heads and head size timed, and the two lengths the targets compare.
HEADS, HEAD_DIM = 16, 64
SHORT, LONG = 128, 8192
WAYS = ("linear", "gated delta", "softmax + cache")
#: The most a fixed-size state's step may cost at ``LONG`` against ``SHORT``.
LIMIT = 1.2


def decoding_step(way: str, S: int, *, seed: int = 0):
    """One decoding step of ``way`` (one of :data:`WAYS`) after ``S - 1`` tokens: a function of no arguments.

    The state (or the cache) is made once from ``S - 1`` random tokens; each call reads it and the new token and
    returns the new token's output ``(1, HEADS, 1, HEAD_DIM)``, leaving the state (or the cropped cache) as it was.

    Raises:
        ValueError: for a way that is not one of :data:`WAYS`.

    Example:
        >>> [tuple(decoding_step(way, 8)().shape) for way in WAYS]
        [(1, 16, 1, 64), (1, 16, 1, 64), (1, 16, 1, 64)]
    """
    if way not in WAYS:
        raise ValueError(f"way must be one of {list(WAYS)}, but got {way!r}.")
    g = torch.Generator().manual_seed(seed)
    past = [torch.randn(1, HEADS, S - 1, HEAD_DIM, generator=g) for _ in range(3)]   # (N, H, S - 1, D): q, k, v
    new = [torch.randn(1, HEADS, 1, HEAD_DIM, generator=g) for _ in range(3)]        # (N, H, 1, D)
    gates = (-torch.rand(1, HEADS, S, generator=g) * 0.1, torch.rand(1, HEADS, S, generator=g))
    with torch.no_grad():
        if way == "linear":
            _, state = chunk_linear_attention(*past)

            def step():
                return recurrent_linear_attention(*new, initial_state=state)[0]
        elif way == "gated delta":
            _, state = chunk_gated_delta_rule(*past, gates[0][..., :-1], gates[1][..., :-1], use_qk_l2norm=True)

            def step():
                return recurrent_gated_delta_rule(*new, gates[0][..., -1:], gates[1][..., -1:],
                                                  initial_state=state, use_qk_l2norm=True)[0]
        else:
            cache = KVCache(num_layers=1, max_cache_len=S)
            cache.update(past[1], past[2], layer_idx=0)

            def step():
                cache.crop(S - 1)
                keys, values = cache.update(new[1], new[2], layer_idx=0)             # (N, H, S, D) each
                return calculate_attention(new[0], keys, values, need_weights=False)[0]
    return torch.no_grad()(step)


def time_linear_decoding(lengths=(SHORT, 1024, LONG), *, repeats: int = 15, calls: int = 10) -> dict:
    """Seconds per step of every way at every length: each way's lengths take turns in their own paired run.

    A way's lengths are timed together, so that a step only ever follows another step of its own way (a softmax step
    over 8,192 cached tokens, run just before, would push a linear step's state out of the CPU's caches). Each timing
    is ``calls`` steps in a row, divided by ``calls``.

    Returns:
        ``{"seconds": {(way, S): median seconds per step}, "growth": {way: paired median of the step at the last
        length / the step at the first}}``.

    Example:
        >>> result = time_linear_decoding((8, 16), repeats=1, calls=1)
        >>> sorted(result["growth"]) == sorted(WAYS)
        True
    """
    first, last = lengths[0], lengths[-1]
    seconds, growth = {}, {}
    for way in WAYS:
        steps = {S: decoding_step(way, S) for S in lengths}
        runs = {S: (lambda step=step: [step() for _ in range(calls)]) for S, step in steps.items()}
        times = {S: [t / calls for t in ts] for S, ts in time_paired(runs, (), repeats, warmup=2).items()}
        seconds |= {(way, S): statistics.median(ts) for S, ts in times.items()}
        growth[way] = statistics.median(a / b for a, b in zip(times[last], times[first], strict=True))
    return {"seconds": seconds, "growth": growth}


def linear_targets(result: dict, lengths) -> list[tuple[str, float | None, str, float]]:
    """``[(text, value or None, "<=", LIMIT)]`` for the two fixed-size states; ``None`` unless the lengths run
    from :data:`SHORT` to :data:`LONG`."""
    measured = lengths[0] == SHORT and lengths[-1] == LONG
    return [(f"{way}: a decoding step at S={LONG:,} <= {LIMIT}x its step at S={SHORT}",
             result["growth"][way] if measured else None, "<=", LIMIT) for way in ("linear", "gated delta")]


def print_linear_decoding(result: dict, lengths, repeats: int) -> list:
    """Print the table, the softmax step's growth and the targets (met, MISSED or not measured); return them."""
    print(f"\n== linear attention (CPU): one decoding step after S tokens, batch 1, {HEADS} heads of {HEAD_DIM}, "
          f"torch threads {torch.get_num_threads()}; medians of {repeats} paired repeats, each way's lengths "
          f"taking turns")
    print(f"  {'S':>6}  " + "  ".join(f"{way + ' (ms)':>20}" for way in WAYS))
    for S in lengths:
        print(f"  {S:>6}  " + "  ".join(f"{result['seconds'][way, S] * 1e3:>20.3f}" for way in WAYS))
    print(f"  step at S={lengths[-1]:,} / step at S={lengths[0]}: "
          + ", ".join(f"{way} {result['growth'][way]:.2f}x" for way in WAYS)
          + " (the softmax step reads every cached key and value; the others read a state of one size)")
    return print_target_lines("linear-attention targets (a target is judged on a quiet machine)",
                              linear_targets(result, lengths), unmeasured=f"run S={SHORT} and S={LONG}")


def run_linear_decoding(quick: bool = False, repeats: int | None = None) -> dict:
    """Time, print and return ``{"lengths", "result", "targets"}`` (``quick``: fewer repeats, the same lengths)."""
    lengths, repeats = (SHORT, 1024, LONG), repeats or (7 if quick else 21)
    result = time_linear_decoding(lengths, repeats=repeats)
    return {"lengths": lengths, "result": result, "targets": print_linear_decoding(result, lengths, repeats)}
