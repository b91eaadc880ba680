"""``python -m attention_lib.bench``: how fast, and how memory-hungry, each attention is on this machine.

One run prints the environment (with the SDPA kernel that actually ran), the matrix-product ceiling in
GFLOP/s, timing tables (no mask; causal; padding mask; ``MultiHeadAttention``; forward + backward), peak-memory
tables (one forward pass; forward + backward), decoding (the cache, GQA, latent and paged caches), and the course's
targets, each marked met or missed (``--quick``: about a minute; lesson 10 uses the same ``peak_memory``). How:

- **Time**: for each size every method runs once untimed, then once per repeat, *interleaved* (the order
  rotates from repeat to repeat) so that a slow moment of the machine hits all methods alike. A method's
  time is its median; its ratio to SDPA is the median of the per-repeat ratios (paired).
- **GFLOP/s**: every method is credited with the same nominal work, the two matrix products
  ``2·L·S·E + 2·L·S·Ev`` per batch and head, so GFLOP/s and time tell the same story.
- **Peak memory**: the most memory allocated at once during one forward pass (inputs that need no gradient),
  minus what was allocated before: the output counts, the inputs do not. For training, the same during a
  forward and a backward pass (inputs that need gradients, the gradient of the output given): the three
  input gradients count, and the table also shows what comes on top of them. On CUDA it is
  ``torch.cuda.max_memory_allocated``. On the CPU, ``torch.profiler`` with ``profile_memory=True`` records
  every allocation and free of PyTorch's CPU allocator (buffers inside kernels too); the peak is the largest
  running total of those records.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..attention import calculate_attention
from ..device import get_device
from ..loops import loop_attention
from ..memory_efficient.forward import memory_efficient_attention
from ..multihead import MultiHeadAttention
from .linear_attention import run_linear_decoding
from .machine import describe_machine, machine_lines, written
from .measure import quiet_profiler, synchronize, time_paired
from .memory_tables import inputs as _inputs
from .memory_tables import memory_tables, with_gradients
from .serving import run_serving
from .speculative import run_decoding_parts, run_speculative
from .targets import MATMULS, PLAIN, WEIGHTS_REFERENCE, exp2_vs_exp, matmuls_only, plain_blocks, print_targets

#: The methods compared, each called as ``fn(query, key, value, **options)`` (options: a mask or ``is_causal``).
METHODS: dict[str, Callable[..., object]] = {
    "sdpa": lambda q, k, v, **o: F.scaled_dot_product_attention(q, k, v, **o),
    "calculate_attention": lambda q, k, v, **o: calculate_attention(q, k, v, **o),
    "need_weights=False": lambda q, k, v, **o: calculate_attention(q, k, v, need_weights=False, **o),
    "memory_efficient": lambda q, k, v, **o: memory_efficient_attention(q, k, v, **o),
    "loop": lambda q, k, v, **o: loop_attention(q, k, v, **o),
    # PyTorch's own attention that returns the weights: what calculate_attention (weights) is judged against
    WEIGHTS_REFERENCE: lambda q, k, v, **o: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, **o),
}
#: Timed with masks and with gradients (the loop is too slow, the weights-returning version is in the main table).
FAST = ("sdpa", "need_weights=False", "memory_efficient")
TRAINED = ("sdpa", "calculate_attention", "memory_efficient")


def triton_method(device: torch.device, dtype: torch.dtype, head_dim: int) -> tuple[Callable[..., object] | None, str]:
    """The Triton kernel as a benchmark method where it can run these inputs, and why not where it cannot.

    It joins on CUDA only (the CPU would run it in Triton's interpreter, which says nothing about speed), for the
    dtypes it reads and head dimensions ``tl.dot`` takes.

    Example:
        >>> triton_method(torch.device("cuda"), torch.float64, 64)[1]
        'not timed: the kernel reads float32, float16 or bfloat16, not float64'
        >>> triton_method(torch.device("cpu"), torch.float32, 64)[0] is None
        True
    """
    if device.type != "cuda":
        return None, f"not timed on {device.type}: it runs compiled on CUDA only (on a CPU, in Triton's interpreter)"
    from ..memory_efficient.triton_kernel import DTYPES

    if dtype not in DTYPES:
        return None, f"not timed: the kernel reads float32, float16 or bfloat16, not {dtype}".replace("torch.", "")
    if not (16 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0):
        return None, f"not timed: tl.dot needs a head dimension that is a power of two from 16 to 256, not {head_dim}"
    try:
        from ..memory_efficient.triton_kernel import import_triton, triton_attention

        import_triton()
    except ImportError as error:
        return None, f"not timed: {error}"
    return (lambda q, k, v, **o: triton_attention(q, k, v, **o)), "timed with the others and in the causal group"


def attention_flops(batch: int, L: int, S: int, E: int, Ev: int) -> int:
    """The nominal work of attention: two matrix products, ``2·L·S·E + 2·L·S·Ev`` per batch (and head).

    Example:
        >>> attention_flops(1, 2, 3, 4, 4)
        96
    """
    return batch * (2 * L * S * E + 2 * L * S * Ev)


def sdpa_implementation(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> str:
    """Which implementation ``scaled_dot_product_attention`` runs for these inputs, read from the profiler.

    (Not to be confused with ``torch.nn.attention.sdpa_kernel``, which *chooses* the implementations allowed.)

    Example:
        >>> q = torch.randn(1, 1, 8, 4)
        >>> sdpa_implementation(q, q, q)
        '_scaled_dot_product_flash_attention_for_cpu'
        >>> sdpa_implementation(q[0, 0], q[0, 0], q[0, 0])  # 2-D inputs: never fused
        'math (composite: matmul + softmax)'
    """
    from torch.profiler import ProfilerActivity, profile

    with quiet_profiler(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(query, key, value)
        synchronize(query.device)
    names = {e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product")}
    names |= {e.name for e in prof.events() if e.name.startswith("aten::_efficient_attention")}
    names -= {"aten::_scaled_dot_product_attention_math"}  # the composite's own name, listed as math below
    return ", ".join(sorted(n.removeprefix("aten::") for n in names)) or "math (composite: matmul + softmax)"


def matmul_gflops(device: torch.device, dtype: torch.dtype, size: int, repeats: int) -> float:
    """GFLOP/s of one large square matrix product: the ceiling that attention's matmuls can reach."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=g).to(device, dtype) for _ in range(2))
    seconds = statistics.median(time_paired({"mm": torch.mm}, (a, b), repeats)["mm"])
    return 2 * size**3 / seconds / 1e9


def _parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m attention_lib.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (under a minute)")
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: attention_lib.get_device())")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "bfloat16"])
    p.add_argument("--sizes", type=int, nargs="+", help="sequence lengths n = L = S to time")
    p.add_argument("--memory-sizes", type=int, nargs=2, help="the two lengths n for the memory tables")
    p.add_argument("--repeats", type=int, help="timed runs per method and size")
    p.add_argument("--loop-max", type=int, help="largest n for the (slow) loop version")
    p.add_argument("--head-dim", type=int, default=64, help="E = Ev, the size of each query/key/value vector")
    p.add_argument("--threads", type=int, help="torch.set_num_threads(THREADS) first (default: torch's choice)")
    p.add_argument("--decoding", action="store_true", help="only the decoding, serving and speculative parts (same "
                   "as --part decoding)")
    p.add_argument("--part", choices=["all", "time", "decoding", "serving", "speculative", "linear", "flex"],
                   default="all",
                   help="time: the timing tables and their targets only (no memory tables, no decoding); decoding: "
                        "decoding, serving and speculative decoding; serving: MLA and paged only; "
                        "speculative: lesson 18's draft against plain greedy only; linear: lesson 19's fixed-size "
                        "states against the softmax cache only; flex: lesson 20's compiled "
                        "FlexAttention against SDPA with the dense mask only (it compiles: needs a C++ compiler)")
    p.add_argument("--json", metavar="PATH", help="also write the machine, every ratio and every target to PATH")
    args = p.parse_args(argv)
    args.part = "decoding" if args.decoding else args.part
    quick = args.quick
    args.sizes = args.sizes or ([64, 256] if quick else [128, 512, 1024, 2048])
    args.memory_sizes = args.memory_sizes or ([512, 1024] if quick else [2048, 4096])
    args.repeats = args.repeats or (3 if quick else 7)
    args.loop_max = args.loop_max if args.loop_max is not None else (64 if quick else 128)
    return args


