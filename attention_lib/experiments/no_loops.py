"""Lesson 07's experiment: one call of the matrix version taken apart, to see what its time is made of.

A call of :func:`~attention_lib.calculate_attention` on a sentence of ``L`` words does the arithmetic (two matrix
products, ``2·L²·(E + Ev)`` FLOPs), passes over the ``L x L`` table a few times (scale, softmax), and gets fresh
memory for each new ``L x L`` tensor. :func:`timing_breakdown` times the call as written, the same steps as bare
PyTorch calls (new tensors, none of the package's argument checks), the same steps writing into memory allocated
once, and the two products alone, and counts the page faults of the call and of the reused steps: the operating
system hands a program fresh memory one page at a time (``os.sysconf("SC_PAGE_SIZE")`` bytes), on first touch, and
each hand-over is a page fault.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from ..attention import calculate_attention
from ..toy_data import random_qkv
from ..validation import check_int


@dataclass(frozen=True)
class CallBreakdown:
    """What one call of the matrix version costs at one length ``L``, on the CPU, in one thread.

    Times are medians of CPU seconds per call (``time.process_time``: the time the program ran, not the time it
    waited for a busy core; it still counts the time lost when other programs crowd the caches and memory);
    ``faults``, ``faults_plain`` and ``faults_reused`` are the minor page faults per call of the whole, plain and
    reused versions (``None`` where the system does not count them).
    """

    L: int
    whole: float  # calculate_attention as written: a new (L, L) tensor at every step
    reused: float  # the same steps, writing into memory allocated once
    products: float  # the two matrix products alone, into memory allocated once
    faults: float | None  # page faults per call of the whole version
    faults_reused: float | None  # page faults per call of the same steps in memory allocated once
    plain: float = float("nan")  # the same steps as bare PyTorch calls: new tensors, but no argument checks
    faults_plain: float | None = None  # page faults per call of the plain version

    @property
    def flops(self) -> int:
        """The FLOPs of the two matrix products, ``2·L·L·E + 2·L·L·Ev`` with ``E = Ev = 64``."""
        return 2 * self.L * self.L * (64 + 64)


def _page_faults() -> int | None:
    try:
        import resource
    except ImportError:  # Windows: no getrusage
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def timing_breakdown(lengths, *, repeats: int = 7, warmup: int = 2) -> list[CallBreakdown]:
    """Time one call of the matrix version four ways at each length, interleaved, on the CPU in one thread.

    Built step by step in ``notebooks/07_no_loops.ipynb``. For each ``L`` (random ``(L, 64)`` queries, keys and
    values, from a fixed seed): the call as written; the same steps as bare PyTorch calls, new tensors but no
    argument checks (``plain``); the same five steps writing into ``(L, L)`` buffers allocated once (``out=``); and
    the two matrix products alone. They take turns, so that a busy moment hits all alike; one thread and CPU time
    leave out the time spent waiting for a busy core, though not the slowdown of sharing caches and memory.

    Args:
        lengths: the sentence lengths ``L`` to try (positive integers).
        repeats: timed calls per version and length (a positive integer).
        warmup: untimed calls per version first (a non-negative integer).

    Returns:
        One :class:`CallBreakdown` per length, in order.

    Raises:
        TypeError: if a length, ``repeats`` or ``warmup`` is not an integer.
        ValueError: if a length or ``repeats`` is not positive, or ``warmup`` is negative.

    Example:
        >>> (row,) = timing_breakdown([16], repeats=2, warmup=0)
        >>> row.L, row.flops, 0.0 < row.products, row.faults_plain is None or row.faults_plain >= 0
        (16, 65536, True, True)
    """
    lengths = [check_int(L, "L", minimum=1, fix="pass sentence lengths such as [128, 256].") for L in lengths]
    repeats = check_int(repeats, "repeats", minimum=1)
    warmup = check_int(warmup, "warmup", minimum=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [_breakdown(L, repeats, warmup) for L in lengths]
    finally:
        torch.set_num_threads(threads)


def _breakdown(L: int, repeats: int, warmup: int) -> CallBreakdown:
    query, key, value = random_qkv(L=L, E=64, seed=L)  # (L, 64) each
    scores, scaled, weights = (torch.empty(L, L) for _ in range(3))
    output = torch.empty(L, 64)
    root = math.sqrt(64)

    def whole():
        calculate_attention(query, key, value)

    def reused():
        torch.matmul(query, key.transpose(-2, -1), out=scores)  # (L, E) @ (E, L) -> (L, L)
        torch.div(scores, root, out=scaled)
        torch.softmax(scaled, dim=-1, out=weights)
        torch.matmul(weights, value, out=output)  # (L, L) @ (L, Ev) -> (L, Ev)

    def plain():  # new (L, L) tensors as in the whole call, without the package's checks
        torch.softmax(query @ key.transpose(-2, -1) / root, dim=-1) @ value

    def products():
        torch.matmul(query, key.transpose(-2, -1), out=scores)
        torch.matmul(weights, value, out=output)

    versions = {"whole": whole, "plain": plain, "reused": reused, "products": products}
    for fn in versions.values():
        for _ in range(warmup):
            fn()
    seconds = {name: [] for name in versions}
    faults: dict[str, list[int]] = {name: [] for name in versions}
    names = list(versions)
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            before, start = _page_faults(), time.process_time()
            versions[name]()
            seconds[name].append(time.process_time() - start)
            if before is not None:
                faults[name].append(_page_faults() - before)
    median = {name: sorted(times)[len(times) // 2] for name, times in seconds.items()}
    per_call = {name: (sum(counts) / len(counts) if counts else None) for name, counts in faults.items()}
    return CallBreakdown(L, median["whole"], median["reused"], median["products"], per_call["whole"],
                         per_call["reused"], median["plain"], per_call["plain"])
