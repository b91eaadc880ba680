"""The GPU check (`python course.py gpu-check`): on a CUDA machine, prove the course works there too.

1. the device tests (SDPA equivalence, fully masked rows, gradients) on `cuda`;
2. strict nbval over every notebook, executed on the GPU (outputs are rounded CPU values, so the stored
   outputs made on a CPU must hold);
3. loop / matmul / SDPA timings on the GPU.

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


def timings(device: str = "cuda", sizes=(32, 128, 512, 2048)) -> None:
    """Print loop / matrix / SDPA median times on ``device`` (the test suite runs it on the CPU, tiny)."""
    import attention_lib as al
    from attention_lib.data import random_qkv

    device = torch.device(device)
    clock = al.median_time  # warms up, synchronizes the GPU around the clock, returns the median

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


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA here: the GPU check needs a CUDA GPU (torch.cuda.is_available() is False); nothing to do.")
        return 0
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  CUDA {torch.version.cuda}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONHASHSEED": "0"}
    start = time.perf_counter()
    tests = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_devices.py", "tests/test_attention.py"], cwd=ROOT, env=env)
    nbval = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                             "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
                             "tests/nbval_sanitize.cfg", "notebooks"], cwd=ROOT, env=env)
    timings()
    print(f"device tests: {'passed' if tests == 0 else 'FAILED'}; nbval on GPU: "
          f"{'passed' if nbval == 0 else 'FAILED'}; {time.perf_counter() - start:.0f} s in all")
    return tests or nbval


if __name__ == "__main__":
    sys.exit(main())
