"""The benchmark's FlexAttention part (``--part flex``): compiled ``flex_attention`` against SDPA with the dense mask.

Information, not a target: lesson 20 (``notebooks/20_flex_attention.ipynb``) shows that whether skipping the blocked
tiles pays depends on the share skipped, the head size and the CPU. For a causal mask and a sliding window of 128
keys, at n = 1,024 and 4,096 (``--quick``: 256 and 1,024), 4 heads of ``--head-dim``, it times the compiled kernel
against ``scaled_dot_product_attention`` given the same mask as a ``(1, 1, n, n)`` tensor, paired and interleaved
(:func:`~attention_lib.bench.measure.time_paired`), and checks the compiled output against
:func:`~attention_lib.flex.flex_reference` first. Where no C++ compiler is found it says why and times nothing.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from ..flex import causal_mod, dense_mask, find_compiler, flex_reference, sliding_window_mod
from .measure import time_paired

#: The rules timed: ``name -> mask_mod``.
RULES = {"causal": causal_mod, "window 128": sliding_window_mod(128)}


def time_flex(sizes=(1024, 4096), head_dim: int = 16, heads: int = 4, repeats: int = 5) -> dict:
    """Time compiled FlexAttention against SDPA with the dense mask: ``{"skipped": reason}`` or ``{"rows": [...]}``.

    Each row is ``{"rule", "n", "skipped %", "compile s", "flex ms", "sdpa ms", "flex / sdpa"}`` (the ratio: the
    median of the paired per-repeat ratios). Where :func:`~attention_lib.flex.find_compiler` gives a reason, the
    result is ``{"skipped": reason}`` and nothing is timed.

    Raises:
        AssertionError: if a compiled output differs from :func:`~attention_lib.flex.flex_reference` (a wrong
            kernel is not timed).
    """
    why_not = find_compiler()
    if why_not is not None:
        return {"skipped": why_not}
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention)
    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(1, heads, n, head_dim, generator=g) for _ in range(3))  # (B, H, n, E)
        for name, rule in RULES.items():
            blocks = create_block_mask(rule, None, None, n, n, device="cpu")
            start = time.perf_counter()
            out = compiled(q, k, v, block_mask=blocks)
            seconds = time.perf_counter() - start
            expected, _ = flex_reference(q, k, v, mask_mod=rule)
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
            dense = dense_mask(rule, 1, 1, n, n)  # (1, 1, n, n): what SDPA reads
            times = time_paired({"flex": lambda q, k, v, b=blocks: compiled(q, k, v, block_mask=b),
                                 "sdpa": lambda q, k, v, m=dense: F.scaled_dot_product_attention(q, k, v, attn_mask=m)},
                                (q, k, v), repeats)
            rows.append({"rule": name, "n": n, "skipped %": float(blocks.sparsity()), "compile s": seconds,
                         "flex ms": 1e3 * statistics.median(times["flex"]),
                         "sdpa ms": 1e3 * statistics.median(times["sdpa"]),
                         "flex / sdpa": statistics.median(f / s for f, s in zip(times["flex"], times["sdpa"],
                                                                                  strict=True))})
    return {"rows": rows}


def print_flex(result: dict, head_dim: int, repeats: int) -> None:
    """Print :func:`time_flex`'s result as a table (or the reason it was skipped).

    Example:
        >>> print_flex({"skipped": "no C++ compiler found"}, 16, 5)  # doctest: +ELLIPSIS
        <BLANKLINE>
        == FlexAttention (information, not a target): ...
          skipped: no C++ compiler found
    """
    print(f"\n== FlexAttention (information, not a target): compiled flex_attention against SDPA with the dense "
          f"mask, 4 heads, E={head_dim}, medians of {repeats} paired repeats; the timings are noisy on a shared "
          f"machine, and the winner depends on the CPU, the share of tiles skipped and the head size")
    if "skipped" in result:
        print(f"  skipped: {result['skipped']}")
        return
    print(f"  {'rule':<11} {'n':>5} {'skipped':>8} {'compile':>8} {'flex ms':>8} {'SDPA ms':>8} {'flex/SDPA':>9}")
    for row in result["rows"]:
        print(f"  {row['rule']:<11} {row['n']:>5} {row['skipped %']:>7.1f}% {row['compile s']:>7.1f}s "
              f"{row['flex ms']:>8.2f} {row['sdpa ms']:>8.2f} {row['flex / sdpa']:>9.2f}")


def run_flex(quick: bool = False, head_dim: int = 16) -> dict:
    """Time, print and return the FlexAttention part (``quick``: n = 256 and 1,024, 3 repeats)."""
    sizes, repeats = ((256, 1024), 3) if quick else ((1024, 4096), 5)
    result = time_flex(sizes, head_dim=head_dim, repeats=repeats)
    print_flex(result, head_dim, repeats)
    return result
