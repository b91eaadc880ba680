"""FlashAttention's forward pass as one Triton kernel: lesson 10's blocks, with one GPU program per block of queries.

Built step by step in ``notebooks/14_triton_kernel.ipynb``. The kernel is :func:`attention_forward_kernel`: a
*program* (one of many running at once on the GPU) owns one block of ``BLOCK_L`` queries of one (sentence, head),
walks over the keys ``BLOCK_S`` at a time and keeps the running max, sum and output of the online softmax
(:func:`attention_lib.online_softmax_update`) in its registers; the ``(L, S)`` scores never exist in memory. It
writes the output and one log-sum-exp per query. It is written as Triton's fused-attention tutorial writes it:

- **base 2**: the scale is multiplied by ``log2(e)`` once, so the scores come out in powers of 2 and every weight
  is one ``exp2`` (``e ** s = 2 ** (s * log2(e))``; a GPU computes ``exp2`` with one instruction, ``ex2.approx``);
- **masks only where needed**: :func:`fold_tile` folds one tile of keys into the running numbers, and the kernel
  calls it in two loops: the full tiles (every key exists and, with ``IS_CAUSAL``, comes before every query of
  the block) without any mask, then the edge: the diagonal tiles of ``IS_CAUSAL`` and the ragged last tile, masked;
- the backward pass (:class:`TritonAttentionFunction`) rebuilds the weights from the forward pass's log-sum-exp,
  block by block in PyTorch (lesson 10's :func:`~attention_lib.memory_efficient.backward.blockwise_backward`).

Where it runs, and with which blocks, is :mod:`attention_lib.memory_efficient.triton_launch`: compiled on CUDA
tensors, in Triton's interpreter (program by program, in NumPy) on CPU tensors. Triton is imported only when a
kernel runs (it has wheels for Linux only); importing this module changes no environment variable.
"""

from __future__ import annotations

import functools
import math

import torch
from torch.autograd.function import once_differentiable

from ..validation import check_options, check_qkv
from . import triton_launch
from ._blocks import DEFAULT_BLOCK_SIZE, LOG2_E
from .backward import blockwise_backward
from .triton_launch import INSTALL_HINT, import_triton, interpreted, runs_interpreted, when_triton_imported  # noqa: F401

tl = None  # triton.language, set once import_triton() has imported triton

