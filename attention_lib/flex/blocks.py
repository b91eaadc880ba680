"""The blocks a compiled FlexAttention kernel computes or skips, and whether this machine can compile it.

``create_block_mask(mask_mod, B, H, L, S, BLOCK_SIZE=...)`` evaluates the rule once and sorts the tiles of the
score table (lesson 10's tiles) into three kinds: **full** (every score allowed: computed, no mask needed),
**partial** (computed, then masked score by score) and **skipped** (every score blocked: never computed). A
``BlockMask`` keeps, for each row of tiles, the columns of its partial tiles (``kv_num_blocks``, ``kv_indices``)
and of its full ones (``full_kv_num_blocks``, ``full_kv_indices``). Built step by step in
``notebooks/20_flex_attention.ipynb``.
"""

from __future__ import annotations

import os
import shutil
import sysconfig

import torch

from ..validation import check_int, check_is_tensor

#: What happens to a tile, by its code in :func:`tiles_of_mask` and :func:`tiles_of_block_mask` (the order of
#: lesson 10's tiles: computed, computed then masked, skipped).
TILE_KINDS: tuple[str, ...] = ("full: computed, no mask", "partial: computed, then masked", "skipped: all blocked")


def tiles_of_mask(mask: torch.Tensor, block_size: int) -> torch.Tensor:
    """Each ``block_size x block_size`` tile of a dense mask ``(L, S)`` as a code: 0 full, 1 partial, 2 skipped.

    Built step by step in ``notebooks/20_flex_attention.ipynb``: counted from the mask itself, the way
    ``create_block_mask`` sorts its tiles. Where ``L`` or ``S`` is not a multiple of ``block_size``, the last tiles
    reach past the end, and those missing positions count as blocked: such a tile is never full.

    Args:
        mask: a bool tensor ``(L, S)``, ``True`` = **may attend**.
        block_size: the side of a tile, a positive int.

    Returns:
        A ``(ceil(L / block_size), ceil(S / block_size))`` integer tensor of codes (:data:`TILE_KINDS`).

    Raises:
        TypeError: if ``mask`` is not a bool tensor or ``block_size`` not an int.
        ValueError: if ``mask`` is not 2-D or ``block_size < 1``.

    Example:
        >>> tiles_of_mask(torch.ones(4, 4, dtype=torch.bool).tril(), 2)
        tensor([[1, 2],
                [0, 1]])
    """
    check_is_tensor(mask, "mask")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = may attend), but mask.dtype={mask.dtype}; compare a "
                        f"float mask with > float('-inf') first.")
    if mask.dim() != 2:
        raise ValueError(f"mask must be 2-D (L, S), one batch entry and head, but mask.shape={tuple(mask.shape)}; "
                         f"take mask[0, 0] of a (B, H, L, S) mask.")
    block_size = check_int(block_size, "block_size", minimum=1, fix="pass the side of a tile, e.g. 128.")
    L, S = mask.shape
    rows, columns = -(-L // block_size), -(-S // block_size)
    padded = torch.zeros(rows * block_size, columns * block_size, dtype=torch.bool, device=mask.device)
    padded[:L, :S] = mask  # positions past the end: blocked
    tiles = padded.reshape(rows, block_size, columns, block_size).transpose(1, 2)  # (rows, columns, bs, bs)
    allowed = tiles.sum(dim=(-2, -1))  # (rows, columns): how many scores of each tile are allowed
    full = allowed == block_size * block_size
    return torch.where(full, 0, torch.where(allowed > 0, 1, 2)).cpu()


def tiles_of_block_mask(block_mask, b: int = 0, h: int = 0) -> torch.Tensor:
    """The tiles a ``BlockMask`` keeps for batch entry ``b`` and head ``h``, as codes: 0 full, 1 partial, 2 skipped.

    Built step by step in ``notebooks/20_flex_attention.ipynb``: read from the block mask's own lists of partial and
    full tiles (with ``separate_full_blocks=False`` every computed tile is listed as partial).

    Raises:
        TypeError: if ``block_mask`` has no tile lists (it is not a ``BlockMask``).

    Example:
        >>> from torch.nn.attention.flex_attention import create_block_mask
        >>> rule = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
        >>> causal = create_block_mask(rule, 1, 1, 4, 4, device="cpu", BLOCK_SIZE=2)
        >>> tiles_of_block_mask(causal)
        tensor([[1, 2],
                [0, 1]])
    """
    if not hasattr(block_mask, "kv_num_blocks") or not hasattr(block_mask, "kv_indices"):
        raise TypeError(f"block_mask must be a BlockMask (from create_block_mask), but got "
                        f"{type(block_mask).__name__}.")
    L, S = block_mask.seq_lengths
    rows, columns = -(-L // block_mask.BLOCK_SIZE[0]), -(-S // block_mask.BLOCK_SIZE[1])
    codes = torch.full((rows, columns), 2, dtype=torch.long)  # skipped unless listed
    lists = [(block_mask.kv_num_blocks, block_mask.kv_indices, 1)]
    if getattr(block_mask, "full_kv_num_blocks", None) is not None:
        lists.append((block_mask.full_kv_num_blocks, block_mask.full_kv_indices, 0))
    for counts, indices, code in lists:
        b_, h_ = min(b, counts.size(0) - 1), min(h, counts.size(1) - 1)  # a size-1 batch or head broadcasts
        for row in range(rows):
            listed = indices[b_, h_, row, :int(counts[b_, h_, row])]
            codes[row, listed[listed < columns].long()] = code
    return codes


def find_compiler() -> str | None:
    """Why ``torch.compile`` cannot build FlexAttention's CPU kernel here, or ``None`` when it can.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. On a CPU, compiling writes C++ and builds it with
    the machine's C++ compiler (``g++`` by default, or the one in the ``CXX`` environment variable), against
    Python's headers. This asks PyTorch's own compiler lookup (``torch._inductor``; private, so read with care),
    then looks for ``Python.h``. Set ``CXX`` to a missing program to see the lesson without a compiler.

    Returns:
        ``None`` when both are found, else the reason in one sentence.

    Example:
        >>> reason = find_compiler()
        >>> reason is None or reason.startswith("no ")
        True
    """
    compiler = os.environ.get("CXX") or "g++"
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
    except ImportError:  # another torch release: look the program up instead
        get_cpp_compiler = None
    try:
        if get_cpp_compiler is not None:
            compiler = get_cpp_compiler()
    except TypeError:  # its signature changed in another release: look the program up instead
        get_cpp_compiler = None
    except Exception as error:  # noqa: BLE001 - torch raises its own InvalidCxxCompiler here
        return f"no working C++ compiler found ({str(error).strip().splitlines()[0][:160]})"
    if get_cpp_compiler is None and shutil.which(compiler) is None:
        return f"no C++ compiler found ({compiler!r} is not on the PATH)"
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"no Python headers found (Python.h is not in {include!r}; install python3-dev or similar)"
    return None
