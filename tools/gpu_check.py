"""The GPU check (`python course.py gpu-check`): on a CUDA machine, prove the course works there, in one report.

Made for a short GPU window (about 10 minutes on a T4): every case below runs in turn, catches and reports its own
failure (the others still run), prints as it goes and lands in one report, `artifacts/gpu-check.txt` (or
`--report PATH`); the exit status is 1 if any case failed. `--only NAME ...` runs some of them.

1. `device tests`: tests/test_devices.py, test_attention.py, test_triton_kernel.py and test_triton_gpu.py on `cuda`;
2. `backward`: `memory_efficient_attention`'s gradients against SDPA's (no mask, bool, float and causal masks, a
   fully masked row; float32, float16, bfloat16);
3. `triton launch`: the GPU, its shared memory, and the launch config chosen for each case below;
4. `triton kernel`: the course's Triton kernel compiled: its output and log-sum-exp against SDPA in float32, float16
   and bfloat16, causal and ragged, then what each compiled binary needs (shared memory, registers, spills);
5. `triton timing`: its time and peak memory against SDPA over n (float16, causal, as lesson 14 section 8);
6. `timings`: loop / matmul / SDPA times on the GPU;
7. `bench`: `python -m attention_lib.bench --quick --device cuda` (with the Triton kernel in the causal group);
8. `lesson 14`: strict nbval of notebooks/14_triton_kernel.ipynb and its solution, executed on the GPU (the stored
   outputs come from a CPU: outputs are rounded CPU values, device-dependent ones in ignored cells).

Without CUDA it says so, lists what it would run, and exits 0 (it is not part of CI).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.project import NBVAL_ARGS, run_env  # noqa: E402 - the one copy of the test environment and nbval flags

REPORT = ROOT / "artifacts" / "gpu-check.txt"
LESSON_14 = ["notebooks/14_triton_kernel.ipynb", "notebooks/solutions/14_triton_kernel_solution.ipynb"]
DEVICE_TESTS = ["tests/test_devices.py", "tests/test_attention.py", "tests/test_triton_kernel.py",
                "tests/test_triton_gpu.py"]


def _randn(*shape: int, generator: torch.Generator, device, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=generator).to(device, dtype)


def timings(device: str = "cuda", sizes=(32, 128, 512, 2048)) -> bool:
    """Print loop / matrix / SDPA median times on ``device`` (the test suite runs it on the CPU, tiny)."""
    import attention_lib as al
    from attention_lib.bench import median_time

    g = torch.Generator().manual_seed(0)
    print(f"{'n':>6} {'loop (ms)':>10} {'matrix (ms)':>12} {'SDPA (ms)':>10} {'loop/SDPA':>10} {'matrix/SDPA':>12}")
    for n in sizes:
        q, k, v = (_randn(4, 8, n, 64, generator=g, device=device) for _ in range(3))
        sdpa = median_time(torch.nn.functional.scaled_dot_product_attention, q, k, v, repeats=10)
        matrix = median_time(al.calculate_attention, q, k, v, repeats=10)
        if n <= 128:
            loop = median_time(al.loop_attention, q, k, v, repeats=3)
            loop_text, ratio = f"{loop * 1e3:10.2f}", f"{loop / sdpa:10.1f}"
        else:
            loop_text, ratio = f"{'-':>10}", f"{'-':>10}"
        print(f"{n:6d} {loop_text} {matrix * 1e3:12.3f} {sdpa * 1e3:10.3f} {ratio} {matrix / sdpa:12.2f}")
    return True


def backward_check(device: str = "cuda") -> bool:
    """Compare ``memory_efficient_attention``'s gradients with SDPA's on ``device``; print one line per case."""
    import torch.nn.functional as F

    import attention_lib as al

    g = torch.Generator().manual_seed(0)
    allowed = torch.rand(2, 1, 300, 260, generator=g) > 0.3
    allowed[0, 0, 7] = False  # a query without any key: zero output, zero gradients
    cases = {"no mask": {}, "bool mask": {"attn_mask": allowed},
             "float mask": {"attn_mask": torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))},
             "causal": {"is_causal": True}}
    ok = True
    for dtype, tol in ((torch.float32, 1e-4), (torch.float16, 2e-2), (torch.bfloat16, 5e-2)):
        for name, options in cases.items():
            options = {k: (v.to(device, dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else
                           v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in options.items()}
            q, k, v = (_randn(2, 3, n, 32, generator=g, device=device, dtype=dtype).requires_grad_()
                       for n in (300, 260, 260))
            grad_output = _randn(2, 3, 300, 32, generator=g, device=device, dtype=dtype)
            ours = torch.autograd.grad(al.memory_efficient_attention(q, k, v, block_size=64, **options), (q, k, v),
                                       grad_output)
            exact = [t.detach().float().requires_grad_() for t in (q, k, v)]  # the reference in float32
            float_options = {k: (v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                             for k, v in options.items()}
            expected = torch.autograd.grad(F.scaled_dot_product_attention(*exact, **float_options), exact,
                                           grad_output.float())
            errors = [(a.float() - b).abs().max().item() / (b.abs().max().item() + 1e-6) for a, b in
                      zip(ours, expected, strict=True)]
            good = all(e <= tol for e in errors) and all(bool(torch.isfinite(a).all()) for a in ours)
            ok &= good
            print(f"  backward {str(dtype).removeprefix('torch.'):<9} {name:<11} relative error dQ, dK, dV: "
                  + ", ".join(f"{e:.1e}" for e in errors) + ("" if good else "  FAILED"))
    return ok


def launch_choices(device: str = "cuda") -> bool:
    """Print the GPU and the launch config the launcher chooses for each of gpu-check's Triton cases."""
    from attention_lib.memory_efficient.triton_launch import launch_config
    from attention_lib.memory_efficient.triton_targets import DTYPES, GPU_CHECK_CASES

    capability = torch.cuda.get_device_capability(device) if device == "cuda" else None
    if device == "cuda":
        properties = torch.cuda.get_device_properties(device)
        print(f"  {properties.name}: sm{capability[0]}{capability[1]}, shared memory per program (opt-in) "
              f"{properties.shared_memory_per_block_optin // 1024} KiB, {properties.multi_processor_count} SMs")
    for dtype in DTYPES:
        for E in sorted({E for (_, _, E), _ in GPU_CHECK_CASES}):
            print(f"  {str(dtype).removeprefix('torch.'):<9} E = Ev = {E:<4} {launch_config(dtype, E, E, capability)}")
    return True