#: The dtypes the kernel reads; the running numbers are float32 whatever the inputs.
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def fold_tile(q, K, V, k_stride_s, v_stride_s, start, rows, S, scale_log2, running_max, running_sum, running_output,
              MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, BLOCK_S: tl.constexpr, HEAD_DIM: tl.constexpr,
              VALUE_DIM: tl.constexpr, PRECISION: tl.constexpr):
    """Fold the tile of keys ``start .. start + BLOCK_S - 1`` into the running max, sum and output (base 2).

    ``K`` and ``V`` point at this (sentence, head)'s first key and value. ``MASKED`` tiles may run past ``S`` (the
    ragged last tile) or, with ``IS_CAUSAL``, hold keys after some query (the diagonal): their loads and scores are
    masked. Returns the new ``(running_max, running_sum, running_output)``. Called by
    :func:`attention_forward_kernel`; a ``triton.jit`` function once :func:`import_triton` has run.
    """
    cols = start + tl.arange(0, BLOCK_S)  # (BLOCK_S,): the key positions of this tile
    dims, value_dims = tl.arange(0, HEAD_DIM), tl.arange(0, VALUE_DIM)
    k_ptrs = K + cols[:, None] * k_stride_s + dims[None, :]  # (BLOCK_S, HEAD_DIM)
    v_ptrs = V + cols[:, None] * v_stride_s + value_dims[None, :]  # (BLOCK_S, VALUE_DIM)
    if MASKED:  # keys past S are loaded as 0 and get the score -inf
        k = tl.load(k_ptrs, mask=cols[:, None] < S, other=0.0)
        v = tl.load(v_ptrs, mask=cols[:, None] < S, other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    # (BLOCK_L, HEAD_DIM) @ (HEAD_DIM, BLOCK_S) -> (BLOCK_L, BLOCK_S), times scale * log2(e): scores in base 2
    scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2
    if MASKED:
        scores = tl.where(cols[None, :] < S, scores, float("-inf"))  # keys past the end do not exist
        if IS_CAUSAL:
            scores = tl.where(cols[None, :] <= rows[:, None], scores, float("-inf"))  # nor keys in the future
    # The online softmax update of lesson 10, with exp2: every row sees key 0 in the first tile, so max > -inf.
    new_max = tl.maximum(running_max, tl.max(scores, axis=1))  # (BLOCK_L,)
    correction = tl.exp2(running_max - new_max)  # how much the old sum and output shrink
    weights = tl.exp2(scores - new_max[:, None])  # (BLOCK_L, BLOCK_S), not normalised
    running_sum = running_sum * correction + tl.sum(weights, axis=1)
    # (BLOCK_L, BLOCK_S) @ (BLOCK_S, VALUE_DIM) -> (BLOCK_L, VALUE_DIM), in the inputs' dtype, summed in float32
    running_output = running_output * correction[:, None] + tl.dot(weights.to(v.dtype), v, input_precision=PRECISION)
    return new_max, running_sum, running_output


def attention_forward_kernel(Q, K, V, Out, Lse,  # pointers to the first number of each tensor
                             q_stride_bh, q_stride_l, k_stride_bh, k_stride_s, v_stride_bh, v_stride_s,
                             out_stride_bh, out_stride_l, L, S, scale,
                             IS_CAUSAL: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_S: tl.constexpr,
                             HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, PRECISION: tl.constexpr):
    """One program: the output and log-sum-exp of queries ``BLOCK_L * program_id(0) + 0 .. BLOCK_L - 1``.

    Grid ``(cdiv(L, BLOCK_L), N * H)``; ``program_id(1)`` picks the (sentence, head). Launched by
    :func:`triton_attention_forward`, which checks the inputs; decorate it with ``triton.jit`` to run it.
    """
    block = tl.program_id(0)  # which block of queries this program owns
    bh = tl.program_id(1)  # which (sentence, head)
    rows = block * BLOCK_L + tl.arange(0, BLOCK_L)  # (BLOCK_L,): the query positions of this block
    dims = tl.arange(0, HEAD_DIM)
    # (BLOCK_L, HEAD_DIM) pointers; rows past L (the ragged last block) are masked: loaded as 0, never stored.
    q = tl.load(Q + bh * q_stride_bh + rows[:, None] * q_stride_l + dims[None, :], mask=rows[:, None] < L, other=0.0)
    K_head, V_head = K + bh * k_stride_bh, V + bh * v_stride_bh  # this (sentence, head)'s first key and value
    scale_log2 = scale * 1.4426950408889634  # times log2(e): the scores in base 2, so that exp2 does exp's work
    running_max = tl.full((BLOCK_L,), float("-inf"), tl.float32)
    running_sum = tl.zeros((BLOCK_L,), tl.float32)
    running_output = tl.zeros((BLOCK_L, VALUE_DIM), tl.float32)
    full_end = S // BLOCK_S * BLOCK_S  # the tiles before it are full: every key exists
    key_end = S
    if IS_CAUSAL:  # and every key comes before this block's first query; keys after its last query: never visited
        full_end = tl.minimum(full_end, block * BLOCK_L // BLOCK_S * BLOCK_S)
        key_end = tl.minimum(S, (block + 1) * BLOCK_L)
    for start in range(0, full_end, BLOCK_S):  # no mask at all
        running_max, running_sum, running_output = fold_tile(
            q, K_head, V_head, k_stride_s, v_stride_s, start, rows, S, scale_log2, running_max, running_sum,
            running_output, False, IS_CAUSAL, BLOCK_S, HEAD_DIM, VALUE_DIM, PRECISION)
    for start in range(full_end, key_end, BLOCK_S):  # the edge: the diagonal tiles (IS_CAUSAL), the ragged last one
        running_max, running_sum, running_output = fold_tile(
            q, K_head, V_head, k_stride_s, v_stride_s, start, rows, S, scale_log2, running_max, running_sum,
            running_output, True, IS_CAUSAL, BLOCK_S, HEAD_DIM, VALUE_DIM, PRECISION)
    output = running_output / running_sum[:, None]  # the one division, after the last tile
    value_dims = tl.arange(0, VALUE_DIM)
    tl.store(Out + bh * out_stride_bh + rows[:, None] * out_stride_l + value_dims[None, :],
             output.to(Out.dtype.element_ty), mask=rows[:, None] < L)
    # One number per query, back from base 2 to natural units (times ln 2): lse = log(sum_j exp(scale * q . k_j))
    tl.store(Lse + bh * L + rows, (running_max + tl.log2(running_sum)) * 0.6931471805599453, mask=rows < L)


@when_triton_imported
def _build(triton) -> None:
    """Once ``triton`` is imported (:func:`import_triton`): ``tl`` is ``triton.language``, :func:`fold_tile` a
    ``triton.jit`` function (always: the interpreter runs it too)."""
    global tl, fold_tile
    from triton.runtime.jit import JITFunction

    tl = triton.language
    if not isinstance(fold_tile, JITFunction):
        fold_tile = JITFunction(fold_tile)


@functools.cache
def compiled_kernel():
    """:func:`attention_forward_kernel` made for compiling (not ``triton.jit``: compiled even if TRITON_INTERPRET is
    set)."""
    import_triton()
    from triton.runtime.jit import JITFunction

    return JITFunction(attention_forward_kernel)


def kernel_for(device: torch.device):
    """The attention kernel for tensors on ``device``: compiled for CUDA, :func:`interpreted` elsewhere."""
    return interpreted(attention_forward_kernel) if runs_interpreted(device) else compiled_kernel()


def _check(query, key, value, is_causal, scale, block_sizes) -> tuple[int, int] | None:
    check_qkv(query, key, value)
    check_options(None, 0.0, is_causal, scale)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 4:
            raise ValueError(f"the Triton kernel takes 4-D (N, H, L, E) tensors, but {name}.shape={tuple(t.shape)}; "
                             f"for one head use {name}.unsqueeze(1), for one sentence {name}[None, None].")
    if not query.shape[:2] == key.shape[:2] == value.shape[:2]:
        raise ValueError(f"query, key and value must have the same N and H (no broadcasting in the kernel), but "
                         f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}, value.shape="
                         f"{tuple(value.shape)}; expand them first, e.g. key.expand(N, H, -1, -1).")
    if query.dtype not in DTYPES:
        raise TypeError(f"the Triton kernel reads float32, float16 or bfloat16, but query.dtype={query.dtype}; "
                        f"convert with .float() (or use memory_efficient_attention for float64).")
    for name, size in (("query", query.shape[-1]), ("value", value.shape[-1])):
        if not (16 <= size <= 256 and size & (size - 1) == 0):
            padded = max(16, 2 ** math.ceil(math.log2(max(size, 1))))
            how = (f"pad query and key with zeros up to {padded} (zeros add nothing to the scores; keep "
                   f"scale=1/sqrt({size}))" if name == "query" else
                   f"pad value with zeros up to {padded} and keep the first {size} features of the output")
            raise ValueError(f"tl.dot needs a head dimension that is a power of two from 16 to 256, but "
                             f"{name}.shape[-1]={size}; {how}, or use memory_efficient_attention.")
    if query.shape[-2] == 0 or key.shape[-2] == 0:
        raise ValueError(f"the Triton kernel needs at least one query and one key, but L={query.shape[-2]} and "
                         f"S={key.shape[-2]}.")
    if query.device.type not in ("cpu", "cuda"):
        raise ValueError(f"Triton kernels run compiled on CUDA tensors or in Triton's interpreter on CPU tensors, "
                         f"but query.device={query.device}; move the tensors with .cpu() (or use "
                         f"memory_efficient_attention, which runs anywhere).")
    return triton_launch.check_block_sizes(block_sizes)


def triton_attention_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False,
                             scale: float | None = None,
                             block_sizes: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the Triton kernel: the attention output and the log-sum-exp of every query's scores (no gradients).

    The forward pass of the kernel that ``notebooks/14_triton_kernel.ipynb`` writes. CUDA tensors run it compiled
    for their GPU; CPU tensors run it in Triton's interpreter (slow, for checking), whether or not
    ``TRITON_INTERPRET`` is set. Same conventions as ``torch.nn.functional.scaled_dot_product_attention`` without
    ``attn_mask``.

    Args:
        query: ``(N, H, L, E)``, float32, float16 or bfloat16; ``E`` a power of two from 16 to 256.
        key: ``(N, H, S, E)``, same dtype and device.
        value: ``(N, H, S, Ev)``; ``Ev`` a power of two from 16 to 256.
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only (top-left aligned, like SDPA);
            tiles of keys entirely in the future are skipped, and only the diagonal tiles are masked.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        block_sizes: ``(queries, keys)`` per block, powers of two of at least 16; by default the launcher
            chooses them for the dtype, the head dimensions and the GPU
            (:func:`~attention_lib.memory_efficient.triton_launch.launch_config`).

    Returns:
        ``(output, lse)``: the output ``(N, H, L, Ev)`` in the inputs' dtype and the natural log-sum-exp
        ``(N, H, L)`` in float32, ``lse = log(sum_j exp(scale * q · k_j))`` over the keys the query may see.

    Raises:
        ImportError: if Triton is not installed (the message says where to get it).
        TypeError: if an input is not a floating-point tensor of a dtype the kernel reads, or ``block_sizes`` is
            not a pair of ints.
        ValueError: if the inputs are not 4-D with the same ``N`` and ``H``, do not fit together, have a head
            dimension ``tl.dot`` cannot take, are neither on the CPU nor on CUDA, or ``block_sizes`` are not
            powers of two of at least 16 (or do not fit the GPU's shared memory).

    Example:
        >>> q, k, v = torch.randn(1, 2, 40, 16), torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 32)
        >>> out, lse = triton_attention_forward(q, k, v, block_sizes=(16, 16))  # in the interpreter on a CPU
        >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5)
        True
        >>> torch.allclose(lse, torch.logsumexp(q @ k.transpose(-2, -1) / 4, dim=-1), atol=1e-5)
        True
    """
    block_sizes = _check(query, key, value, is_causal, scale, block_sizes)
    N, H, L, Ev = (*query.shape[:3], value.shape[-1])
    dtype = query.dtype
    if dtype == torch.bfloat16 and runs_interpreted(query.device):
        # Triton 3.8's interpreter gets tl.dot wrong for bfloat16 (products off by 1e10, measured): compute in
        # float32 there. On a GPU the kernel reads bfloat16 itself.
        query, key, value = query.float(), key.float(), value.float()
    # (N, H, L, E) -> (N * H, L, E): one index per (sentence, head); contiguous, so the last stride is 1
    q, k, v = (t.reshape(N * H, t.shape[-2], t.shape[-1]).contiguous() for t in (query, key, value))
    output = torch.empty(N * H, L, Ev, dtype=query.dtype, device=query.device)
    lse = torch.empty(N * H, L, dtype=torch.float32, device=query.device)
    triton_launch.launch(q, k, v, output, lse, is_causal=bool(is_causal), scale=scale, block_sizes=block_sizes,
                         kernel=kernel_for(query.device))
    return output.reshape(N, H, L, Ev).to(dtype), lse.reshape(N, H, L)


class TritonAttentionFunction(torch.autograd.Function):
    """The Triton forward pass, and a backward pass that rebuilds the weights from its log-sum-exp.

    The forward pass saves the inputs, the output and one number per query, ``lse``; the backward pass walks the
    blocks of lesson 10 (:func:`~attention_lib.memory_efficient.backward.blockwise_backward`, in PyTorch, in
    float32) and rebuilds each block of weights as ``exp(scale * q · k - lse)``: FlashAttention's way, with no
    second forward pass and memory linear in the length.
    """

    @staticmethod
    def forward(ctx, query, key, value, is_causal: bool, scale: float | None, block_sizes):
        output, lse = triton_attention_forward(query, key, value, is_causal=is_causal, scale=scale,
                                               block_sizes=block_sizes)
        ctx.save_for_backward(query, key, value, output, lse)
        ctx.options = is_causal, 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
        return output

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        query, key, value, output, lse = ctx.saved_tensors
        is_causal, scale = ctx.options
        # In base 2, as blockwise_backward counts: weight = 2 ** (base-2 score - max) / sum, with max = lse * log2(e)
        # and sum = 1, that is exp(score - lse).
        row_max = (lse * LOG2_E).unsqueeze(-1)  # (N, H, L, 1)
        grads = blockwise_backward(grad_output.float(), query.float(), key.float(), value.float(), None,
                                   output.float(), row_max, torch.ones_like(row_max), is_causal, scale,
                                   (DEFAULT_BLOCK_SIZE, DEFAULT_BLOCK_SIZE), needs=ctx.needs_input_grad[:3])
        return (*(None if g is None else g.to(query.dtype) for g in grads), None, None, None)


def triton_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False,
                     scale: float | None = None, block_sizes: tuple[int, int] | None = None) -> torch.Tensor:
    """Scaled dot-product attention by the course's Triton kernel (FlashAttention's forward pass).

    Built step by step in ``notebooks/14_triton_kernel.ipynb``. On CUDA tensors the kernel is compiled for the
    GPU; on CPU tensors it runs in Triton's interpreter (for checking only: slow). Gradients flow: the backward
    pass rebuilds the weights from the forward pass's log-sum-exp, block by block in PyTorch
    (:class:`TritonAttentionFunction`). For the log-sum-exp too, use :func:`triton_attention_forward`.

    Args:
        query: ``(N, H, L, E)``, float32, float16 or bfloat16; ``E`` a power of two from 16 to 256.
        key: ``(N, H, S, E)``.
        value: ``(N, H, S, Ev)``; ``Ev`` a power of two from 16 to 256.
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only (top-left aligned, like SDPA).
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        block_sizes: ``(queries, keys)`` per block, powers of two of at least 16; chosen by the launcher by default.

    Returns:
        The output ``(N, H, L, Ev)``, in the inputs' dtype.

    Raises:
        ImportError, TypeError, ValueError: as :func:`triton_attention_forward`.

    Example:
        >>> q, k, v = (torch.randn(2, 3, 20, 16) for _ in range(3))
        >>> out = triton_attention(q, k, v, is_causal=True, block_sizes=(16, 16))
        >>> expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(out, expected, atol=1e-5)
        True
    """
    _check(query, key, value, is_causal, scale, block_sizes)
    return TritonAttentionFunction.apply(query, key, value, bool(is_causal), scale, block_sizes)
