"""Where the benchmark ran: the CPU, the kernels torch picked for it, its caches, threads and load.

A ratio measured on one kind of CPU says little about another: an AVX-512 machine with AMX runs other matrix
kernels than an AVX2 laptop, and the BLAS library (MKL on x86) picks its own code per vendor. The benchmark's
header prints :func:`describe_machine`, and ``--json`` writes it beside every ratio, so that runs from different
machines can be read side by side.
"""

from __future__ import annotations

import json
import os
import platform
import sys

import torch

from ..memory_efficient._blocks import cache_sizes

#: The environment variables that change which kernels run: torch's own (``ATEN_CPU_CAPABILITY``), MKL's (its
#: instruction set, and its conditional numerical reproducibility mode) and oneDNN's.
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA",
                    "OMP_NUM_THREADS")
#: The instruction-set extensions worth naming, as ``/proc/cpuinfo`` spells them.
FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


def _cpuinfo() -> dict[str, str]:
    try:
        with open("/proc/cpuinfo") as f:
            fields = {}
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                name, _, value = line.partition(":")
                fields[name.strip()] = value.strip()
            return fields
    except OSError:
        return {}


def describe_machine() -> dict:
    """The machine and the kernels torch runs on it, as a dict that ``--json`` writes as it is.

    Keys: ``cpu`` (model name), ``vendor``, ``features`` (which of :data:`FEATURES` the CPU has),
    ``torch_cpu_capability`` (the kernels ATen dispatches to: ``AVX512``, ``AVX2`` or ``DEFAULT``), ``blas`` (MKL
    or not), ``caches`` (:func:`cache_sizes`), ``cores``, ``torch_threads``, ``load`` (1, 5, 15 min, or ``None``),
    ``torch``, ``python``, ``platform`` and ``environment`` (the :data:`KERNEL_VARIABLES` that are set).

    Example:
        >>> machine = describe_machine()
        >>> machine["torch_cpu_capability"] in ("AVX512", "AVX2", "DEFAULT", "NO AVX", "VSX", "ZVECTOR", "SVE256")
        True
    """
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
    return {"cpu": info.get("model name") or platform.processor() or "unknown CPU",
            "vendor": info.get("vendor_id", "unknown"), "features": [f for f in FEATURES if f in flags],
            "torch_cpu_capability": capability,
            "blas": "MKL" if torch.backends.mkl.is_available() else "not MKL",
            "caches": cache_sizes(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "torch": torch.__version__, "python": sys.version.split()[0], "platform": platform.platform(),
            "environment": {v: os.environ[v] for v in KERNEL_VARIABLES if v in os.environ}}


def machine_lines(machine: dict, device: torch.device, dtype: torch.dtype) -> list[str]:
    """The header's lines for :func:`describe_machine`'s dict.

    Example:
        >>> lines = machine_lines(describe_machine(), torch.device("cpu"), torch.float32)
        >>> lines[1].startswith("CPU: ")
        True
    """
    caches = ", ".join(f"{name} {size // 1024} KiB" for name, size in machine["caches"].items()) or "not listed"
    features = ", ".join(machine["features"]) or "none of " + ", ".join(FEATURES)
    env = ", ".join(f"{k}={v}" for k, v in machine["environment"].items()) or "none set"
    lines = [f"torch {machine['torch']}, python {machine['python']}, {machine['platform']}",
             f"CPU: {machine['cpu']} ({machine['vendor']}); features: {features}",
             f"torch's CPU kernels: {machine['torch_cpu_capability']}; BLAS: {machine['blas']}; kernel variables: "
             f"{env}",
             f"caches (per core, L3 shared): {caches}",
             f"device: {device}, dtype: {str(dtype).removeprefix('torch.')}, torch threads: "
             f"{machine['torch_threads']}, CPU cores: {machine['cores']}"]
    if device.type == "cuda":
        lines.append(f"GPU: {torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}")
    if machine["load"] is not None:
        busy = "above" if machine["load"][0] > (machine["cores"] or 1) else "at or below"
        lines.append("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in machine["load"])
                     + f"  ({busy} the number of cores; above it, other programs compete for them: noisier times)")
    return lines


def written(path: str | None, machine: dict, result: dict) -> dict:
    """``result`` with the machine it ran on, written as JSON to ``path`` when given: tuple keys become lists,
    targets become ``{"text", "value", "limit", "met"}``, the load is read again at the end."""
    result = {"machine": machine, "load_at_end": describe_machine()["load"], **result}
    if path:
        with open(path, "w") as f:
            json.dump(_plain(result), f, indent=1)
        print(f"\n== written to {path}")
    return result


def _plain(x):
    """JSON's types for the benchmark's results (see :func:`written`)."""
    if isinstance(x, dict):
        if x and all(isinstance(k, tuple) for k in x):
            return [{"key": list(k), "value": _plain(v)} for k, v in x.items()]
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        number = (int, float)
        if (len(x) in (3, 4) and isinstance(x[0], str) and (x[1] is None or isinstance(x[1], number))
                and isinstance(x[-1], number) and not isinstance(x[-1], bool)):  # (text, value, [sign,] limit)
            value, limit, sign = x[1], x[-1], x[2] if len(x) == 4 else "<="
            met = None if value is None else (value >= limit if sign == ">=" else value <= limit if sign == "<="
                                              else value < limit)
            return {"text": x[0], "value": value, "limit": limit, "sign": sign, "met": met}
        return [_plain(y) for y in x]
    return x
