"""The benchmark's targets, each printed as met, missed or not measured, and the ``exp`` / ``exp2`` row.

Used by ``python -m attention_lib.bench`` (:mod:`attention_lib.bench.run`), which hands over its paired ratios
to SDPA and its peak-memory table.
"""

from __future__ import annotations

import statistics

import torch

from .measure import MiB, growth_exponent, time_paired


def exp2_over_exp(device: torch.device, dtype: torch.dtype, repeats: int) -> float:
    """Paired time ratio ``torch.exp2`` / ``torch.exp`` on one block of scores (2x4 heads, 256 x 256).

    :func:`attention_lib.memory_efficient_attention` spends much of its time in ``exp``. FlashAttention counts
    in powers of 2 (``exp2``) because it is faster on GPUs; the package's private block code does too, as long
    as this ratio stays below 1 on the machine the course runs on (the lessons' code uses ``exp``).

    Example:
        >>> exp2_over_exp(torch.device("cpu"), torch.float32, repeats=3) > 0
        True
    """
    scores = torch.randn(2, 4, 256, 256, generator=torch.Generator().manual_seed(0)).to(device, dtype)
    times = time_paired({"exp": torch.exp, "exp2": torch.exp2}, (scores,), repeats)
    return statistics.median(a / b for a, b in zip(times["exp2"], times["exp"], strict=True))


def print_targets(ratios: dict, memory: dict, sizes: tuple[int, int], d: int, nbytes: int,
                  exp_ratio: float) -> list[tuple[str, float | None, float]]:
    """Print every target as ``met``, ``MISSED`` or ``not measured`` (sizes not run), and return them.

    Args:
        ratios: ``{(group, n, method): paired ratio to the group's reference}`` from the timing tables.
        memory: ``{(method, n): peak bytes}`` from :func:`attention_lib.bench.memory_tables.memory_tables`.
        sizes: the two lengths of the memory tables.
        d: the head size; ``nbytes``: bytes per number.
        exp_ratio: :func:`exp2_over_exp`.

    Returns:
        ``[(text, value or None, limit)]``, the value ``None`` where it was not measured.
    """
    checks: list[tuple[str, float | None, float]] = []

    def ratio(text, key, limit):
        checks.append((text, ratios.get(key), limit))

    for n, limit in ((512, 1.5), (1024, 2.5)):
        ratio(f"calculate_attention (weights) at 2x4, n={n} <= {limit}x SDPA", ("2x4", n, "calculate_attention"),
              limit)
    for n in (512, 1024, 2048):
        ratio(f"need_weights=False at 2x4, n={n} <= 1.1x SDPA", ("2x4", n, "need_weights=False"), 1.1)
    for n in (1024, 2048):
        ratio(f"causal need_weights=False at n={n} <= 1.1x SDPA(is_causal=True)",
              ("causal", n, "need_weights=False"), 1.1)
    for n in (1024, 2048):
        ratio(f"MultiHeadAttention causal at n={n} <= 1.2x the module with SDPA(is_causal=True)",
              ("MHA causal", n, "MultiHeadAttention"), 1.2)
    for n in (1024, 2048):
        ratio(f"memory_efficient forward at 2x4, n={n} <= 1.5x SDPA", ("2x4", n, "memory_efficient"), 1.5)
    ratio("memory_efficient forward + backward at n=1024 <= 3x SDPA's", ("fwd + bwd", 1024, "memory_efficient"), 3.0)
    checks.append(("exp2 / exp on a 2x4 x 256 x 256 block < 1 (memory_efficient counts in powers of 2)",
                   exp_ratio, 1.0))
    if memory:
        n1, n2 = sizes
        out, square = 8 * n2 * d * nbytes, 8 * n2 * n2 * nbytes
        checks.append((f"calculate_attention (weights) peak at n={n2} <= two n x n buffers + output",
                       memory["calculate_attention", n2] / (2 * square + out), 1.0))
        for key, text in (("memory_efficient", "forward"), ("memory_efficient fwd+bwd", "forward + backward")):
            checks.append((f"memory_efficient {text}: growth exponent n={n1}..{n2} <= 1.3",
                           growth_exponent(n1, memory[key, n1], n2, memory[key, n2]), 1.3))
        checks.append((f"memory_efficient forward: peak at n={n2} - output <= 32 MiB",
                       (memory["memory_efficient", n2] - out) / MiB, 32))
        checks.append((f"memory_efficient forward + backward: peak at n={n2} - input gradients <= 64 MiB",
                       (memory["memory_efficient fwd+bwd", n2] - 3 * out) / MiB, 64))
    print("\n== targets (ratios are paired medians; a target is judged on a quiet machine)")
    for text, value, limit in checks:
        if value is None:
            print(f"  {'not measured':<12} {text} (add n to --sizes)")
        else:
            print(f"  {'met' if value <= limit else 'MISSED':<12} {text}: {value:.2f}")
    return checks
