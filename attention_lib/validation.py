"""Input checks shared by every attention function, with errors a learner can act on.

Each message says what was expected, what was found (the shapes, dtypes or devices) and how to fix it.
Shapes and values raise ``ValueError``; a wrong Python type or an unusable dtype raises ``TypeError``;
tensors whose dtypes disagree raise :class:`DtypeMismatchError`, which is both a ``ValueError`` and a
``TypeError`` so that either ``except`` clause catches it.
"""

from __future__ import annotations

import math
from numbers import Real

import torch


class DtypeMismatchError(ValueError, TypeError):
    """Two tensors that must share a dtype do not (catch it as ``ValueError`` or ``TypeError``)."""


def check_is_tensor(x, name: str) -> None:
    """Check that ``x`` is a ``torch.Tensor`` (of any dtype and shape)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, but got {type(x).__name__}; "
            f"wrap your data with torch.tensor(...) or torch.as_tensor(...)."
        )


def check_tensor(x, name: str, min_dim: int = 2) -> None:
    """Check that ``x`` is a floating-point tensor with at least ``min_dim`` dimensions."""
    check_is_tensor(x, name)
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, but {name}.dtype={x.dtype}; "
            f"convert it with {name}.float() (softmax and scaling need real numbers)."
        )
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions (..., positions, features), but "
            f"{name}.shape={tuple(x.shape)}; for a single sentence use shape (L, E), e.g. {name}.unsqueeze(0)."
        )


def check_same_device_and_dtype(**tensors: torch.Tensor) -> None:
    """Check that all tensors live on one device and share one dtype."""
    names = list(tensors)
    first = tensors[names[0]]
    for name in names[1:]:
        t = tensors[name]
        if t.device != first.device:
            found = ", ".join(f"{n}.device={tensors[n].device}" for n in names)
            raise ValueError(
                f"all tensors must be on the same device, but found {found}; "
                f"move them with .to(device) first (see attention_lib.get_device())."
            )
        if t.dtype != first.dtype:
            found = ", ".join(f"{n}.dtype={tensors[n].dtype}" for n in names)
            raise DtypeMismatchError(
                f"all tensors must share one dtype, but found {found}; "
                f"convert them with .to({first.dtype}) (or another common dtype) first."
            )


def check_qkv(query, key, value) -> None:
    """Check query ``(N, ..., L, E)``, key ``(N, ..., S, E)`` and value ``(N, ..., S, Ev)`` together."""
    check_tensor(query, "query")
    check_tensor(key, "key")
    check_tensor(value, "value")
    check_same_device_and_dtype(query=query, key=key, value=value)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share the last dimension d_k, but query.shape={tuple(query.shape)} and "
            f"key.shape={tuple(key.shape)}; did you forget to project them to the same size?"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions S (dimension -2), but "
            f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}; every key needs exactly one "
            f"value: build both from the same sequence."
        )
    try:
        torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the batch dimensions (all but the last two) of query, key and value must broadcast, but "
            f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}, value.shape={tuple(value.shape)}; "
            f"give them the same leading (N, ...) sizes, or size 1 where one should be shared."
        ) from None


def scores_shape(query: torch.Tensor, key: torch.Tensor) -> tuple[int, ...]:
    """The shape ``(N, ..., L, S)`` of the score matrix for these inputs."""
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    return (*batch, query.shape[-2], key.shape[-2])


def check_mask(attn_mask, scores: tuple[int, ...], like: torch.Tensor) -> None:
    """Check that a mask is bool or ``like``'s float dtype and broadcasts to the scores' shape."""
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(
            f"attn_mask must be a torch.Tensor (bool: True = may attend, or float: added to the scores), "
            f"but got {type(attn_mask).__name__}; build one with attention_lib.causal_mask or torch.tensor(...)."
        )
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError(
            f"attn_mask must be bool (True = may attend) or floating point (added to the scores), but "
            f"attn_mask.dtype={attn_mask.dtype}; use attn_mask.bool() if 1 means 'may attend'."
        )
    if attn_mask.is_floating_point() and attn_mask.dtype != like.dtype:
        raise DtypeMismatchError(
            f"a float attn_mask must have the same dtype as query, but attn_mask.dtype={attn_mask.dtype} and "
            f"query.dtype={like.dtype}; convert it with attn_mask.to(query.dtype)."
        )
    if attn_mask.device != like.device:
        raise ValueError(
            f"attn_mask must be on the same device as query, but attn_mask.device={attn_mask.device} and "
            f"query.device={like.device}; move it with attn_mask.to(query.device)."
        )
    try:
        ok = torch.broadcast_shapes(attn_mask.shape, scores) == torch.Size(scores)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"attn_mask must broadcast to the scores' shape (..., L, S) = {tuple(scores)}, but "
            f"attn_mask.shape={tuple(attn_mask.shape)}; a mask is (L, S) for one sentence, or (N, 1, S) / "
            f"(N, 1, 1, S) for padding."
        )


def check_options(attn_mask, dropout_p, is_causal, scale) -> None:
    """Check the keyword options shared with ``torch.nn.functional.scaled_dot_product_attention``."""
    if attn_mask is not None and is_causal:
        raise ValueError(
            "pass either attn_mask or is_causal=True, not both; to combine a causal mask with another mask, "
            "build it with attention_lib.causal_mask(L, S) and combine them with & (bool masks)."
        )
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, Real):
        raise TypeError(f"dropout_p must be a number in [0, 1), but got {type(dropout_p).__name__}.")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(
            f"dropout_p must be in [0, 1), but dropout_p={dropout_p}; use 0.0 to switch dropout off."
        )
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, Real):
            raise TypeError(f"scale must be a number or None, but got {type(scale).__name__}.")
        if not math.isfinite(scale):
            raise ValueError(f"scale must be a finite number, but scale={scale}; leave it None for 1/sqrt(E).")
