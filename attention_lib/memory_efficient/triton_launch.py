"""Where and how lesson 14's Triton kernel runs: compiled on a GPU, interpreted on the CPU, with blocks that fit.

This module launches any Triton kernel and knows nothing of lesson 14's: :mod:`~.triton_kernel` passes its own
(:func:`~.triton_kernel.kernel_for`), and registers what must happen once ``triton`` is imported
(:func:`when_triton_imported`), so that the two modules import one way only.

**Where: the tensors decide.** CUDA tensors run :func:`~.triton_kernel.attention_forward_kernel` compiled for
their GPU. CPU tensors run it in Triton's **interpreter**, which executes the programs one by one in NumPy: the
same results, for checking, not for speed. No environment variable is needed for that, and none is set: the
interpreter is called directly (:func:`interpreted`), however and whenever ``triton`` was imported (``import
torch.nn.attention.bias`` imports it too). ``TRITON_INTERPRET=1`` matters only for the kernels you launch
yourself with ``kernel[grid](...)`` on CPU tensors: set it before the first ``import triton`` (lesson 14 does),
or wrap the kernel, ``interpreted(kernel)[grid](...)``.

**With which blocks: measured per GPU.** :func:`launch_config` chooses the blocks, warps and pipeline stages for
the dtype, the head dimensions and the GPU. The choices were made by compiling the kernel for the GPUs learners
get (Triton's own compiler down to a binary, no GPU needed: ``python -m
attention_lib.memory_efficient.triton_targets`` prints every binary's shared memory and its ``tl.dot``
instruction) so that each fits the smallest shared memory of its class (:data:`SHARED_MEMORY_KIB`). A GPU that
still refuses a launch (``OutOfResources``) gets a retry with halved blocks and fewer stages.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

from ..validation import check_int

INSTALL_HINT = ("pip install triton (Linux; it comes with the default Linux install of torch). Triton has no wheels "
                "for macOS or Windows: run this lesson on Google Colab, or use memory_efficient_attention instead.")
#: What runs each time :func:`import_triton` has imported ``triton`` (e.g. making a kernel's helpers ``triton.jit``
#: functions), registered by :func:`when_triton_imported`.
_ON_IMPORT: list = []


def when_triton_imported(fn):
    """Register ``fn(triton)`` to run each time :func:`import_triton` has imported ``triton``; return ``fn``."""
    _ON_IMPORT.append(fn)
    return fn


def import_triton():
    """``triton``, or an ``ImportError`` that says how to get it; then runs what :func:`when_triton_imported`
    registered (lesson 14's kernel: :func:`~.triton_kernel.fold_tile` becomes a ``triton.jit`` function)."""
    try:
        import triton
        import triton.language
    except ImportError as error:
        raise ImportError(f"this needs Triton, which is not installed here ({error}). {INSTALL_HINT}") from error
    for fn in _ON_IMPORT:
        fn(triton)
    return triton

#: The most shared memory one program may use, in KiB, on the GPUs learners meet (CUDA's opt-in limit per block).
SHARED_MEMORY_KIB = {"T4 (sm75)": 64, "A100 (sm80)": 163, "A10 and L4 (sm86, sm89)": 99, "H100 (sm90)": 227}


@dataclass(frozen=True)
class LaunchConfig:
    """How one launch runs: ``block_l`` queries and ``block_s`` keys per tile, ``num_warps`` warps of 32 threads
    per program, and ``num_stages`` tiles of keys and values in flight (Triton's software pipeline)."""

    block_l: int
    block_s: int
    num_warps: int = 4
    num_stages: int = 2

    def __str__(self) -> str:
        return f"blocks {self.block_l} x {self.block_s}, {self.num_warps} warps, {self.num_stages} stages"

    def smaller(self) -> LaunchConfig | None:
        """The next thing to try when this does not fit: fewer stages, then halved blocks; ``None`` at the end."""
        if self.num_stages > 1:
            return replace(self, num_stages=1)
        if max(self.block_l, self.block_s) > 16:
            return replace(self, block_l=max(16, self.block_l // 2), block_s=max(16, self.block_s // 2))
        return None


#: In the interpreter only the block sizes matter: larger blocks, fewer programs, a faster check.
INTERPRETER_CONFIG = LaunchConfig(64, 64, 1, 1)


def launch_config(dtype: torch.dtype, head_dim: int, value_dim: int,
                  capability: tuple[int, int] | None) -> LaunchConfig:
    """The blocks, warps and stages for a launch on a GPU of ``capability`` (``None``: the interpreter).

    Triton (3.2 and later) multiplies float16 and bfloat16 blocks on tensor cores (``mma``) from sm80 on (A100,
    A10, L4, H100); float32 (computed in IEEE float32, not TF32) and everything on a T4 (sm75) runs on the plain
    ``fma`` units, where large tiles spill registers. Each choice fits the smallest shared memory of its class
    (sm80 binaries are checked against the A10's and L4's 99 KiB, not the A100's 163).

    Example:
        >>> str(launch_config(torch.float16, 64, 64, (8, 0)))
        'blocks 64 x 64, 4 warps, 3 stages'
        >>> str(launch_config(torch.float32, 128, 128, (7, 5)))
        'blocks 32 x 16, 8 warps, 2 stages'
    """
    if capability is None:
        return INTERPRETER_CONFIG
    dim = max(head_dim, value_dim)
    if tuple(capability) >= (8, 0) and dtype != torch.float32:  # tensor cores
        if dim <= 64:
            return LaunchConfig(64, 64, 4, 3)
        return LaunchConfig(64, 64, 8, 2) if dim <= 128 else LaunchConfig(32, 32, 4, 1)
    # fma (float32 anywhere, every dtype on a T4): small tiles, and 8 warps from E = 64 on, which share out the
    # registers that 4 warps would spill (measured on sm90: E = 128 in 4 warps spills 672 bytes a thread, 8 none)
    if dim <= 32:
        return LaunchConfig(32, 32, 4, 2)
    if dim <= 64:
        return LaunchConfig(32, 32, 8, 2)
    return LaunchConfig(32, 16, 8, 2) if dim <= 128 else LaunchConfig(16, 16, 4, 1)


def tile_ends(L: int, S: int, block_l: int, block_s: int, is_causal: bool) -> list[tuple[int, int]]:
    """The kernel's two loops, program by program: ``(full_end, key_end)``, the tiles of keys starting before
    ``full_end`` folded without a mask, those from it to ``key_end`` with one (the same rule as the kernel).

    Example:
        >>> tile_ends(100, 100, 32, 32, is_causal=True)  # program 2: tiles 0 and 32 full, 64 on the diagonal
        [(0, 32), (32, 64), (64, 96), (96, 100)]
    """
    ends = []
    for start_l in range(0, L, block_l):
        full_end, key_end = S // block_s * block_s, S
        if is_causal:
            full_end, key_end = min(full_end, start_l // block_s * block_s), min(S, start_l + block_l)
        ends.append((full_end, key_end))
    return ends


def runs_interpreted(device: torch.device) -> bool:
    """Whether the kernel runs in Triton's interpreter for tensors on ``device``: on the CPU always, on CUDA only
    when triton was imported with ``TRITON_INTERPRET=1`` (its own library is then interpreted, so it cannot
    compile)."""
    if device.type != "cuda":
        return True
    import_triton()
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(import_triton().language.max, InterpretedFunction)


@functools.cache
def _interpreted_function(fn):
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(fn)


@contextmanager
def _library_interpreted():
    """Let an interpreted kernel call ``triton.jit`` functions (``tl.max``, ``tl.sum``, :func:`fold_tile`, ...) that
    were made for compiling (triton imported without ``TRITON_INTERPRET=1``): for the time of one launch, calling one
    runs it in the interpreter, as ``TRITON_INTERPRET=1`` would have made it."""
    from triton.runtime.jit import JITFunction

    saved = JITFunction.__call__
    JITFunction.__call__ = lambda self, *args, **kwargs: _interpreted_function(self.fn)(*args, **kwargs)
    try:
        yield
    finally:
        JITFunction.__call__ = saved


class interpreted:  # noqa: N801 - used like a decorator: interpreted(kernel)[grid](...)
    """A Triton kernel that runs in Triton's interpreter (on CPU tensors), however triton was imported.

    Built for ``notebooks/14_triton_kernel.ipynb``: ``interpreted(kernel)[grid](*args, **meta)`` runs
    ``kernel`` (a ``triton.jit`` kernel, or the plain function) program by program in NumPy. Launch options
    such as ``num_warps`` are ignored there.

    Example:
        >>> from attention_lib.memory_efficient.triton_kernel import attention_forward_kernel
        >>> interpreted(attention_forward_kernel).fn.__name__
        'attention_forward_kernel'
    """

    def __init__(self, kernel):
        self.fn = getattr(kernel, "fn", kernel)  # the Python function under a triton.jit kernel

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            import_triton()
            with _library_interpreted():
                return _interpreted_function(self.fn)[grid](*args, **kwargs)

        return run


def check_block_sizes(block_sizes) -> tuple[int, int] | None:
    """``None``, or ``block_sizes`` checked: a pair of powers of two (``tl.arange`` needs them) of at least 16.

    The keys per block, ``BLOCK_S``, are the ``K`` of ``tl.dot(weights, v)``, which a GPU compiles with 16-bit inputs
    only from 16 on (8 in float32: ``min_dot_size`` in Triton's ``backends/nvidia/compiler.py``); the queries per
    block are its ``M``, for which 1 would do: the package asks 16 of both, in every dtype. (The ``K`` of
    ``tl.dot(q, tl.trans(k))`` is the head size ``E``, checked with the tensors.)

    Raises:
        TypeError: if it is not a pair of ints.
        ValueError: if it has not two sizes, or one is not a power of two of at least 16.
    """
    if block_sizes is None:
        return None
    fix = "pass a pair (queries, keys) per block such as (32, 32), or None to let the launcher choose."
    if not isinstance(block_sizes, tuple | list):
        raise TypeError(f"block_sizes must be a pair of ints (queries, keys), but got {type(block_sizes).__name__} "
                        f"({block_sizes!r}); {fix}")
    if len(block_sizes) != 2:
        raise ValueError(f"block_sizes must be two powers of two of at least 16 (queries, keys), but "
                         f"block_sizes={block_sizes!r} has {len(block_sizes)}; {fix}")
    sizes = tuple(check_int(b, "block_sizes", fix=fix) for b in block_sizes)
    if not all(b >= 16 and b & (b - 1) == 0 for b in sizes):
        raise ValueError(f"block_sizes must be two powers of two (as tl.arange needs) of at least 16 (the keys per "
                         f"block are the K of tl.dot(weights, v), which a GPU compiles with 16-bit inputs from 16 on; "
                         f"the package asks the same of the queries per block), but block_sizes={block_sizes!r}; {fix}")
    return sizes


def choose_config(q: torch.Tensor, v: torch.Tensor, block_sizes: tuple[int, int] | None) -> LaunchConfig:
    """:func:`launch_config` for these tensors' dtype, head dimensions and GPU, with ``block_sizes`` if given."""
    interpreted_here = runs_interpreted(q.device)
    capability = None if interpreted_here else torch.cuda.get_device_capability(q.device)
    config = launch_config(q.dtype, q.shape[-1], v.shape[-1], capability)
    return config if block_sizes is None else replace(config, block_l=block_sizes[0], block_s=block_sizes[1])


def launch_arguments(q, k, v, output, lse, *, is_causal: bool, scale: float | None,
                     config: LaunchConfig) -> tuple[tuple[int, int], tuple, dict]:
    """``(grid, args, kwargs)`` of one launch, ``kernel[grid](*args, **kwargs)``, on checked 3-D tensors.

    ``q (B, L, E)``, ``k (B, S, E)``, ``v (B, S, Ev)`` and ``output (B, L, Ev)`` may be views with any strides
    but a last stride of 1; ``lse (B, L)`` is contiguous float32. ``B = N * H``.
    """
    (B, L, E), S, Ev = q.shape, k.shape[-2], v.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    grid = (-(-L // config.block_l), B)  # one program per block of queries of each (sentence, head)
    args = (q, k, v, output, lse, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            output.stride(0), output.stride(1), L, S, scale)
    kwargs = {"IS_CAUSAL": bool(is_causal), "BLOCK_L": config.block_l, "BLOCK_S": config.block_s, "HEAD_DIM": E,
              "VALUE_DIM": Ev, "PRECISION": "ieee" if q.dtype == torch.float32 else None,  # float32: no TF32
              "num_warps": config.num_warps, "num_stages": config.num_stages}
    return grid, args, kwargs


def launch(q, k, v, output, lse, *, is_causal: bool, scale: float | None, block_sizes: tuple[int, int] | None = None,
           kernel) -> LaunchConfig:
    """Launch ``kernel`` (compiled or :func:`interpreted`, as the tensors' device needs: lesson 14's is
    :func:`~.triton_kernel.kernel_for`) and return the config it ran with.

    The tensors are as in :func:`launch_arguments`. When the GPU refuses the config (``OutOfResources``: too much
    shared memory or too many registers), it tries :meth:`LaunchConfig.smaller` ones, unless ``block_sizes`` were
    given: then it raises a ``ValueError`` that says so.
    """
    OutOfResources = import_triton().runtime.errors.OutOfResources  # noqa: N806 - a class
    config = choose_config(q, v, block_sizes)
    while True:
        grid, args, kwargs = launch_arguments(q, k, v, output, lse, is_causal=is_causal, scale=scale, config=config)
        try:
            kernel[grid](*args, **kwargs)
            return config
        except OutOfResources as error:
            smaller = config.smaller()
            if block_sizes is not None or smaller is None:
                raise ValueError(f"this GPU cannot run the kernel with {config} ({error}); pass smaller "
                                 f"block_sizes, or block_sizes=None to let the launcher choose.") from error
            config = smaller
