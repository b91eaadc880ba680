"""The absorbed form's fast path when one sequence decodes on a CPU: its keys cut into chunks that threads share.

In the absorbed form every head's query reads one shared key (the latent), so a decoding step of one sequence is one
attention over one "head": ``(1, 1, H·L, r + Dr)`` against ``(1, 1, S, r + Dr)``. SDPA's fused CPU kernel shares its
work between threads by batch, head and block of queries, and here there is one batch, one head and a few query rows
for all the keys. Cut along the keys as well (FlashAttention's "flash-decoding"): the ``S`` keys become ``C`` chunks,
a batch dimension of views (nothing copied), each chunk's attention gives its output and each query's log-sum-exp
``lse``, and the chunks merge as the online softmax merges blocks (lesson 10): chunk ``c`` weighs
``exp(lse_c - logsumexp(lse))``, a softmax over the chunks.
"""

from __future__ import annotations

import torch

#: PyTorch's fused attention kernel for the CPU: ``(output, logsumexp)``.
FUSED_KERNEL = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

#: Keys per chunk at most (and the least ``S`` worth cutting is two chunks). Measured on an Intel Xeon (AVX-512 +
#: AMX) shared with other work (load 4-7), 2 threads, 16 query rows of 144 features, ``S = 2,048``, paired medians
#: of 1,000 interleaved calls: the chunks took 0.93, 0.91 and 0.75 of one call's time (ATEN_CPU_CAPABILITY unset,
#: avx2, default); on one thread they do the same work (534 against 576 us of CPU time).
CHUNK = 512


def split_keys_applies(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask) -> bool:
    """Whether :func:`split_keys_attention` may stand in for SDPA here: no mask, a CPU, fewer sequences than
    threads, at least two chunks of keys, float32 or float64, keys and values of one size, no gradient asked for
    (the kernel's backward pass takes no gradient of its log-sum-exp, which the merge uses), and no NaN in the
    queries (the kernel would give such a query zeros: SDPA's path keeps the recipe's NaN)."""
    threads = torch.get_num_threads()
    if not (mask is None and threads > 1 and query.device.type == "cpu" and query.dim() == 4
            and query.shape[0] < threads and query.shape[1] == key.shape[1] == value.shape[1] == 1
            and key.shape[-2] >= 2 * CHUNK and key.shape[-1] == value.shape[-1] == query.shape[-1]
            and query.dtype in (torch.float32, torch.float64)
            and not (torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad))):
        return False
    return not bool(torch.isnan(query.sum()))


def split_keys_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float) -> torch.Tensor:
    """Attention of ``query (N, 1, R, D)`` over ``key``, ``value (N, 1, S, D)`` (no mask), the keys cut into chunks
    of at most :data:`CHUNK` that the kernel runs as a batch: ``(N, 1, R, D)``, as SDPA gives it (forward only: no
    gradient flows through the merge, see :func:`split_keys_applies`).

    Example:
        >>> q, k = torch.randn(1, 1, 4, 8, dtype=torch.float64), torch.randn(1, 1, 1100, 8, dtype=torch.float64)
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, k, scale=0.3)
        >>> torch.allclose(split_keys_attention(q, k, k, 0.3), ref)
        True
    """
    S = key.shape[-2]
    chunks = -(-S // CHUNK)
    size = S // chunks  # every chunk this many keys, the last few keys (fewer than `chunks`) in one call more
    whole = chunks * size

    def cut(t):  # (N, 1, S, D) -> (N, C, size, D): views of the first C·size rows
        return t[:, 0, :whole].unflatten(1, (chunks, size))

    output, lse = FUSED_KERNEL(query.expand(-1, chunks, -1, -1), cut(key), cut(value), scale=scale)  # (N, C, R, D)
    if whole < S:
        tail_output, tail_lse = FUSED_KERNEL(query, key[..., whole:, :], value[..., whole:, :], scale=scale)
        output, lse = torch.cat([output, tail_output], dim=1), torch.cat([lse, tail_lse], dim=1)
    weights = torch.softmax(lse, dim=1).unsqueeze(-1)  # (N, C, R, 1): each chunk's share of every query's sum
    return (output * weights).sum(dim=1, keepdim=True)  # (N, 1, R, D)
