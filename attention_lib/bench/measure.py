"""Measuring: a stopwatch you can trust, and the peak memory of a call.

**Time** (``notebooks/07_no_loops.ipynb``, the benchmark): warm up, synchronize the GPU, repeat, keep the
median. A GPU runs work *asynchronously*: a call returns as soon as the work is queued, so the clock is read
only after ``torch.cuda.synchronize()`` (or its ``mps`` twin). The median of several runs ignores the odd slow
run. Several candidates are timed *interleaved* (:func:`time_paired`), so a slow moment hits all alike.

**Memory** (``notebooks/10_memory_efficient.ipynb``, the benchmark): :func:`peak_memory` reports the most
memory allocated at once while a function runs, from CUDA's counters or from ``torch.profiler``'s record of
every CPU allocation.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

import torch

from ..validation import check_int

MiB = 2**20


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until every queued operation on ``device`` has finished (does nothing on the CPU).

    Args:
        device: a ``torch.device`` or its name; ``None`` or a CPU device does nothing.

    Example:
        >>> synchronize("cpu")  # nothing to wait for on the CPU
    """
    if device is None:
        return
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def device_of(args: Iterable[object]) -> torch.device:
    """The device of the first tensor in ``args`` that is not on the CPU (the CPU if there is none).

    Example:
        >>> device_of([3, torch.zeros(1)])
        device(type='cpu')
    """
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.device.type != "cpu":
            return arg.device
    return torch.device("cpu")


def _check_counts(repeats, warmup) -> None:
    for name, number, smallest in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        check_int(number, name, minimum=smallest)


def time_paired(candidates: Mapping[str, Callable[..., object]], args: tuple, repeats: int = 5, *,
                warmup: int = 1, device: torch.device | str | None = None) -> dict[str, list[float]]:
    """Time every candidate ``repeats`` times on the same ``args``, interleaved: every time, in seconds.

    Each candidate first runs ``warmup`` times untimed. Then each repeat runs every candidate once, in an
    order that rotates from repeat to repeat, so that a slow moment of the machine hits all of them alike;
    ``times[a][r] / times[b][r]`` is a *paired* ratio. The device is synchronized around every clock reading.

    Args:
        candidates: ``{name: function}``; each is called as ``function(*args)``.
        args: the arguments, the same for every candidate.
        repeats: timed runs per candidate (a positive integer).
        warmup: untimed runs per candidate first (caches, lazy initialisation, GPU kernel selection).
        device: the device to synchronize; inferred from the tensor arguments when ``None``.

    Returns:
        ``{name: [seconds of each repeat]}``, in the order of ``candidates``.

    Raises:
        TypeError: if a candidate is not callable or ``repeats``/``warmup`` are not integers.
        ValueError: if ``repeats < 1`` or ``warmup < 0``.

    Example:
        >>> x = torch.randn(32, 32)
        >>> times = time_paired({"mm": torch.mm, "add": torch.add}, (x, x), repeats=3)
        >>> [len(t) for t in times.values()]
        [3, 3]
    """
    for name, fn in candidates.items():
        if not callable(fn):
            raise TypeError(f"candidate {name!r} must be callable (a function to time), but got "
                            f"{type(fn).__name__}; pass the function itself, e.g. torch.matmul, not its result.")
    _check_counts(repeats, warmup)
    device = device_of(args) if device is None else torch.device(device)
    names = list(candidates)
    for name in names:
        for _ in range(warmup):
            candidates[name](*args)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            synchronize(device)
            start = time.perf_counter()
            candidates[name](*args)
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return times


