"""The GPU check (`python course.py gpu-check`): on a CUDA machine, prove the course works there too.

1. the device tests (SDPA equivalence, fully masked rows, gradients) on `cuda`;
2. the backward pass of `memory_efficient_attention` against SDPA's gradients on `cuda` (no mask, bool,
   float and causal masks, a fully masked row; float32, and float16/bfloat16 within half-precision tolerance);
3. strict nbval over every notebook, executed on the GPU (outputs are rounded CPU values, so the stored
   outputs made on a CPU must hold), with the same environment and nbval flags as `python course.py test`;
4. loop / matmul / SDPA timings on the GPU, then `python -m attention_lib.bench --quick --device cuda`
   (forward and forward + backward times, peak memory of both, and the targets);
5. the course's Triton kernel (`attention_lib.memory_efficient.triton_kernel`), compiled: its output and
   log-sum-exp against SDPA in float32/float16/bfloat16, causal and ragged, then its time and peak memory
   against SDPA over n.

Without CUDA it says so and exits 0 (it is not part of CI). It is meant to finish in under 5 minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course import NBVAL_ARGS, RUN_ENV  # noqa: E402 - the one copy of the test environment and nbval flags


def timings(device: str = "cuda", sizes=(32, 128, 512, 2048)) -> None:
    """Print loop / matrix / SDPA median times on ``device`` (the test suite runs it on the CPU, tiny)."""
    import attention_lib as al
    from attention_lib.bench import median_time
    from attention_lib.toy_data import random_qkv

    device = torch.device(device)
    clock = median_time  # warms up, synchronizes the GPU around the clock, returns the median

    print(f"{'n':>6} {'loop (ms)':>10} {'matrix (ms)':>12} {'SDPA (ms)':>10} {'loop/SDPA':>10} {'matrix/SDPA':>12}")
    for n in sizes:
        q, k, v = random_qkv(4, 8, L=n, E=64, seed=0, device=device)
        sdpa = clock(torch.nn.functional.scaled_dot_product_attention, q, k, v, repeats=10)
        matrix = clock(al.calculate_attention, q, k, v, repeats=10)
        if n <= 128:
            loop = clock(al.loop_attention, q, k, v, repeats=3)
            loop_text, ratio = f"{loop * 1e3:10.2f}", f"{loop / sdpa:10.1f}"
        else:
            loop_text, ratio = f"{'-':>10}", f"{'-':>10}"
        print(f"{n:6d} {loop_text} {matrix * 1e3:12.3f} {sdpa * 1e3:10.3f} {ratio} {matrix / sdpa:12.2f}")


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
            q, k, v = (torch.randn(2, 3, n, 32, generator=g).to(device, dtype).requires_grad_()
                       for n in (300, 260, 260))
            grad_output = torch.randn(2, 3, 300, 32, generator=g).to(device, dtype)
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


TRITON_CASES = (((300, 260, 64), False), ((300, 300, 64), True), ((77, 1000, 128), False), ((1000, 1000, 32), True))


def triton_check(device: str = "cuda", cases=TRITON_CASES, sizes=(512, 1024, 2048, 4096, 8192), batch=(4, 8)) -> bool:
    """Compare the Triton kernel's output and log-sum-exp with SDPA on ``device`` (one line per case), then time it.

    ``cases`` are ``((L, S, E), is_causal)``; the test suite runs it on the CPU, in the interpreter, tiny.
    """
    import math

    import torch.nn.functional as F

    from attention_lib.memory_efficient.triton_kernel import triton_attention, triton_attention_forward

    g = torch.Generator().manual_seed(0)
    ok = True
    for dtype, tol in ((torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        for (L, S, E), is_causal in cases:
            q, k, v = (torch.randn(2, 3, n, E, generator=g).to(device, dtype) for n in (L, S, S))
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
    triton_timings(triton_attention, device, sizes, batch)
    return ok


def triton_timings(triton_attention, device: str, sizes, batch) -> None:
    """Time the Triton kernel against SDPA (float16, causal, `batch` = sentences x heads, d = 64), and its memory."""
    import torch.nn.functional as F

    from attention_lib.bench import median_time
    from attention_lib.bench.measure import peak_memory
    from attention_lib.toy_data import random_qkv

    functions = {"triton": lambda q, k, v: triton_attention(q, k, v, is_causal=True),
                 "SDPA": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    print(f"{'n':>6} {'triton (ms)':>12} {'SDPA (ms)':>10} {'triton/SDPA':>12} {'triton MiB':>11} {'SDPA MiB':>9}")
    for n in sizes:
        q, k, v = random_qkv(*batch, L=n, E=64, seed=n, dtype=torch.float16, device=device)
        repeats = 20 if device == "cuda" else 1
        times = {name: median_time(fn, q, k, v, repeats=repeats) for name, fn in functions.items()}
        memory = {name: peak_memory(fn, q, k, v) / 2**20 for name, fn in functions.items()}
        ratio = times["triton"] / times["SDPA"]
        print(f"{n:6d} {times['triton'] * 1e3:12.3f} {times['SDPA'] * 1e3:10.3f} {ratio:12.2f} "
              f"{memory['triton']:11.1f} {memory['SDPA']:9.1f}")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA here: the GPU check needs a CUDA GPU (torch.cuda.is_available() is False); nothing to do.")
        return 0
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  CUDA {torch.version.cuda}", flush=True)
    env = {**os.environ, **RUN_ENV}
    start = time.perf_counter()
    tests = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_devices.py", "tests/test_attention.py"], cwd=ROOT, env=env)
    backward = backward_check("cuda")
    try:
        kernel = triton_check("cuda")
    except ImportError as error:  # triton missing: say so, do not stop the rest of the check
        print(f"  triton kernel: not checked ({error})")
        kernel = False
    nbval = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                             *NBVAL_ARGS, "notebooks"], cwd=ROOT, env=env)
    timings()
    bench = subprocess.call([sys.executable, "-m", "attention_lib.bench", "--quick", "--device", "cuda"], cwd=ROOT,
                            env=env)
    print(f"device tests: {'passed' if tests == 0 else 'FAILED'}; backward pass: {'passed' if backward else 'FAILED'}; "
          f"Triton kernel: {'passed' if kernel else 'FAILED'}; "
          f"nbval on GPU: {'passed' if nbval == 0 else 'FAILED'}; benchmark: {'ran' if bench == 0 else 'FAILED'}; "
          f"{time.perf_counter() - start:.0f} s in all")
    return tests or nbval or bench or int(not backward) or int(not kernel)


if __name__ == "__main__":
    sys.exit(main())
