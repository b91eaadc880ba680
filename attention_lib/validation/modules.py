"""Checks of whole modules' inputs: ``MultiHeadAttention``'s query, key and value, its rotary positions, token ids."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from .tensors import check_is_tensor


@runtime_checkable
class Rotary(Protocol):
    """What :func:`check_rotary` accepts: rotary positions such as :class:`~attention_lib.RotaryPositions`, which turn
    vectors of size ``dim`` by their position (``angles``, ``forward(x, offset)``). Checked by what it does, so that
    this module needs no import of the modules it checks (they import it)."""

    dim: int

    def angles(self, length: int, offset: int = 0) -> torch.Tensor: ...

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor: ...


def check_multihead_inputs(query, key, value, *, sizes: dict[str, int], dtype: torch.dtype) -> None:
    """Check the inputs of :class:`~attention_lib.MultiHeadAttention`: 3-D, batch first, sized and typed to match.

    Args:
        query, key, value: the module's inputs, ``(N, L, E)``, ``(N, S, kdim)``, ``(N, S, vdim)``.
        sizes: ``{"query": embed_dim, "key": kdim, "value": vdim}``, the features each must have.
        dtype: the dtype of the module's weights.

    Raises:
        TypeError: if an input is not a floating-point tensor or its dtype differs from ``dtype``.
        ValueError: if an input is not 3-D, has the wrong number of features, or ``N``/``S`` disagree.
    """
    names = {"query": "embed_dim", "key": "kdim", "value": "vdim"}
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_is_tensor(x, name)
        if x.dim() != 3:
            raise ValueError(f"{name} must be 3-D (N, length, features), batch first, but "
                             f"{name}.shape={tuple(x.shape)}; for one sentence use {name}.unsqueeze(0).")
        if x.shape[-1] != sizes[name]:
            raise ValueError(f"{name} must have {sizes[name]} features (the module's {names[name]}), but "
                             f"{name}.shape={tuple(x.shape)}; project it or build the module to match.")
        if not x.is_floating_point():
            raise TypeError(f"{name} must hold floating-point vectors, but {name}.dtype={x.dtype}; embed token ids "
                            f"first (nn.Embedding) or convert with {name}.to({dtype}).")
        if x.dtype != dtype:  # nn.Linear would say "mat1 and mat2 must have the same dtype"
            raise TypeError(f"{name}.dtype={x.dtype} but the module's weights are {dtype}; convert one of them, "
                            f"e.g. module.to({x.dtype}).")
    if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
        raise ValueError(f"query, key and value must share N, and key and value S, but "
                         f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}, "
                         f"value.shape={tuple(value.shape)}; every key needs exactly one value.")


def check_rotary(rotary, head_dim: int):
    """Check that ``rotary`` is ``None`` or rotary positions (:class:`Rotary`, e.g. a
    :class:`~attention_lib.RotaryPositions`) of size ``head_dim``; return it.

    Raises:
        TypeError: if it is something else.
        ValueError: if its size is not ``head_dim``.

    Example:
        >>> from attention_lib import RotaryPositions
        >>> check_rotary(RotaryPositions(8), 8).dim
        8
    """
    if rotary is None:
        return None
    if not isinstance(rotary, Rotary):
        raise TypeError(f"rotary must be a RotaryPositions or None, but got {type(rotary).__name__}; build it "
                        f"with RotaryPositions(head_dim).")
    if rotary.dim != head_dim:
        raise ValueError(f"rotary turns vectors of size {rotary.dim}, but each head has head_dim={head_dim} "
                         f"features; build it with RotaryPositions({head_dim}).")
    return rotary


def check_token_ids(tokens, vocab_size: int | None, name: str = "input_ids") -> None:
    """Check that ``tokens`` is an ``(N, L)`` tensor of integer ids in ``0 .. vocab_size - 1``, with ``L >= 1``.

    With ``vocab_size=None`` only negative ids are refused.

    Raises:
        TypeError: if it is not a tensor of integers.
        ValueError: if it is not 2-D, is empty, or holds an id outside the vocabulary.
    """
    check_is_tensor(tokens, name)
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must be integer token ids, but {name}.dtype={tokens.dtype}; pass them as "
                        f"torch.long, e.g. {name}.long().")
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must be (N, L) token ids with L >= 1, but {name}.shape={tuple(tokens.shape)}; "
                         f"for one sequence use ids.unsqueeze(0).")
    top = int(tokens.max()) + 1 if vocab_size is None else vocab_size
    if int(tokens.min()) < 0 or int(tokens.max()) >= top:
        bad = sorted({int(t) for t in tokens[(tokens < 0) | (tokens >= top)].tolist()})
        raise ValueError(f"token ids must lie in 0..{top - 1} (the model knows vocab_size={top} tokens), but "
                         f"found {bad[:5]}; encode the text with the vocabulary it was trained on.")
