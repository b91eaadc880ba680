"""Checks of tensors: a tensor, floating point, on one device; query, key and value together; masks; SDPA's
options."""

from __future__ import annotations

import torch

from .values import DtypeMismatchError, check_bool, check_number, check_probability


def check_is_tensor(x, name: str) -> None:
    """Check that ``x`` is a ``torch.Tensor`` (of any dtype and shape); else ``TypeError``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, but got {type(x).__name__}; "
            f"wrap your data with torch.tensor(...) or torch.as_tensor(...)."
        )


def check_tensor(x, name: str, min_dim: int = 2) -> None:
    """Check that ``x`` is a floating-point tensor with at least ``min_dim`` dimensions.

    Raises:
        TypeError: if ``x`` is not a tensor, or not floating point.
        ValueError: if it has fewer than ``min_dim`` dimensions.
    """
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
    """Check that all tensors live on one device and share one dtype.

    Raises:
        ValueError: if the devices differ.
        DtypeMismatchError: if the dtypes differ.
    """
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


def check_query_key(query, key) -> None:
    """Check query ``(N, ..., L, E)`` and key ``(N, ..., S, E)``: the matchmaker's inputs.

    Raises:
        TypeError: if one is not a floating-point tensor (or their dtypes differ).
        ValueError: if one has fewer than 2 dimensions, ``E`` differs or is 0, the batch dimensions do not broadcast,
            or the devices differ.
    """
    check_tensor(query, "query")
    check_tensor(key, "key")
    check_same_device_and_dtype(query=query, key=key)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share the last dimension d_k, but query.shape={tuple(query.shape)} and "
            f"key.shape={tuple(key.shape)}; did you forget to project them to the same size?"
        )
    if query.shape[-1] == 0:
        raise ValueError(
            f"query and key must have at least one feature (E >= 1), but query.shape={tuple(query.shape)} and "
            f"key.shape={tuple(key.shape)}; an empty vector matches nothing: project the words to E >= 1 features."
        )
    check_batch_broadcasts(query=query, key=key)


def check_qkv(query, key, value) -> None:
    """Check query ``(N, ..., L, E)``, key ``(N, ..., S, E)`` and value ``(N, ..., S, Ev)`` together.

    Raises:
        TypeError: if one is not a floating-point tensor (or the dtypes differ).
        ValueError: if one has fewer than 2 dimensions, ``E`` or ``S`` disagree, ``E`` is 0, the batch dimensions do
            not broadcast, or the devices (or dtypes) differ.
    """
    check_query_key(query, key)
    check_tensor(value, "value")
    check_same_device_and_dtype(query=query, key=key, value=value)
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions S (dimension -2), but "
            f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}; every key needs exactly one "
            f"value: build both from the same sequence."
        )
    check_batch_broadcasts(query=query, key=key, value=value)


def check_weights_value(weights, value) -> None:
    """Check weights ``(N, ..., L, S)`` and value ``(N, ..., S, Ev)``: the blend's inputs.

    Raises:
        TypeError: if one is not a floating-point tensor (or their dtypes differ).
        ValueError: if one has fewer than 2 dimensions, ``S`` differs, the batch dimensions do not broadcast, or the
            devices differ.
    """
    check_tensor(weights, "weights")
    check_tensor(value, "value")
    check_same_device_and_dtype(weights=weights, value=value)
    if weights.shape[-1] != value.shape[-2]:
        raise ValueError(
            f"weights must have one column per value row (S), but weights.shape={tuple(weights.shape)} and "
            f"value.shape={tuple(value.shape)}; weights come from percentages(matchmaker(query, key)) with "
            f"the same key sequence as value."
        )
    check_batch_broadcasts(weights=weights, value=value)


def check_batch_broadcasts(**tensors: torch.Tensor) -> None:
    """Check that the batch dimensions (all but the last two) of the tensors broadcast together; else ``ValueError``."""
    try:
        torch.broadcast_shapes(*(t.shape[:-2] for t in tensors.values()))
    except RuntimeError:
        found = ", ".join(f"{name}.shape={tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(
            f"the batch dimensions (all but the last two) of {', '.join(tensors)} must broadcast, but {found}; "
            f"give them the same leading (N, ...) sizes, or size 1 where one should be shared."
        ) from None


def scores_shape(query: torch.Tensor, key: torch.Tensor) -> tuple[int, ...]:
    """The shape ``(N, ..., L, S)`` of the score matrix for these inputs."""
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    return (*batch, query.shape[-2], key.shape[-2])


def check_mask(attn_mask, scores: tuple[int, ...], like: torch.Tensor) -> None:
    """Check that a mask is bool or ``like``'s float dtype, on its device, and broadcasts to ``scores``.

    Raises:
        TypeError: if ``attn_mask`` is not a tensor or has an unusable dtype (or another float dtype).
        ValueError: if it is on another device or does not broadcast to the scores' shape.
    """
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
    """Check the options shared with ``torch.nn.functional.scaled_dot_product_attention``.

    Raises:
        TypeError: if ``dropout_p`` or ``scale`` is not a number, or ``is_causal`` not a bool.
        ValueError: if ``attn_mask`` is combined with ``is_causal``, ``dropout_p`` is outside ``[0, 1)`` or
            ``scale`` is not finite.
    """
    check_bool(is_causal, "is_causal")
    if attn_mask is not None and is_causal:
        raise ValueError(
            "pass either attn_mask or is_causal=True, not both; to combine a causal mask with another mask, "
            "build it with attention_lib.causal_mask(L, S) and combine them with & (bool masks)."
        )
    check_probability(dropout_p, "dropout_p")
    if scale is not None:
        check_number(scale, "scale", fix="leave it None for 1/sqrt(E).")
