"""Lesson 14's kernel compiled for GPUs that are not here: every launch the course makes, for a T4, an A100 and an H100.

Triton's compiler needs no GPU: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 75, 32))`` runs the whole
NVIDIA pipeline (Triton IR, LLVM IR, PTX, and ``ptxas``, shipped in Triton's wheel) down to a binary. This module
binds the arguments of each launch as a real launch binds them (the same :func:`~.triton_launch.launch_arguments`,
the same specialisation of pointers and integers), compiles them for sm75 (T4), sm80 (A100; A10 and L4, sm86 and
sm89, compile the same way) and sm90 (H100), and reads from each binary its shared memory, registers, spills and
the instruction its ``tl.dot`` became: ``mma`` (tensor cores; ``wgmma`` on sm90) or ``fma`` (plain
multiply-adds). The shared memory is checked against the smallest limit of each class
(:data:`~.triton_launch.SHARED_MEMORY_KIB`): 64 KiB on sm75, 99 KiB on sm80 (the A10's and L4's; an A100 has
163), 227 KiB on sm90.

``python -m attention_lib.memory_efficient.triton_targets`` prints the table; ``tests/test_triton_targets.py``
runs it in a fresh process. Linux only (Triton).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass

import torch

from .triton_launch import SHARED_MEMORY_KIB, LaunchConfig, launch_arguments, launch_config

#: ``capability: (GPU, shared memory limit in KiB)`` of the targets compiled for.
TARGETS = {75: ("T4", SHARED_MEMORY_KIB["T4 (sm75)"]),
           80: ("A100, A10, L4", SHARED_MEMORY_KIB["A10 and L4 (sm86, sm89)"]),
           90: ("H100", SHARED_MEMORY_KIB["H100 (sm90)"])}

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: gpu-check's correctness cases, ``((L, S, E), is_causal)`` at 2 sentences x 3 heads, in every dtype
#: (``tools/gpu_check.py`` imports them from here).
GPU_CHECK_CASES = (((300, 260, 64), False), ((300, 300, 64), True), ((77, 1000, 128), False), ((1000, 1000, 32), True))

#: The timing of gpu-check and of lesson 14's section 8: float16, causal, 4 sentences x 8 heads, d = 64.
GPU_TIMING = {"sizes": (512, 1024, 2048, 4096, 8192), "heads": (4, 8), "head_dim": 64, "dtype": torch.float16}


@dataclass(frozen=True)
class Launch:
    """One launch of the kernel: where the course makes it, and its shapes (``heads`` = ``(N, H)``)."""

    where: str
    dtype: torch.dtype
    L: int
    S: int
    E: int
    Ev: int
    is_causal: bool
    block_sizes: tuple[int, int] | None = None
    heads: tuple[int, int] = (2, 3)


def course_launches() -> list[Launch]:
    """Every launch the course makes on a GPU (the tests' random shapes by their largest corner and their edges)."""
    launches = [Launch("gpu-check", dtype, L, S, E, E, causal) for dtype in DTYPES
                for (L, S, E), causal in GPU_CHECK_CASES]
    n, d = GPU_TIMING["sizes"][0], GPU_TIMING["head_dim"]
    launches.append(Launch("gpu-check timing, lesson 14 section 8", GPU_TIMING["dtype"], n, n, d, d, True,
                           heads=GPU_TIMING["heads"]))
    launches += [Launch("bench --quick --device cuda (causal group)", dtype, 64, 64, 64, 64, True, heads=(2, 4))
                 for dtype in DTYPES]  # gpu-check runs float32; --dtype float16 and bfloat16 too
    launches += [Launch("lesson 14", torch.float32, 100, 77, 32, 16, False, None, (2, 3)),  # its checks, sections 4-7
                 Launch("lesson 14", torch.float32, 100, 100, 32, 32, True, None, (2, 3)),
                 Launch("lesson 14", torch.float32, 70, 90, 16, 16, True, None, (1, 2)),
                 Launch("lesson 14", torch.float32, 40, 40, 16, 16, True, (16, 16), (1, 2))]
    for causal in (False, True):  # tests/test_triton_kernel.py: E, Ev in {16, 32}, blocks in {16, 32}, L, S <= 40
        launches += [Launch("tests", torch.float32, 40, 37, 32, 32, causal, (32, 32), (1, 2)),
                     Launch("tests", torch.float32, 33, 40, 16, 32, causal, (16, 32), (1, 2)),
                     Launch("tests, the kernel checker", torch.float32, 20, 37, 16, 16, causal, (16, 16), (1, 1))]
    launches += [Launch("tests", dtype, 20, 33, 16, 16, True, (16, 16), (1, 2)) for dtype in DTYPES[1:]]
    return launches


def bound_launch(kernel, backend, launch: Launch, capability: int):
    """``(config, signature, constexprs, attrs, options)`` of ``launch``, bound as ``kernel[grid](...)`` binds it."""
    from triton.runtime.jit import create_function_from_signature

    config = launch_config(launch.dtype, launch.E, launch.Ev, divmod(capability, 10))
    if launch.block_sizes is not None:
        config = LaunchConfig(*launch.block_sizes, config.num_warps, config.num_stages)
    B = launch.heads[0] * launch.heads[1]
    q, out = (torch.empty(B, launch.L, size, dtype=launch.dtype) for size in (launch.E, launch.Ev))
    k, v = (torch.empty(B, launch.S, size, dtype=launch.dtype) for size in (launch.E, launch.Ev))
    _, args, kwargs = launch_arguments(q, k, v, out, torch.empty(B, launch.L), is_causal=launch.is_causal,
                                       scale=None, config=config)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound_args, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, options, bound_args, specialization, options)
    return config, signature, constexprs, attrs, options