def median_time(fn: Callable[..., object], *args, repeats: int = 5, warmup: int = 1,
                device: torch.device | str | None = None, **kwargs) -> float:
    """Run ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``repeats`` times; the median in seconds.

    Built step by step in ``notebooks/07_no_loops.ipynb``. Before starting and before stopping the clock it
    synchronizes ``device`` (by default the device of the first tensor argument that is not on the CPU), so
    that GPU times measure the work itself, not just the time to queue it.

    Args:
        fn: the function to time.
        *args, **kwargs: its arguments.
        repeats: how many timed runs (a positive integer).
        warmup: how many untimed runs first (caches, lazy initialisation, GPU kernel selection).
        device: the device to synchronize; inferred from the tensor arguments when ``None``.

    Returns:
        The median duration of one call, in seconds.

    Raises:
        TypeError: if ``fn`` is not callable or ``repeats``/``warmup`` are not integers.
        ValueError: if ``repeats < 1`` or ``warmup < 0``.

    Example:
        >>> x = torch.randn(64, 64)
        >>> seconds = median_time(torch.matmul, x, x, repeats=3)
        >>> 0.0 < seconds < 1.0
        True
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable (a function to time), but got {type(fn).__name__}; "
                        f"pass the function itself, e.g. median_time(torch.matmul, a, b), not its result.")
    call = (lambda *a: fn(*a, **kwargs)) if kwargs else fn
    device = device_of([*args, *kwargs.values()]) if device is None else device
    times = time_paired({"fn": call}, args, repeats, warmup=warmup, device=device)["fn"]
    return statistics.median(times)


def time_over_sizes(candidates: Mapping[str, Callable[..., object]], make_inputs: Callable[[int], tuple],
                    sizes: Iterable[int], *, repeats: int = 5, warmup: int = 1,
                    device: torch.device | str | None = None) -> dict[str, list[float]]:
    """Time each candidate on the inputs ``make_inputs(size)`` for every size: median seconds per size.

    Built step by step in ``notebooks/07_no_loops.ipynb``. All candidates get the very same inputs for a
    size, so their times compare like with like; the result plugs straight into
    :func:`attention_lib.plotting.plot_lines`.

    Args:
        candidates: ``{name: function}``; each is called as ``function(*make_inputs(size))``.
        make_inputs: ``size -> tuple of arguments`` (e.g. ``query (L, E), key (L, E), value (L, Ev)``).
        sizes: the sizes to try, e.g. sequence lengths ``L``.
        repeats, warmup, device: as in :func:`median_time`.

    Returns:
        ``{name: [median seconds for each size]}``, in the order of ``candidates`` and ``sizes``.

    Raises:
        ValueError: if ``candidates`` or ``sizes`` is empty.
        TypeError, ValueError: as :func:`median_time`.

    Example:
        >>> make = lambda n: (torch.randn(n, n),)
        >>> table = time_over_sizes({"square": torch.square, "exp": torch.exp}, make, [8, 16], repeats=2)
        >>> list(table), [len(times) for times in table.values()]
        (['square', 'exp'], [2, 2])
    """
    sizes = list(sizes)
    if not candidates or not sizes:
        raise ValueError(f"time_over_sizes needs at least one candidate and one size, but got "
                         f"{len(candidates)} candidates and sizes={sizes}.")
    table: dict[str, list[float]] = {name: [] for name in candidates}
    for size in sizes:
        args = make_inputs(size)
        for name, fn in candidates.items():
            table[name].append(median_time(fn, *args, repeats=repeats, warmup=warmup, device=device))
    return table


# -- memory ------------------------------------------------------------------------------------------------


def growth_exponent(n1: float, m1: float, n2: float, m2: float) -> float:
    """The exponent ``p`` in ``m ∝ nᵖ`` through two points: 1 means linear growth, 2 quadratic.

    Example:
        >>> growth_exponent(1024, 4.0, 2048, 16.0)
        2.0
    """
    return math.log(m2 / m1) / math.log(n2 / n1)


@contextmanager
def quiet_profiler() -> Iterator[None]:
    """Silence the lines some profiler builds write straight to file descriptor 2 when they start and stop."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory(fn: Callable[..., object], *args, **kwargs) -> int:
    """Peak extra bytes allocated while ``fn(*args, **kwargs)`` runs: its result counts, its inputs do not.

    Used in ``notebooks/10_memory_efficient.ipynb`` and by ``python -m attention_lib.bench``. On CUDA it reads
    ``torch.cuda.max_memory_allocated``; on the CPU it replays the allocations and frees that
    ``torch.profiler`` records with ``profile_memory=True`` (buffers inside kernels included).

    Raises:
        ValueError: if the tensor arguments are on a device other than the CPU or CUDA.

    Example:
        >>> def two_buffers_one_at_a_time():
        ...     first = torch.ones(MiB // 4).sum()  # 1 MiB of float32, freed once summed
        ...     return torch.ones(MiB // 4).sum() + first
        >>> round(peak_memory(two_buffers_one_at_a_time) / MiB, 2)
        1.0
    """
    device = device_of([*args, *kwargs.values()])
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn(*args, **kwargs)
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return peak
    if device.type != "cpu":
        raise ValueError(f"peak_memory measures CPU and CUDA memory, but the inputs are on {device}; "
                         f"move them with .cpu() or .cuda().")
    from torch.profiler import ProfilerActivity, profile

    with quiet_profiler(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn(*args, **kwargs)
    del result
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    records = sorted((e["ts"], e["args"].get("Ev Idx", 0), e["args"]["Bytes"]) for e in events
                     if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0)
    running = peak = 0
    for *_, nbytes in records:  # in the order they happened
        running += nbytes
        peak = max(peak, running)
    return peak