def _repeats(base: int, n: int) -> int:
    """Short runs are noisier: they get more repeats."""
    return base * (3 if n <= 512 else 2 if n <= 1024 else 1)


def _ratios(times: dict[str, list[float]], reference: str) -> dict[str, float]:
    """Each method's paired ratio to ``reference``: the median of the per-repeat ratios."""
    return {m: statistics.median(a / b for a, b in zip(t, times[reference], strict=True)) for m, t in times.items()}


def _mha_pair(n: int, d: int, device, dtype):
    """``MultiHeadAttention`` (4 heads of ``d``) with ``is_causal=True``, and the same module computed with SDPA."""
    torch.manual_seed(0)
    module = MultiHeadAttention(4 * d, 4).to(device, dtype).eval()
    x = _inputs((2,), n, 4 * d, device, dtype)[0]  # (N, L, E)

    def with_sdpa(x):
        N, L, E = x.shape
        q, k, v = (proj(x).reshape(N, L, 4, d).transpose(1, 2) for proj in (module.q_proj, module.k_proj,
                                                                            module.v_proj))  # (N, H, L, Dh)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (N, H, L, Dh)
        return module.out_proj(heads.transpose(1, 2).reshape(N, L, E))  # (N, H, L, Dh) -> (N, L, E)

    methods = {"SDPA in the module": with_sdpa,
               "MultiHeadAttention": lambda x: module(x, x, x, is_causal=True, need_weights=False)[0]}
    return methods, (x,)


