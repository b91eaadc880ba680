"""The benchmark's targets, each printed as met, missed or not measured, and the ``exp2`` / ``exp`` line.

Used by ``python -m attention_lib.bench`` (:mod:`attention_lib.bench.run`), which hands over its paired ratios
to SDPA and its peak-memory table.
"""

from __future__ import annotations

import math
import os
import statistics

import torch

from ..memory_efficient._blocks import DEFAULT_BLOCK_SIZE, LOG2_E, forward_blocks, key_blocks
from ..memory_efficient.forward import memory_efficient_attention
from .measure import MiB, growth_exponent, time_paired


def print_target_lines(title: str, targets, *, unmeasured: str = "", digits: int = 2) -> list:
    """Print ``== title`` and each target ``(text, value or None, sign, limit)`` as met, MISSED or not measured
    (``unmeasured``: what to run to measure it); return ``targets``. ``sign`` is ``">="``, ``"<="`` or ``"<"``.

    Example:
        >>> _ = print_target_lines("t", [("x <= 2", 1.5, "<=", 2.0), ("y >= 3", None, ">=", 3.0)], unmeasured="run y")
        <BLANKLINE>
        == t
          met          x <= 2: 1.50
          not measured y >= 3 (run y)
    """
    print(f"\n== {title}")
    for text, value, sign, limit in targets:
        if value is None:
            print(f"  {'not measured':<12} {text} ({unmeasured})")
            continue
        met = value >= limit if sign == ">=" else (value <= limit if sign == "<=" else value < limit)
        print(f"  {'met' if met else 'MISSED':<12} {text}: {value:.{digits}f}")
    return targets


#: The name, in the benchmark's tables, of PyTorch's attention that returns the weights too
#: (``torch.ops.aten._scaled_dot_product_attention_math``): what the weights path is judged against.
WEIGHTS_REFERENCE = "torch math (weights)"


def exp2_vs_exp(device: torch.device, dtype: torch.dtype, repeats: int) -> dict[str, float]:
    """``torch.exp2(s * log2(e))`` against ``torch.exp(s)`` on one block of scores (2x4 heads, 256 x 256).

    :func:`attention_lib.memory_efficient_attention`'s blocks and lesson 14's kernel count in powers of 2, as
    FlashAttention does: on an NVIDIA GPU ``exp2`` is one instruction (``ex2.approx``) and ``exp`` is that
    instruction after a multiply by ``log2(e)``, which a kernel folds into its scale. On a CPU the time ratio
    depends on the machine (0.55 on one, 1.37 on another, measured): it is printed for information.

    Returns:
        ``{"time_ratio": paired median time of ``torch.exp2`` / ``torch.exp`` on the same block (the multiply by
        ``log2(e)`` costs nothing there: it is folded into the queries' scale), "max_relative_difference": largest
        |exp2(s * log2(e)) - exp(s)| / exp(s)}``.

    Example:
        >>> exp2_vs_exp(torch.device("cpu"), torch.float32, repeats=3)["max_relative_difference"] < 1e-5
        True
    """
    scores = torch.randn(2, 4, 256, 256, generator=torch.Generator().manual_seed(0)).to(device, dtype)
    times = time_paired({"exp": torch.exp, "exp2": torch.exp2}, (scores,), repeats)  # log2(e) is folded elsewhere
    exp = torch.exp(scores)
    difference = (torch.exp2(scores * LOG2_E) - exp).abs().div(exp).max().item()
    return {"time_ratio": statistics.median(a / b for a, b in zip(times["exp2"], times["exp"], strict=True)),
            "max_relative_difference": difference}


#: The benchmark's names for :func:`plain_blocks` and :func:`matmuls_only`, timed beside the others for information:
#: on a CPU memory_efficient_attention hands its blocks to PyTorch's fused kernel; these two say what its own,
#: plain-PyTorch blocks cost, and what their matrix products alone cost.
PLAIN, MATMULS = "memory_efficient plain", "memory_efficient matmuls"


