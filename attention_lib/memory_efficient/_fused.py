"""The forward pass's fast path on a CPU: each block of keys through PyTorch's fused kernel, merged by log-sum-exp.

:func:`~attention_lib.memory_efficient_attention`'s own forward pass (:mod:`.forward`) makes every block's scores,
max, exponentials, sums and blend as separate PyTorch operations, each a pass over the block in memory. Here each
block of keys is handed to the fused kernel behind SDPA on the CPU
(``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``), which returns the block's output, already
normalised, and each query's log-sum-exp ``lse = max + log(sum)`` over that block: the running max and sum of the
online softmax in one number. Two blocks merge as the online softmax merges them (lesson 10): with
``lse = logaddexp(lse_a, lse_b)``, the output is ``o_a · exp(lse_a - lse) + o_b · exp(lse_b - lse)`` (the two
factors add up to 1, but a ``lerp`` would turn an infinite value into NaN where the plain pass keeps it infinite).
The memory stays linear in the length: the kernel works in tiles,
and what is kept between blocks is the output and one number per query. The backward pass is the package's own
(:mod:`.backward`): ``lse`` in base 2 is the row's max for a sum of 1.

It runs only where nothing can differ from the plain pass: no mask (with or without ``is_causal``, so no query is
left without a key), the default block size, a CPU, values as long as the keys (as the kernel needs), float32 or
float64 (half precision is computed in float32 by the caller), one batch shape for the three inputs, and no NaN in
the queries: the kernel gives a query holding a NaN zeros, not NaN, so one sum of the queries says whether the
plain pass, which keeps the NaN rule, must run instead (an infinity anywhere, or a NaN in a key or a value, comes
out as in the plain pass: tested).
"""

from __future__ import annotations

import math

import torch

from ._blocks import LOG2_E

#: PyTorch's fused attention kernel for the CPU: ``(output, logsumexp)`` of one call.
FUSED_KERNEL = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

#: Keys per call of the fused kernel. Each call writes an ``(N, H, L, Ev)`` output that the merge reads again, so
#: fewer, larger blocks move fewer bytes; the kernel keeps its own tiles inside. CPU time of one thread
#: against SDPA's, 2x4 heads, E = 64, n = 512-2,048, on an Intel Xeon (AVX-512 + AMX) shared with other work, for
#: each of ATEN_CPU_CAPABILITY unset, avx2 and default: 256 keys 1.25-1.34x, 512 keys 1.02-1.16x, 1,024 keys
#: 1.01-1.07x; cutting the queries too, in blocks of 512, 1.26-1.31x. 512 keys keep the blocks (two or more at
#: n >= 1,024) inside 1.5x.
FUSED_BLOCK = 512


def fused_applies(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask, by_cache: bool) -> bool:
    """Whether :func:`fused_forward` gives what the plain forward pass gives for these inputs (module docstring)."""
    if not (by_cache and attn_mask is None and query.device.type == "cpu" and 3 <= query.dim() <= 4
            and query.dtype in (torch.float32, torch.float64)
            and query.shape[:-2] == key.shape[:-2] == value.shape[:-2] and query.dim() == key.dim() == value.dim()
            and query.shape[-1] == value.shape[-1] and min(query.shape[-2], key.shape[-2], query.shape[-1]) > 0):
        return False
    return not math.isnan(query.detach().sum())


def fused_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool, scale: float,
                  block: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The forward pass in blocks of ``block`` keys (default :data:`FUSED_BLOCK`) with the fused kernel:
    ``(output, row_max, row_sum)`` as :func:`.forward._blockwise_forward` returns them (``row_max`` the base-2
    log-sum-exp, ``row_sum`` ones).

    Every call takes all the queries (cutting them too would have the kernel prepare each block of keys once per
    block of queries). With ``is_causal`` (top-left), keys ``k0:k1`` are seen only by queries ``k0`` onwards, and
    among them query ``k0 + a`` sees key ``k0 + b`` when ``b <= a``: the kernel's own top-left causal mask on
    ``query[k0:]``.
    """
    block = block or FUSED_BLOCK
    three = query.dim() == 3
    if three:  # the kernel reads (N, H, L, E)
        query, key, value = query[None], key[None], value[None]
    L, S = query.shape[-2], key.shape[-2]
    output = lse = None
    for k_start in range(0, min(S, L) if is_causal else S, block):
        k_stop, q_start = min(k_start + block, S), k_start if is_causal else 0
        block_out, block_lse = FUSED_KERNEL(query[..., q_start:, :], key[..., k_start:k_stop, :],
                                            value[..., k_start:k_stop, :], is_causal=is_causal, scale=scale)
        block_lse = block_lse.unsqueeze(-1)  # (N, H, L - q_start, 1)
        if output is None:
            output, lse = block_out, block_lse
            continue
        out, out_lse = output[..., q_start:, :], lse[..., q_start:, :]  # the queries that see this block
        merged = torch.logaddexp(out_lse, block_lse)  # o · exp(lse_o - lse) + o_b · exp(lse_b - lse):
        out.mul_((out_lse - merged).exp_()).addcmul_(block_out, block_lse.sub_(merged).exp_())
        out_lse.copy_(merged)
        del block_out, block_lse, merged  # freed before the next block's output is made: two outputs at most
    if three:
        output, lse = output[0], lse[0]
    return output, lse.mul_(LOG2_E), torch.ones_like(lse)
