"""FlashAttention's forward pass as one Triton kernel: lesson 10's blocks, with one GPU program per block of queries.

Built step by step in ``notebooks/14_triton_kernel.ipynb``. The kernel is
:func:`attention_forward_kernel`: a *program* (one of many running at once on the GPU) owns one block of
``BLOCK_L`` queries of one (sentence, head), walks over the keys ``BLOCK_S`` at a time and keeps the running
max, sum and output of the online softmax (:func:`attention_lib.online_softmax_update`) in its registers; the
``(L, S)`` scores never exist in memory. It writes the output and one log-sum-exp per query.

Triton is imported only when a kernel runs (it has wheels for Linux only). Without a CUDA device this module
sets ``TRITON_INTERPRET=1`` before importing it, so kernels run in Triton's **interpreter**, which executes
them program by program in NumPy on CPU tensors: the same results, for checking, not for speed. With CUDA the
kernel is compiled for the GPU. The backward pass is :func:`attention_lib.memory_efficient_attention`'s, in
PyTorch.
"""

from __future__ import annotations

import functools
import math
import os
import sys

import torch

from ..validation import check_options, check_qkv, is_int

tl = None  # triton.language, imported by import_triton() when the first kernel is built

#: Queries and keys per block when ``block_sizes`` is not given: ``tl.dot`` needs at least 16, and 64 x 64
#: tiles of scores fit a GPU's registers for head dimensions up to 128.
DEFAULT_BLOCK_SIZES = (64, 64)

#: The dtypes the kernel reads; the running numbers are float32 whatever the inputs.
DTYPES = (torch.float32, torch.float16, torch.bfloat16)

INSTALL_HINT = ("pip install triton (Linux; it comes with the default Linux install of torch). Triton has no wheels "
                "for macOS or Windows: run this lesson on Google Colab, or use memory_efficient_attention instead.")


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
    dims, value_dims = tl.arange(0, HEAD_DIM), tl.arange(0, VALUE_DIM)
    # (BLOCK_L, HEAD_DIM) pointers; rows past L (the ragged last block) are masked: loaded as 0, never stored.
    q = tl.load(Q + bh * q_stride_bh + rows[:, None] * q_stride_l + dims[None, :], mask=rows[:, None] < L, other=0.0)
    running_max = tl.full((BLOCK_L,), float("-inf"), tl.float32)
    running_sum = tl.zeros((BLOCK_L,), tl.float32)
    running_output = tl.zeros((BLOCK_L, VALUE_DIM), tl.float32)
    key_end = S
    if IS_CAUSAL:  # keys after this block's last query are in every query's future: never visited
        key_end = tl.minimum(S, (block + 1) * BLOCK_L)
    for start in range(0, key_end, BLOCK_S):
        cols = start + tl.arange(0, BLOCK_S)  # (BLOCK_S,): the key positions of this block
        k = tl.load(K + bh * k_stride_bh + cols[:, None] * k_stride_s + dims[None, :], mask=cols[:, None] < S,
                    other=0.0)  # (BLOCK_S, HEAD_DIM)
        v = tl.load(V + bh * v_stride_bh + cols[:, None] * v_stride_s + value_dims[None, :], mask=cols[:, None] < S,
                    other=0.0)  # (BLOCK_S, VALUE_DIM)
        scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # (BLOCK_L, HEAD_DIM) @ (HEAD_DIM, BLOCK_S)
        scores = tl.where(cols[None, :] < S, scores, float("-inf"))  # keys past the end do not exist
        if IS_CAUSAL:
            scores = tl.where(cols[None, :] <= rows[:, None], scores, float("-inf"))  # nor keys in the future
        # The online softmax update of lesson 10: every row has key 0 in the first block, so max > -inf.
        new_max = tl.maximum(running_max, tl.max(scores, axis=1))  # (BLOCK_L,)
        correction = tl.exp(running_max - new_max)  # how much the old sum and output shrink
        weights = tl.exp(scores - new_max[:, None])  # (BLOCK_L, BLOCK_S), not normalised
        running_sum = running_sum * correction + tl.sum(weights, axis=1)
        # (BLOCK_L, BLOCK_S) @ (BLOCK_S, VALUE_DIM) -> (BLOCK_L, VALUE_DIM), in the inputs' dtype, summed in float32
        running_output = running_output * correction[:, None] + tl.dot(weights.to(v.dtype), v,
                                                                       input_precision=PRECISION)
        running_max = new_max
    output = running_output / running_sum[:, None]  # the one division, after the last block
    tl.store(Out + bh * out_stride_bh + rows[:, None] * out_stride_l + value_dims[None, :],
             output.to(Out.dtype.element_ty), mask=rows[:, None] < L)
    tl.store(Lse + bh * L + rows, running_max + tl.log(running_sum), mask=rows < L)  # one number per query