def triton_check(device: str = "cuda", cases=None) -> bool:
    """Compare the Triton kernel's output and log-sum-exp with SDPA on ``device`` (one line per case), then say what
    each compiled binary needs. ``cases`` are ``((L, S, E), is_causal)``; the suite runs it on the CPU, tiny."""
    import torch.nn.functional as F

    from attention_lib.memory_efficient.triton_kernel import triton_attention_forward
    from attention_lib.memory_efficient.triton_targets import GPU_CHECK_CASES

    g = torch.Generator().manual_seed(0)
    ok = True
    for dtype, tol in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        for (L, S, E), is_causal in GPU_CHECK_CASES if cases is None else cases:
            q, k, v = (_randn(2, 3, n, E, generator=g, device=device, dtype=dtype) for n in (L, S, S))
            output, lse = triton_attention_forward(q, k, v, is_causal=is_causal)
            expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=is_causal)
            scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(E)  # (2, 3, L, E) @ (2, 3, E, S)
            if is_causal:
                scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=device).tril(), float("-inf"))
            errors = ((output.float() - expected).abs().max().item(),
                      (lse - torch.logsumexp(scores, -1)).abs().max().item())
            good = max(errors) <= tol and bool(torch.isfinite(output).all())
            ok &= good
            print(f"  triton {str(dtype).removeprefix('torch.'):<9} L={L:<5} S={S:<5} E={E:<4} causal={is_causal!s:<5} "
                  f"max abs error output {errors[0]:.1e}, lse {errors[1]:.1e}" + ("" if good else "  FAILED"))
    _print_binaries()
    return ok


def _print_binaries() -> None:
    """What each kernel compiled in this process needs on this GPU (nothing is compiled on a CPU)."""
    from attention_lib.memory_efficient.triton_kernel import compiled_kernel

    for caches in getattr(compiled_kernel(), "device_caches", {}).values():
        for binary in caches[0].values():
            meta = binary.metadata
            print(f"  compiled: {meta.num_warps} warps, {meta.num_stages} stages: shared memory "
                  f"{meta.shared / 1024:.0f} KiB, {binary.n_regs} registers, {binary.n_spills} bytes spilled")