def plain_blocks(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """:func:`~attention_lib.memory_efficient_attention`'s plain forward pass (every block's scores, max,
    exponentials, sums and blend as PyTorch operations), in the blocks it takes by default, without its CPU fast path.

    Example:
        >>> q = torch.randn(1, 8, 4)
        >>> torch.allclose(plain_blocks(q, q, q), torch.nn.functional.scaled_dot_product_attention(q, q, q), atol=1e-6)
        True
    """
    batch = math.prod(torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
    return memory_efficient_attention(query, key, value, block_size=forward_blocks(batch, query.element_size()))


def matmuls_only(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block: int = DEFAULT_BLOCK_SIZE):
    """The two matrix products of :func:`plain_blocks`, block by block as it makes them (``q_block @ k_blockᵀ``
    then ``scores @ v_block``), without the softmax: the ceiling of the plain forward pass, which cannot be faster
    than its own matrix products. Returns nothing useful (the last product).

    Example:
        >>> q = torch.randn(1, 8, 4)
        >>> matmuls_only(q, q, q, block=4).shape
        torch.Size([1, 4, 4])
    """
    L, S = query.shape[-2], key.shape[-2]
    out = None
    for q_start in range(0, L, block):
        q_block = query[..., q_start:q_start + block, :]
        for k_start, k_stop in key_blocks(q_start, min(q_start + block, L), S, block, False):
            out = (q_block @ key[..., k_start:k_stop, :].contiguous().transpose(-2, -1)) @ value[..., k_start:k_stop, :]
    return out


def print_targets(ratios: dict, memory: dict, sizes: tuple[int, int], d: int,
                  nbytes: int) -> list[tuple[str, float | None, float]]:
    """Print every target as ``met``, ``MISSED`` or ``not measured`` (sizes not run), and return them.

    Args:
        ratios: ``{(group, n, method): paired ratio to the group's reference}`` from the timing tables.
        memory: ``{(method, n): peak bytes}`` from :func:`attention_lib.bench.memory_tables.memory_tables`.
        sizes: the two lengths of the memory tables.
        d: the head size; ``nbytes``: bytes per number.

    Returns:
        ``[(text, value or None, limit)]``, the value ``None`` where it was not measured.
    """
    checks: list[tuple[str, float | None, float]] = []

    def ratio(text, key, limit):
        checks.append((text, ratios.get(key), limit))

    for n in (512, 1024):  # the weights path against PyTorch's own weights path (SDPA never builds the weights)
        ratio(f"calculate_attention (weights) at 2x4, n={n} <= 1.1x {WEIGHTS_REFERENCE}",
              ("2x4", n, f"calculate_attention / {WEIGHTS_REFERENCE}"), 1.1)
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
    load = f"; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores" if hasattr(os, "getloadavg") else ""
    if hasattr(os, "getloadavg") and os.getloadavg()[0] > (os.cpu_count() or 1) and torch.get_num_threads() > 1:
        load += (": above the cores, every parallel operation waits for its threads to get a core, which hurts the "
                 "methods made of many small operations (memory_efficient) most; --threads 1 avoids the wait")
    print(f"\n== targets (ratios are paired medians; a target is judged on a quiet machine, its load below the number "
          f"of cores{load})")
    for text, value, limit in checks:
        if value is None:
            print(f"  {'not measured':<12} {text} (add n to --sizes)")
        else:
            print(f"  {'met' if value <= limit else 'MISSED':<12} {text}: {value:.2f}")
    sdpa = [f"n={n}: {ratios['2x4', n, 'calculate_attention']:.2f}x" for n in (512, 1024)
            if ("2x4", n, "calculate_attention") in ratios]
    if sdpa:
        print("  for information, calculate_attention (weights) at 2x4 against SDPA, which never builds the weights: "
              + ", ".join(sdpa))
    return checks