def _groups(n: int, d: int, device, dtype, extra: dict):
    """The timed groups at size ``n`` (2x4 heads): ``(name, reference, methods, arguments)``; ``extra`` methods
    (the Triton kernel) join the causal group."""
    q, k, v = _inputs((2, 4), n, d, device, dtype)
    lengths = torch.tensor([n, (3 * n) // 4], device=device)
    padding = (torch.arange(n, device=device) < lengths[:, None])[:, None, None, :]  # (N, 1, 1, S): True = real
    grad_output = _inputs((2, 4), n, d, device, dtype, seed=1)[0]
    trained = tuple(t.detach().requires_grad_() for t in (q, k, v))
    with torch.no_grad():
        mha, x = _mha_pair(n, d, device, dtype)
    causal = {m: (lambda q, k, v, fn=fn: fn(q, k, v, is_causal=True))
              for m, fn in {**{m: METHODS[m] for m in FAST}, **extra}.items()}
    return [("causal", "sdpa", causal, (q, k, v)),
            ("padding", "sdpa", {m: (lambda q, k, v, m=m: METHODS[m](q, k, v, attn_mask=padding)) for m in FAST},
             (q, k, v)),
            ("MHA causal", "SDPA in the module", mha, x),
            ("fwd + bwd", "sdpa", {m: with_gradients(METHODS[m], grad_output) for m in TRAINED}, trained)]


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print its report, and return the measurements (for tests and notebooks)."""
    args = _parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    dtype = getattr(torch, args.dtype)
    d = args.head_dim
    triton, triton_says = triton_method(device, dtype, d)
    extra = {} if triton is None else {"triton": triton}
    methods = {**METHODS, **extra}
    machine = describe_machine()
    print("== environment", *machine_lines(machine, device, dtype), sep="\n  ")
    if args.part == "flex":
        from .flex_attention import run_flex

        return written(args.json, machine, {"flex": run_flex(args.quick, d)})
    if args.part in ("decoding", "serving", "speculative", "linear"):
        part = {"decoding": lambda quick: run_decoding_parts(quick) | {"linear": run_linear_decoding(quick)},
                "serving": lambda quick: {"serving": run_serving(quick)},
                "speculative": lambda quick: {"speculative": run_speculative(quick)},
                "linear": lambda quick: {"linear": run_linear_decoding(quick)}}[args.part]
        return written(args.json, machine, part(args.quick))
    q, k, v = _inputs((2, 4), max(args.sizes), d, device, dtype)
    print(f"  SDPA implementation at 2x4 heads, n={max(args.sizes)}: {sdpa_implementation(q, k, v)} (found with "
          f"torch.profiler)\n  Triton kernel: {triton_says}")
    del q, k, v
    size = 512 if args.quick else 2048
    ceilings = [matmul_gflops(device, dtype, size, args.repeats)]
    ratios: dict[tuple[str, int, str], float] = {}
    rows = []  # printed once the ceiling is known
    for bh in ((1, 1), (2, 4)):
        for n in args.sizes:
            inputs = _inputs(bh, n, d, device, dtype)
            timed = {**{m: fn for m, fn in methods.items() if m != "loop"}, PLAIN: plain_blocks,
                     MATMULS: matmuls_only}
            runs = [time_paired(timed, inputs, _repeats(args.repeats, n))]
            if n <= args.loop_max:  # the slow loop gets its own, fewer, paired runs
                runs.append(time_paired({m: METHODS[m] for m in ("sdpa", "loop")}, inputs, min(args.repeats, 3)))
            for m, ratio in _ratios(runs[0], WEIGHTS_REFERENCE).items():
                ratios[f"{bh[0]}x{bh[1]}", n, f"{m} / {WEIGHTS_REFERENCE}"] = ratio
            for times in runs:
                for m, ratio in _ratios(times, "sdpa").items():
                    if m == "sdpa" and times is not runs[0]:
                        continue  # the loop's own SDPA runs only serve its ratio
                    ratios[f"{bh[0]}x{bh[1]}", n, m] = ratio
                    rows.append((bh, n, m, statistics.median(times[m]), attention_flops(bh[0] * bh[1], n, n, d, d)))
    ceilings.append(matmul_gflops(device, dtype, size, args.repeats))
    ceiling = max(ceilings)
    print(f"\n== ceiling: square matmul ({size}²), median of {args.repeats} runs before and after the timings: "
          f"{ceilings[0]:.1f} and {ceilings[1]:.1f} GFLOP/s; the larger, {ceiling:.1f} GFLOP/s, is the ceiling")
    print(f"\n== time, d={d}, no mask: medians of paired, interleaved repeats ({3 * args.repeats} for n <= 512, "
          f"{2 * args.repeats} up to 1024, {args.repeats} above; the loop: {min(args.repeats, 3)}, paired with "
          f"its own SDPA runs); x SDPA, x math = median of the per-repeat ratios to SDPA, and to {WEIGHTS_REFERENCE} "
          f"(PyTorch's attention that returns the weights too)")
    print(f"  {'B x H':>5} {'n':>5}  {'method':<24} {'ms':>9} {'x SDPA':>7} {'x math':>7} {'GFLOP/s':>8} "
          f"{'% ceiling':>9}")
    for bh, n, m, seconds, work in rows:
        gflops, key = work / seconds / 1e9, f"{bh[0]}x{bh[1]}"
        to_math = ratios.get((key, n, f"{m} / {WEIGHTS_REFERENCE}"))
        print(f"  {bh[0]}x{bh[1]:<3} {n:>5}  {m:<24} {seconds * 1e3:>9.2f} {ratios[key, n, m]:>7.2f} "
              + (f"{to_math:>7.2f}" if to_math is not None else f"{'-':>7}")
              + f" {gflops:>8.1f} {100 * gflops / ceiling:>8.0f}%")
    print(f"\n== time, 2x4 heads, d={d}: causal (is_causal=True), padding mask (N, 1, 1, S) (the second sentence "
          f"3/4 real), MultiHeadAttention causal (E={4 * d}, 4 heads, need_weights=False), forward + backward "
          f"(gradients of query, key, value); x ref = paired ratio to the group's first method")
    print(f"  {'group':<11} {'n':>5}  {'method':<20} {'ms':>9} {'x ref':>7}")
    for n in [n for n in args.sizes if n >= 256] or [max(args.sizes)]:  # short runs tell little here
        for group, reference, group_methods, inputs in _groups(n, d, device, dtype, extra):
            times = time_paired(group_methods, inputs, _repeats(args.repeats, n))
            for m, ratio in _ratios(times, reference).items():
                ratios[group, n, m] = ratio
                print(f"  {group:<11} {n:>5}  {m:<20} {statistics.median(times[m]) * 1e3:>9.2f} {ratio:>7.2f}")
    memory = {} if args.part == "time" else memory_tables({m: METHODS[m] for m in METHODS if m != "loop"}, TRAINED,
                                                          args.memory_sizes, d, device, dtype)
    exp2 = exp2_vs_exp(device, dtype, _repeats(args.repeats, 512))
    print(f"\n== exp2 and exp on one block of scores (2x4 heads, 256 x 256, paired median): exp2(s * log2(e)) is "
          f"exp(s) within {exp2['max_relative_difference']:.1e} (relative) and takes {exp2['time_ratio']:.2f} times "
          f"as long here. Where exp2 is used: memory_efficient_attention's blocks and backward pass, and the Triton "
          f"kernel (tl.exp2: one ex2.approx instruction on an NVIDIA GPU, where exp is ex2.approx after a multiply "
          f"by log2(e), which the kernel folds into the scale). Information, not a target: on CPUs the ratio "
          f"differs from machine to machine.")
    targets = print_targets(ratios, memory, tuple(args.memory_sizes), d, torch.empty((), dtype=dtype).element_size())
    result = {"ceiling": ceiling, "ratios": ratios, "memory": memory, "exp2_vs_exp": exp2, "targets": targets}
    if args.part == "all":
        result |= run_decoding_parts(args.quick) | {"linear": run_linear_decoding(args.quick)}
    return written(args.json, machine, result)



if __name__ == "__main__":
    main()