def triton_timings(device: str = "cuda", sizes=None, batch=None) -> bool:
    """Time the Triton kernel against SDPA (float16, causal, `batch` = sentences x heads, d = 64), and its memory."""
    import torch.nn.functional as F

    from attention_lib.bench import median_time
    from attention_lib.bench.measure import peak_memory
    from attention_lib.memory_efficient.triton_kernel import triton_attention
    from attention_lib.memory_efficient.triton_targets import GPU_TIMING

    functions = {"triton": lambda q, k, v: triton_attention(q, k, v, is_causal=True),
                 "SDPA": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    g = torch.Generator().manual_seed(0)
    dtype = GPU_TIMING["dtype"] if device == "cuda" else torch.float32
    print(f"{'n':>6} {'triton (ms)':>12} {'SDPA (ms)':>10} {'triton/SDPA':>12} {'triton MiB':>11} {'SDPA MiB':>9}")
    for n in GPU_TIMING["sizes"] if sizes is None else sizes:
        q, k, v = (_randn(*(batch or GPU_TIMING["heads"]), n, GPU_TIMING["head_dim"], generator=g, device=device,
                          dtype=dtype) for _ in range(3))
        repeats = 20 if device == "cuda" else 1
        times = {name: median_time(fn, q, k, v, repeats=repeats) for name, fn in functions.items()}
        memory = {name: peak_memory(fn, q, k, v) / 2**20 for name, fn in functions.items()}
        ratio = times["triton"] / times["SDPA"]
        print(f"{n:6d} {times['triton'] * 1e3:12.3f} {times['SDPA'] * 1e3:10.3f} {ratio:12.2f} "
              f"{memory['triton']:11.1f} {memory['SDPA']:9.1f}")
    return True


def _command(*argv: str, timeout: int) -> Callable[[], bool]:
    """A case that runs ``argv`` from the repository root (in the test environment) and passes if it exits 0."""
    def run() -> bool:
        result = subprocess.run(argv, cwd=ROOT, env=run_env(), capture_output=True, text=True, timeout=timeout,
                                check=False)
        print(result.stdout[-6000:] + result.stderr[-3000:])
        return result.returncode == 0

    run.__doc__ = " ".join(argv)
    return run


@dataclass(frozen=True)
class Case:
    """One part of the check: a name, what it does, and the function that does it (``True`` = passed)."""

    name: str
    does: str
    run: Callable[[], bool]


def cases() -> list[Case]:
    """The check's cases, in the order they run (about 10 minutes on a T4)."""
    python = sys.executable
    return [
        Case("device tests", "pytest " + " ".join(DEVICE_TESTS),
             _command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *DEVICE_TESTS, timeout=300)),
        Case("backward", "memory_efficient_attention's gradients vs SDPA's, 3 dtypes x 4 masks", backward_check),
        Case("triton launch", "the GPU's shared memory and the launch config of each Triton case", launch_choices),
        Case("triton kernel", "the compiled kernel's output and log-sum-exp vs SDPA, 3 dtypes x 4 shapes",
             triton_check),
        Case("triton timing", "the kernel's time and peak memory vs SDPA, float16, causal, n = 512..8192",
             triton_timings),
        Case("timings", "loop / matmul / SDPA times, n = 32..2048", timings),
        Case("bench", "python -m attention_lib.bench --quick --device cuda",
             _command(python, "-m", "attention_lib.bench", "--quick", "--device", "cuda", timeout=240)),
        Case("lesson 14", "strict nbval of " + " and ".join(LESSON_14),
             _command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *NBVAL_ARGS,
                      *LESSON_14, timeout=300)),
    ]


def run_case(case: Case) -> tuple[bool, str, float]:
    """Run one case, printing as it goes: ``(passed, everything it printed, seconds)``; an exception fails it."""
    print(f"\n== {case.name}: {case.does}", flush=True)
    captured, outer = io.StringIO(), sys.stdout

    class Tee(io.TextIOBase):
        def write(self, text):
            outer.write(text)
            return captured.write(text)

    start = time.perf_counter()
    with contextlib.redirect_stdout(Tee()):
        try:
            passed = bool(case.run())
        except Exception:  # noqa: BLE001 - every failure is reported, and the other cases still run
            traceback.print_exc(file=sys.stdout)
            passed = False
    seconds = time.perf_counter() - start
    print(f"== {case.name}: {'passed' if passed else 'FAILED'} ({seconds:.0f} s)", flush=True)
    return passed, captured.getvalue(), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python course.py gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=REPORT, help=f"where to write the report (default: {REPORT})")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these cases (by name)")
    args = parser.parse_args(argv)
    chosen = [c for c in cases() if args.only is None or c.name in args.only]
    if not torch.cuda.is_available():
        where = args.report.relative_to(ROOT) if args.report.is_relative_to(ROOT) else args.report
        print("No CUDA GPU here (torch.cuda.is_available() is False), so nothing was run. On a machine with an NVIDIA "
              f"GPU this command runs these {len(chosen)} cases and writes one report to {where}:")
        for case in chosen:
            print(f"  - {case.name}: {case.does}")
        return 0
    header = (f"GPU check: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
              f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(header, flush=True)
    results = [(case, *run_case(case)) for case in chosen]
    summary = [f"  {'passed' if passed else 'FAILED'}  {case.name} ({seconds:.0f} s)" for case, passed, _, seconds in
               results]
    failed = [case.name for case, passed, *_ in results if not passed]
    verdict = f"{len(results) - len(failed)} of {len(results)} cases passed" + (
        f"; FAILED: {', '.join(failed)}" if failed else "")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join([header, "", *summary, verdict, ""] + [
        f"== {case.name}: {case.does}\n{output}" for case, _, output, _ in results]))
    print("\n" + "\n".join(summary) + f"\n{verdict}\nreport: {args.report}")
    return int(bool(failed))


if __name__ == "__main__":
    sys.exit(main())
