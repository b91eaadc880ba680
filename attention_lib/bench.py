"""``python -m attention_lib.bench``: how fast, and how memory-hungry, each attention is on this machine.

One run prints the environment (with the SDPA kernel that actually ran), the matrix-product ceiling in
GFLOP/s, a timing table and a peak-memory table. ``--quick`` finishes in well under a minute; the measured
memory of lesson ``notebooks/10_memory_efficient.ipynb`` comes from :func:`peak_memory`.

How it measures:

- **Time**: for each size every method runs once untimed, then once per repeat, *interleaved* (the order
  rotates from repeat to repeat) so that a slow moment of the machine hits all methods alike. A method's
  time is its median; its ratio to SDPA is the median of the per-repeat ratios (paired).
- **GFLOP/s**: every method is credited with the same nominal work, the two matrix products
  ``2·L·S·E + 2·L·S·Ev`` per batch and head, so GFLOP/s and time tell the same story.
- **Peak memory**: the most memory allocated at once during one forward pass (inputs that need no gradient),
  minus what was allocated before: the output counts, the inputs do not. On CUDA it is
  ``torch.cuda.max_memory_allocated``. On the CPU, ``torch.profiler`` with ``profile_memory=True`` records
  every allocation and free of PyTorch's CPU allocator (buffers inside kernels too); the peak is the largest
  running total of those records.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .attention import calculate_attention
from .device import get_device
from .loops import loop_attention
from .memory import memory_efficient_attention
from .timing import synchronize

MiB = 2**20

#: The methods compared, each called as ``fn(query, key, value)``.
METHODS: dict[str, Callable[..., object]] = {
    "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    "calculate_attention": lambda q, k, v: calculate_attention(q, k, v),
    "need_weights=False": lambda q, k, v: calculate_attention(q, k, v, need_weights=False),
    "memory_efficient": lambda q, k, v: memory_efficient_attention(q, k, v),
    "loop": lambda q, k, v: loop_attention(q, k, v),
}


def attention_flops(batch: int, L: int, S: int, E: int, Ev: int) -> int:
    """The nominal work of attention: two matrix products, ``2·L·S·E + 2·L·S·Ev`` per batch (and head).

    Example:
        >>> attention_flops(1, 2, 3, 4, 4)
        96
    """
    return batch * (2 * L * S * E + 2 * L * S * Ev)


def growth_exponent(n1: float, m1: float, n2: float, m2: float) -> float:
    """The exponent ``p`` in ``m ∝ nᵖ`` through two points: 1 means linear growth, 2 quadratic.

    Example:
        >>> growth_exponent(1024, 4.0, 2048, 16.0)
        2.0
    """
    return math.log(m2 / m1) / math.log(n2 / n1)


def _device_of(args) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


@contextmanager
def _quiet_profiler() -> Iterator[None]:
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

    Used by ``python -m attention_lib.bench`` and ``notebooks/10_memory_efficient.ipynb``. On CUDA it reads
    ``torch.cuda.max_memory_allocated``; on the CPU it replays the allocations and frees that
    ``torch.profiler`` records with ``profile_memory=True`` (buffers inside kernels included).

    Example:
        >>> def two_buffers_one_at_a_time():
        ...     first = torch.ones(MiB // 4).sum()  # 1 MiB of float32, freed once summed
        ...     return torch.ones(MiB // 4).sum() + first
        >>> round(peak_memory(two_buffers_one_at_a_time) / MiB, 2)
        1.0
    """
    device = _device_of([*args, *kwargs.values()])
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

    with _quiet_profiler(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn(*args, **kwargs)
    del result
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    records = sorted((e["ts"], e["args"]["Bytes"]) for e in events
                     if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0)
    running = peak = 0
    for _, nbytes in records:
        running += nbytes
        peak = max(peak, running)
    return peak


def sdpa_kernel(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> str:
    """Which implementation ``scaled_dot_product_attention`` picks for these inputs, read from the profiler.

    Example:
        >>> q = torch.randn(1, 1, 8, 4)
        >>> sdpa_kernel(q, q, q) != ""
        True
    """
    from torch.profiler import ProfilerActivity, profile

    with _quiet_profiler(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(query, key, value)
        synchronize(query.device)
    names = {e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product")}
    names |= {e.name for e in prof.events() if e.name.startswith("aten::_efficient_attention")}
    return ", ".join(sorted(n.removeprefix("aten::") for n in names)) or "math (composite: matmul + softmax)"


def time_paired(candidates: Mapping[str, Callable[..., object]], args: tuple, repeats: int) -> dict[str, list[float]]:
    """Time every candidate once per repeat, interleaved in a rotating order, after one warm-up each.

    Example:
        >>> x = torch.randn(32, 32)
        >>> times = time_paired({"mm": torch.mm, "add": torch.add}, (x, x), repeats=3)
        >>> [len(t) for t in times.values()]
        [3, 3]
    """
    device = _device_of(args)
    names = list(candidates)
    for name in names:
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


def matmul_gflops(device: torch.device, dtype: torch.dtype, size: int, repeats: int) -> float:
    """GFLOP/s of one large square matrix product: the ceiling that attention's matmuls can reach."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=g).to(device, dtype) for _ in range(2))
    seconds = statistics.median(time_paired({"mm": torch.mm}, (a, b), repeats)["mm"])
    return 2 * size**3 / seconds / 1e9


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def _environment(device: torch.device, dtype: torch.dtype) -> list[str]:
    lines = [f"torch {torch.__version__}, python {sys.version.split()[0]}, {platform.platform()}",
             f"device: {device}, dtype: {str(dtype).removeprefix('torch.')}, torch threads: "
             f"{torch.get_num_threads()}, CPU cores: {os.cpu_count()}"]
    if device.type == "cuda":
        lines.append(f"GPU: {torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}")
    else:
        lines.append(f"CPU: {_cpu_name()}")
    if hasattr(os, "getloadavg"):
        lines.append("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
                     + "  (other programs compete for the cores when it exceeds the thread count)")
    return lines


def _inputs(bh: tuple[int, int], n: int, d: int, device, dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*bh, n, d, generator=g).to(device, dtype) for _ in range(3))


def _parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m attention_lib.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (under a minute)")
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: attention_lib.get_device())")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "bfloat16"])
    p.add_argument("--sizes", type=int, nargs="+", help="sequence lengths n = L = S to time")
    p.add_argument("--memory-sizes", type=int, nargs=2, help="the two lengths n for the memory table")
    p.add_argument("--repeats", type=int, help="timed runs per method and size")
    p.add_argument("--loop-max", type=int, help="largest n for the (slow) loop version")
    p.add_argument("--head-dim", type=int, default=64, help="E = Ev, the size of each query/key/value vector")
    args = p.parse_args(argv)
    quick = args.quick
    args.sizes = args.sizes or ([128, 256] if quick else [128, 512, 1024, 2048])
    args.memory_sizes = args.memory_sizes or ([512, 1024] if quick else [2048, 4096])
    args.repeats = args.repeats or (3 if quick else 7)
    args.loop_max = args.loop_max if args.loop_max is not None else (64 if quick else 128)
    return args


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print its report, and return the measurements (for tests and notebooks)."""
    args = _parse(argv)
    device = torch.device(args.device) if args.device else get_device()
    dtype = getattr(torch, args.dtype)
    d = args.head_dim
    print("== environment", *_environment(device, dtype), sep="\n  ")
    q, k, v = _inputs((2, 4), max(args.sizes), d, device, dtype)
    print(f"  SDPA kernel at 2x4 heads, n={max(args.sizes)}: {sdpa_kernel(q, k, v)} (found with torch.profiler)")
    del q, k, v
    ceiling = matmul_gflops(device, dtype, 512 if args.quick else 2048, args.repeats)
    print(f"\n== ceiling: square matmul ({512 if args.quick else 2048}²): {ceiling:.1f} GFLOP/s")
    print(f"\n== time, d={d}: median of {args.repeats} paired, interleaved repeats; ratio = median of "
          f"time/SDPA time per repeat")
    print(f"  {'B x H':>5} {'n':>5}  {'method':<20} {'ms':>9} {'x SDPA':>7} {'GFLOP/s':>8} {'% ceiling':>9}")
    ratios: dict[tuple[str, int, str], float] = {}
    for bh in ((1, 1), (2, 4)):
        for n in args.sizes:
            methods = {m: fn for m, fn in METHODS.items() if m != "loop" or n <= args.loop_max}
            times = time_paired(methods, _inputs(bh, n, d, device, dtype), args.repeats)
            work = attention_flops(bh[0] * bh[1], n, n, d, d)
            for m, t in times.items():
                ratio = statistics.median(a / b for a, b in zip(t, times["sdpa"], strict=True))
                ratios[f"{bh[0]}x{bh[1]}", n, m] = ratio
                gflops = work / statistics.median(t) / 1e9
                print(f"  {bh[0]}x{bh[1]:<3} {n:>5}  {m:<20} {statistics.median(t) * 1e3:>9.2f} {ratio:>7.2f} "
                      f"{gflops:>8.1f} {100 * gflops / ceiling:>8.0f}%")
    memory = _memory_table(args.memory_sizes, d, device, dtype)
    _targets(ratios, memory, args.memory_sizes, d, torch.empty((), dtype=dtype).element_size())
    return {"ceiling": ceiling, "ratios": ratios, "memory": memory}


def _memory_table(sizes, d, device, dtype) -> dict[tuple[str, int], int]:
    if device.type not in ("cpu", "cuda"):
        print(f"\n== peak memory: not measured on {device.type}")
        return {}
    print(f"\n== peak extra memory, 2x4 heads, d={d}, one forward pass (output included, inputs not)")
    nbytes = torch.empty((), dtype=dtype).element_size()
    memory: dict[tuple[str, int], int] = {}
    for n in sizes:
        out, square = 8 * n * d * nbytes, 8 * n * n * nbytes
        print(f"  n={n}: output {out / MiB:.1f} MiB, one n x n buffer {square / MiB:.1f} MiB")
        args = _inputs((2, 4), n, d, device, dtype)
        for m, fn in METHODS.items():
            if m != "loop":
                memory[m, n] = peak_memory(fn, *args)
                print(f"    {m:<20} {memory[m, n] / MiB:>9.1f} MiB = output + {(memory[m, n] - out) / MiB:.1f} MiB")
    n1, n2 = sizes
    print(f"  growth exponent between n={n1} and n={n2} (1 = linear, 2 = quadratic):")
    for m in [m for m in METHODS if m != "loop"]:
        print(f"    {m:<20} {growth_exponent(n1, memory[m, n1], n2, memory[m, n2]):.2f}")
    return memory


def _targets(ratios, memory, sizes, d: int, nbytes: int) -> None:
    checks = []
    for n, limit in ((512, 1.5), (1024, 2.5)):
        if ("2x4", n, "sdpa") in ratios:
            checks.append((f"calculate_attention (weights) at 2x4, n={n} <= {limit}x SDPA",
                           ratios["2x4", n, "calculate_attention"], limit))
    for n in (512, 1024, 2048):
        if ("2x4", n, "sdpa") in ratios:
            checks.append((f"need_weights=False at 2x4, n={n} <= 1.1x SDPA", ratios["2x4", n, "need_weights=False"],
                           1.1))
    if ("2x4", 1024, "sdpa") in ratios:
        checks.append(("memory_efficient at 2x4, n=1024 <= 1.5x SDPA", ratios["2x4", 1024, "memory_efficient"], 1.5))
    if memory:
        n1, n2 = sizes
        out, square = 8 * n2 * d * nbytes, 8 * n2 * n2 * nbytes
        checks.append((f"calculate_attention peak at n={n2} <= 1.1 x (n x n buffer + output)",
                       memory["calculate_attention", n2] / (square + out), 1.1))
        checks.append((f"memory_efficient growth exponent n={n1}..{n2} <= 1.3",
                       growth_exponent(n1, memory["memory_efficient", n1], n2, memory["memory_efficient", n2]), 1.3))
        checks.append((f"memory_efficient peak at n={n2} - output <= 32 MiB",
                       (memory["memory_efficient", n2] - out) / MiB, 32))
    if checks:
        print("\n== targets (issue 6)")
        for text, value, limit in checks:
            print(f"  {'met   ' if value <= limit else 'MISSED'} {text}: {value:.2f}")


if __name__ == "__main__":
    main()
