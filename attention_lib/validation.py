"""Argument checks, in one place, with errors a learner can act on.

Every public function of the attention core checks its arguments with these helpers, so the same mistake
gives the same error everywhere. Each message says what was expected, what was found (the value, shape,
dtype or device) and how to fix it. The rule:

- a wrong Python type, or a tensor dtype that cannot work (an integer tensor where numbers are averaged),
  raises ``TypeError``;
- a wrong shape or value (a negative size, a mask that does not broadcast, a probability of 1.5) raises
  ``ValueError``;
- tensors whose dtypes disagree raise :class:`DtypeMismatchError`, both a ``ValueError`` and a ``TypeError``,
  so that either ``except`` clause catches it.

The helpers for plain arguments return the checked value, so a call reads ``L = check_int(L, "L")``:

- :func:`check_int`: an integer (not a bool), at least ``minimum``; :func:`check_index`: an index ``0 .. size - 1``;
- :func:`check_number`: a real number (not a bool), finite, optionally positive or at least ``minimum``;
- :func:`is_int`, :func:`is_number`: the same tests as a bool, for checkers that answer with a message;
- :func:`check_probability`: a number in ``[0, 1)`` (dropout);
- :func:`check_bool`: ``True`` or ``False``;
- :func:`check_is_tensor`, :func:`check_tensor`: a tensor; a floating-point tensor with enough dimensions.

Example:
    >>> check_int(3, "num_heads", minimum=1)
    3
    >>> check_int(2.0, "num_heads")
    Traceback (most recent call last):
    ...
    TypeError: num_heads must be an int, but got float (2.0).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import torch


class DtypeMismatchError(ValueError, TypeError):
    """Two tensors that must share a dtype do not (catch it as ``ValueError`` or ``TypeError``)."""


def _fix(fix: str) -> str:
    return f"; {fix}" if fix else "."


def check_int(value, name: str, *, minimum: int | None = None, fix: str = "") -> int:
    """Check that ``value`` is an integer (Python or NumPy, not a bool) ``>= minimum``; return it as an ``int``.

    Raises:
        TypeError: if ``value`` is not an integer.
        ValueError: if ``value < minimum``.
    """
    if not is_int(value):
        raise TypeError(f"{name} must be an int, but got {type(value).__name__} ({value!r}){_fix(fix)}")
    if minimum is not None and value < minimum:
        wanted = {0: "non-negative", 1: "positive"}.get(minimum, f"at least {minimum}")
        raise ValueError(f"{name} must be {wanted}, but {name}={value}{_fix(fix)}")
    return int(value)


def is_int(value) -> bool:
    """Whether ``value`` is an integer (Python or NumPy, not a bool): :func:`check_int`'s test, for the checkers."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """Whether ``value`` is a finite real number, a bool excluded (the test behind :func:`check_number`)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def check_index(value, name: str, size: int, *, fix: str = "") -> int:
    """Check that ``value`` is an integer index in ``0 .. size - 1`` (a layer, a head, an example); return it.

    Raises:
        TypeError: if ``value`` is not an integer.
        ValueError: if it is outside ``0 .. size - 1``.
    """
    if not is_int(value):
        raise TypeError(f"{name} must be an int index in 0..{size - 1}, but got {type(value).__name__} "
                        f"({value!r}){_fix(fix)}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must be an index in 0..{size - 1}, but {name}={value!r}{_fix(fix)}")
    return int(value)


def check_number(value, name: str, *, positive: bool = False, minimum: float | None = None,
                 fix: str = "") -> float:
    """Check that ``value`` is a finite real number (not a bool), positive or ``>= minimum`` if asked; return it as a
    ``float``.

    Raises:
        TypeError: if ``value`` is not a real number.
        ValueError: if it is not finite, not positive when ``positive``, or below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, but got {type(value).__name__} ({value!r}){_fix(fix)}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, but {name}={value}{_fix(fix)}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, but {name}={value}{_fix(fix)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum:g}, but {name}={value}{_fix(fix)}")
    return float(value)


def check_probability(value, name: str) -> float:
    """Check that ``value`` is a number in ``[0, 1)`` (a dropout probability); return it as a ``float``.

    Raises ``TypeError`` if ``value`` is not a real number, ``ValueError`` if it is outside ``[0, 1)``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number in [0, 1), but got {type(value).__name__} ({value!r}).")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), but {name}={value}; use 0.0 to switch dropout off.")
    return float(value)


def check_bool(value, name: str) -> bool:
    """Check that ``value`` is ``True`` or ``False`` (not ``1``, ``"yes"`` or ``None``); else ``TypeError``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, but got {type(value).__name__} ({value!r}).")
    return value


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