# Without a CUDA device, TRITON_INTERPRET=1 (unless set already), now: triton reads it when each ``triton.jit``
# function is defined, its own library functions (``tl.zeros``, ``tl.sum``, ...) included, so it must be set before
# the first ``import triton``, and other modules import triton too (``torch.profiler`` does). It stays set.
if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def import_triton():
    """``triton`` (for the interpreter when there is no CUDA device), or an ``ImportError`` that says how to get it."""
    global tl
    try:
        import triton
        import triton.language
    except ImportError as error:
        raise ImportError(f"this needs Triton, which is not installed here ({error}). {INSTALL_HINT}") from error
    tl = triton.language
    return triton


def kernel_device(kernel) -> torch.device:
    """Where a ``triton.jit`` kernel runs: on the CPU if it is interpreted, on CUDA if it is compiled.

    Raises:
        RuntimeError: if the kernel is compiled but there is no CUDA device (triton was imported before
            ``TRITON_INTERPRET=1`` was set).
    """
    import_triton()
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(kernel, InterpretedFunction):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("this Triton kernel was compiled for a GPU, but there is no CUDA device here. Set "
                           "os.environ['TRITON_INTERPRET'] = '1' before the first `import triton` (restart the "
                           "notebook's kernel first) so that kernels run in Triton's interpreter on the CPU.")
    return torch.device("cuda")


@functools.cache
def _forward_kernel():
    return import_triton().jit(attention_forward_kernel)


def _power_of_two(n: int) -> bool:
    return n >= 16 and n & (n - 1) == 0


def _check(query, key, value, is_causal, scale, block_sizes) -> tuple[int, int]:
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
        if not (_power_of_two(size) and size <= 256):
            padded = max(16, 2 ** math.ceil(math.log2(max(size, 1))))
            raise ValueError(f"tl.dot needs a head dimension that is a power of two from 16 to 256, but "
                             f"{name}.shape[-1]={size}; pad it with zeros up to {padded}"
                             f" (zeros add nothing to the scores; keep scale=1/sqrt({size})), or use "
                             f"memory_efficient_attention.")
    if query.shape[-2] == 0 or key.shape[-2] == 0:
        raise ValueError(f"the Triton kernel needs at least one query and one key, but L={query.shape[-2]} and "
                         f"S={key.shape[-2]}.")
    sizes = DEFAULT_BLOCK_SIZES if block_sizes is None else tuple(block_sizes)
    if len(sizes) != 2 or not all(is_int(b) and _power_of_two(b) for b in sizes):
        raise ValueError(f"block_sizes must be two powers of two of at least 16 (queries, keys per block), as tl.dot "
                         f"needs, but block_sizes={block_sizes!r}; try {DEFAULT_BLOCK_SIZES}.")
    return sizes


