"""``python -m attention_lib.bench``: how fast, and how memory-hungry, each attention is on this machine.

One run prints the environment (with the SDPA kernel that actually ran), the matrix-product ceiling in
GFLOP/s, a timing table and a peak-memory table. ``--quick`` finishes in well under a minute; the measured
memory of lesson ``notebooks/10_memory_efficient.ipynb`` comes from
:func:`attention_lib.measure.peak_memory`, as here.

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
import os
import platform
import statistics
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .attention import calculate_attention
from .device import get_device
from .loops import loop_attention
from .measure import MiB, growth_exponent, peak_memory, quiet_profiler, synchronize, time_paired
from .memory import memory_efficient_attention

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


def sdpa_kernel(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> str:
    """Which implementation ``scaled_dot_product_attention`` picks for these inputs, read from the profiler.

    Example:
        >>> q = torch.randn(1, 1, 8, 4)
        >>> sdpa_kernel(q, q, q) != ""
        True
    """
    from torch.profiler import ProfilerActivity, profile

    with quiet_profiler(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(query, key, value)
        synchronize(query.device)
    names = {e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product")}
    names |= {e.name for e in prof.events() if e.name.startswith("aten::_efficient_attention")}
    return ", ".join(sorted(n.removeprefix("aten::") for n in names)) or "math (composite: matmul + softmax)"


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
                     + "  (above the number of cores, other programs compete for them: noisier times)")
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
    p.add_argument("--threads", type=int, help="torch.set_num_threads(THREADS) first (default: torch's choice)")
    args = p.parse_args(argv)
    quick = args.quick
    args.sizes = args.sizes or ([64, 256] if quick else [128, 512, 1024, 2048])
    args.memory_sizes = args.memory_sizes or ([512, 1024] if quick else [2048, 4096])
    args.repeats = args.repeats or (3 if quick else 7)
    args.loop_max = args.loop_max if args.loop_max is not None else (64 if quick else 128)
    return args


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print its report, and return the measurements (for tests and notebooks)."""
    args = _parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    dtype = getattr(torch, args.dtype)
    d = args.head_dim
    print("== environment", *_environment(device, dtype), sep="\n  ")
    q, k, v = _inputs((2, 4), max(args.sizes), d, device, dtype)
    print(f"  SDPA kernel at 2x4 heads, n={max(args.sizes)}: {sdpa_kernel(q, k, v)} (found with torch.profiler)")
    del q, k, v
    size = 512 if args.quick else 2048
    ceilings = [matmul_gflops(device, dtype, size, args.repeats)]
    ratios: dict[tuple[str, int, str], float] = {}
    rows = []  # printed once the ceiling is known
    for bh in ((1, 1), (2, 4)):
        for n in args.sizes:
            inputs = _inputs(bh, n, d, device, dtype)
            # Short runs are noisier: give them more repeats. The slow loop gets its own, fewer, paired runs.
            repeats = args.repeats * (3 if n <= 512 else 2 if n <= 1024 else 1)
            runs = [time_paired({m: fn for m, fn in METHODS.items() if m != "loop"}, inputs, repeats)]
            if n <= args.loop_max:
                runs.append(time_paired({m: METHODS[m] for m in ("sdpa", "loop")}, inputs, min(args.repeats, 3)))
            for times in runs:
                for m, t in times.items():
                    if m == "sdpa" and times is not runs[0]:
                        continue  # the loop's own SDPA runs only serve its ratio
                    ratios[f"{bh[0]}x{bh[1]}", n, m] = statistics.median(a / b for a, b in zip(t, times["sdpa"],
                                                                                               strict=True))
                    rows.append((bh, n, m, statistics.median(t), attention_flops(bh[0] * bh[1], n, n, d, d)))
    ceilings.append(matmul_gflops(device, dtype, size, args.repeats))
    ceiling = max(ceilings)
    print(f"\n== ceiling: square matmul ({size}²), median of {args.repeats} runs before and after the timings: "
          f"{ceilings[0]:.1f} and {ceilings[1]:.1f} GFLOP/s; the larger, {ceiling:.1f} GFLOP/s, is the ceiling")
    print(f"\n== time, d={d}: medians of paired, interleaved repeats ({3 * args.repeats} for n <= 512, "
          f"{2 * args.repeats} up to 1024, {args.repeats} above; the loop: {min(args.repeats, 3)}, paired with "
          f"its own SDPA runs); x SDPA = median of the per-repeat ratios")
    print(f"  {'B x H':>5} {'n':>5}  {'method':<20} {'ms':>9} {'x SDPA':>7} {'GFLOP/s':>8} {'% ceiling':>9}")
    for bh, n, m, seconds, work in rows:
        gflops = work / seconds / 1e9
        print(f"  {bh[0]}x{bh[1]:<3} {n:>5}  {m:<20} {seconds * 1e3:>9.2f} {ratios[f'{bh[0]}x{bh[1]}', n, m]:>7.2f} "
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
        print("\n== targets")
        for text, value, limit in checks:
            print(f"  {'met   ' if value <= limit else 'MISSED'} {text}: {value:.2f}")


if __name__ == "__main__":
    main()