def _compile(job) -> dict:
    """Compile one bound launch for one target (in a worker process): what its binary needs."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .triton_kernel import compiled_kernel

    capability, signature, constexprs, attrs, options = job
    start = time.perf_counter()
    triton.knobs.compilation.always_compile = True  # compiled now, not found in Triton's cache
    triton.knobs.nvidia.dump_ptxas_log = True  # ptxas -v: registers and spills, printed
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        binary = triton.compile(ASTSource(compiled_kernel(), signature, constexprs, attrs),
                                target=GPUTarget("cuda", capability, 32), options=options.__dict__)
    ptx = binary.asm["ptx"]
    instruction = "mma (wgmma)" if "wgmma.mma_async" in ptx else "mma" if "mma.sync" in ptx else "fma"
    registers = re.search(r"Used (\d+) registers", log.getvalue())
    spills = re.search(r"(\d+) bytes spill stores", log.getvalue())
    return {"shared_kib": binary.metadata.shared / 1024, "instruction": instruction,
            "registers": int(registers.group(1)) if registers else None,
            "spill_bytes": int(spills.group(1)) if spills else None, "seconds": time.perf_counter() - start}


def compile_all(launches: list[Launch] | None = None, capabilities=tuple(TARGETS), jobs: int | None = None) -> list:
    """Compile every launch for every target, each distinct binary once; a row per (target, launch)."""
    import concurrent.futures
    import multiprocessing

    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    from .triton_kernel import compiled_kernel

    launches = course_launches() if launches is None else launches
    kernel, rows, jobs_by_key = compiled_kernel(), [], {}
    for capability in capabilities:
        backend = make_backend(GPUTarget("cuda", capability, 32))
        for launch in launches:
            config, *job = bound_launch(kernel, backend, launch, capability)
            key = repr((capability, *job[:3], job[3].num_warps, job[3].num_stages))
            jobs_by_key.setdefault(key, (capability, *job))
            rows.append((capability, launch, config, key))
    workers = jobs or min(len(jobs_by_key), os.cpu_count() or 1)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = dict(zip(jobs_by_key, pool.map(_compile, jobs_by_key.values()), strict=True))
    return [{"capability": capability, "gpu": TARGETS[capability][0], "limit_kib": TARGETS[capability][1],
             "where": launch.where, "dtype": str(launch.dtype).removeprefix("torch."), "L": launch.L, "S": launch.S,
             "E": launch.E, "Ev": launch.Ev, "is_causal": launch.is_causal, "config": asdict(config), **results[key]}
            for capability, launch, config, key in rows]


def main(argv: list[str] | None = None) -> int:
    """Print the table (or ``--json``); exit 1 if a binary needs more shared memory than its target has."""
    parser = argparse.ArgumentParser(prog="python -m attention_lib.memory_efficient.triton_targets",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument("--jobs", type=int, help="compiler processes (default: one per core)")
    args = parser.parse_args(argv)
    rows = compile_all(jobs=args.jobs)
    too_big = [row for row in rows if row["shared_kib"] > row["limit_kib"]]
    if args.json:
        print(json.dumps(rows))
        return int(bool(too_big))
    print(f"{'target':<16} {'dtype':<9} {'E':>4} {'Ev':>4} {'causal':<6} {'launch config':<36} {'shared KiB':>10} "
          f"{'regs':>5} {'spills B':>8}  tl.dot   where")
    for row in rows:
        config = LaunchConfig(**row["config"])
        print(f"sm{row['capability']} {row['gpu']:<11} {row['dtype']:<9} {row['E']:>4} {row['Ev']:>4} "
              f"{row['is_causal']!s:<6} {config!s:<36} {row['shared_kib']:>5.0f} / {row['limit_kib']:<3} "
              f"{row['registers']!s:>5} {row['spill_bytes']!s:>8}  {row['instruction']:<8} {row['where']}")
    print(f"{len({(r['capability'], r['dtype'], r['E'], r['Ev'], r['is_causal'], str(r['config'])) for r in rows})} "
          f"binaries; {'every one fits' if not too_big else f'{len(too_big)} need more shared memory than they have'}")
    return int(bool(too_big))


if __name__ == "__main__":
    sys.exit(main())
