"""Timing with a stopwatch you can trust: warm up, synchronize the GPU, repeat, and keep the median.

Used in ``notebooks/07_no_loops.ipynb`` to measure the claim "no loops: every word at once". A GPU runs work
*asynchronously*: a call returns as soon as the work is queued, so the clock is read only after
``torch.cuda.synchronize()`` (or its ``mps`` twin). The median of several runs ignores the odd slow run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping

import torch


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


def _device_of(args: Iterable[object]) -> torch.device | None:
    """The first non-CPU device among the tensors in ``args`` (``None`` if all are on the CPU)."""
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.device.type != "cpu":
            return arg.device
    return None


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
    for name, number, smallest in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError(f"{name} must be an int, but got {type(number).__name__}.")
        if number < smallest:
            raise ValueError(f"{name} must be at least {smallest}, but {name}={number}.")
    device = _device_of([*args, *kwargs.values()]) if device is None else device
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn(*args, **kwargs)
        synchronize(device)
        times.append(time.perf_counter() - start)
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