def triton_attention_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False,
                             scale: float | None = None,
                             block_sizes: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the Triton kernel: the attention output and the log-sum-exp of every query's scores (no gradients).

    The forward pass of the kernel that ``notebooks/14_triton_kernel.ipynb`` writes. Without a CUDA device, CPU
    tensors run in Triton's interpreter (slow, for checking); with one, CUDA tensors run the compiled kernel. Same
    conventions as ``torch.nn.functional.scaled_dot_product_attention`` without ``attn_mask``.

    Args:
        query: ``(N, H, L, E)``, float32, float16 or bfloat16; ``E`` a power of two from 16 to 256.
        key: ``(N, H, S, E)``, same dtype and device.
        value: ``(N, H, S, Ev)``; ``Ev`` a power of two from 16 to 256.
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only (top-left aligned, like SDPA);
            blocks of keys entirely in the future are skipped.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        block_sizes: ``(queries, keys)`` per block, powers of two of at least 16; defaults to
            :data:`DEFAULT_BLOCK_SIZES`.

    Returns:
        ``(output, lse)``: the output ``(N, H, L, Ev)`` in the inputs' dtype and the natural log-sum-exp
        ``(N, H, L)`` in float32, ``lse = log(sum_j exp(scale * q · k_j))`` over the keys the query may see.

    Raises:
        ImportError: if Triton is not installed (the message says where to get it).
        TypeError: if an input is not a floating-point tensor of a dtype the kernel reads.
        ValueError: if the inputs are not 4-D with the same ``N`` and ``H``, do not fit together, have a head
            dimension ``tl.dot`` cannot take, are not where kernels run here (the CPU in the interpreter, else
            CUDA), or ``block_sizes`` are not powers of two of at least 16.

    Example:
        >>> q, k, v = torch.randn(1, 2, 40, 16), torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 32)
        >>> out, lse = triton_attention_forward(q, k, v, block_sizes=(16, 16))  # in the interpreter on a CPU
        >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5)
        True
        >>> torch.allclose(lse, torch.logsumexp(q @ k.transpose(-2, -1) / 4, dim=-1), atol=1e-5)
        True
    """
    block_sizes = _check(query, key, value, is_causal, scale, block_sizes)
    kernel = _forward_kernel()
    if query.device != kernel_device(kernel):
        raise ValueError(f"Triton kernels run on {kernel_device(kernel)} here, but query.device={query.device}; move "
                         f"the tensors with .to('{kernel_device(kernel).type}').")
    dtype = query.dtype
    if dtype == torch.bfloat16 and kernel_device(kernel).type == "cpu":
        # Triton 3.8's interpreter gets tl.dot wrong for bfloat16 (products off by 1e10, measured): compute in
        # float32 there. On a GPU the kernel reads bfloat16 itself.
        query, key, value = query.float(), key.float(), value.float()
    N, H, L, Ev = (*query.shape[:3], value.shape[-1])
    # (N, H, L, E) -> (N * H, L, E): one index per (sentence, head); contiguous, so the last stride is 1
    q, k, v = (t.reshape(N * H, t.shape[-2], t.shape[-1]).contiguous() for t in (query, key, value))
    output = torch.empty(N * H, L, Ev, dtype=query.dtype, device=query.device)
    lse = torch.empty(N * H, L, dtype=torch.float32, device=query.device)
    launch(kernel, q, k, v, output, lse, is_causal=is_causal, scale=scale, block_sizes=block_sizes)
    return output.reshape(N, H, L, Ev).to(dtype), lse.reshape(N, H, L)


def launch(kernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, output: torch.Tensor, lse: torch.Tensor, *,
           is_causal: bool, scale: float | None, block_sizes: tuple[int, int]) -> None:
    """Launch ``kernel`` (with :func:`attention_forward_kernel`'s arguments) on checked 3-D tensors.

    ``q (B, L, E)``, ``k (B, S, E)``, ``v (B, S, Ev)`` and ``output (B, L, Ev)`` may be views with any strides
    but a last stride of 1; ``lse (B, L)`` is contiguous float32. ``B = N * H``.
    """
    (B, L, E), S, Ev = q.shape, k.shape[-2], v.shape[-1]
    block_l, block_s = block_sizes
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    grid = (import_triton().cdiv(L, block_l), B)  # one program per block of queries of each (sentence, head)
    kernel[grid](q, k, v, output, lse, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                 output.stride(0), output.stride(1), L, S, scale, IS_CAUSAL=bool(is_causal), BLOCK_L=block_l,
                 BLOCK_S=block_s, HEAD_DIM=E, VALUE_DIM=Ev,
                 PRECISION="ieee" if q.dtype == torch.float32 else None)  # float32: no TF32 rounding on GPUs


class TritonAttentionFunction(torch.autograd.Function):
    """The Triton forward pass, with the backward pass of :func:`attention_lib.memory_efficient_attention`.

    The backward pass differentiates ``memory_efficient_attention`` (lesson 10's blocks, in PyTorch): the same
    gradients, from tested code, in memory linear in the length.
    """

    @staticmethod
    def forward(ctx, query, key, value, is_causal: bool, scale: float | None, block_sizes):
        output, _ = triton_attention_forward(query, key, value, is_causal=is_causal, scale=scale,
                                             block_sizes=block_sizes)
        ctx.save_for_backward(query, key, value)
        ctx.options = is_causal, scale
        return output

    @staticmethod
    def backward(ctx, grad_output):
        from . import memory_efficient_attention

        is_causal, scale = ctx.options
        inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
        with torch.enable_grad():
            output = memory_efficient_attention(*inputs, is_causal=is_causal, scale=scale)
        grads = torch.autograd.grad(output, inputs, grad_output)
        return (*grads, None, None, None)


def triton_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False,
                     scale: float | None = None, block_sizes: tuple[int, int] | None = None) -> torch.Tensor:
    """Scaled dot-product attention by the course's Triton kernel (FlashAttention's forward pass).

    Built step by step in ``notebooks/14_triton_kernel.ipynb``. On CUDA tensors the kernel is compiled for the
    GPU; on the CPU it runs in Triton's interpreter (for checking only: slow). Gradients flow: the backward
    pass is :func:`attention_lib.memory_efficient_attention`'s (in PyTorch, memory linear in the length).
    For the log-sum-exp too, use :func:`triton_attention_forward`.

    Args:
        query: ``(N, H, L, E)``, float32, float16 or bfloat16; ``E`` a power of two from 16 to 256.
        key: ``(N, H, S, E)``.
        value: ``(N, H, S, Ev)``; ``Ev`` a power of two from 16 to 256.
        is_causal: if ``True``, query ``i`` may attend to keys ``0..i`` only (top-left aligned, like SDPA).
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        block_sizes: ``(queries, keys)`` per block, powers of two of at least 16.

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
