"""The argument checks shared by linear attention and the gated delta rule (their layouts and states)."""

from __future__ import annotations

import torch

from .validation import check_int, check_qkv, check_same_device_and_dtype, check_tensor


def check_recurrent_qkv(query, key, value, *, same_length: bool) -> None:
    """Check query ``(N, ..., L, Dk)``, key ``(N, ..., S, Dk)``, value ``(N, ..., S, Dv)``: one dtype and device,
    the same leading sizes, and ``S == L`` when ``same_length`` (a causal or recurrent form)."""
    check_qkv(query, key, value)
    if not query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:
        raise ValueError(
            f"query, key and value must have the same leading sizes (N, ...), but query.shape={tuple(query.shape)}, "
            f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}; expand a shared one with "
            f".expand(...) first.")
    if same_length and query.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"the causal and recurrent forms need one key per query (L == S), but query.shape={tuple(query.shape)} "
            f"and key.shape={tuple(key.shape)}; to continue after earlier tokens, pass their state as "
            f"initial_state instead of their keys.")


def check_state_tensor(state, name: str, shape: tuple[int, ...], like: torch.Tensor) -> None:
    """Check that a recurrent state is a tensor of ``shape`` with ``like``'s dtype and device."""
    check_tensor(state, name, min_dim=1)
    check_same_device_and_dtype(query=like, **{name.replace(".", "_"): state})
    if tuple(state.shape) != tuple(shape):
        raise ValueError(
            f"{name} must have shape {tuple(shape)} (the state after earlier tokens, for these heads and head sizes), "
            f"but {name}.shape={tuple(state.shape)}; pass the state the same function returned, or None.")


def check_gates(g, beta, query: torch.Tensor) -> None:
    """Check the log decay ``g`` and the writing strength ``beta``: both ``(N, ..., L)``, query's dtype and device,
    and ``g <= 0`` (the state is multiplied by ``exp(g) <= 1``)."""
    length = tuple(query.shape[:-1])
    for name, x in (("g", g), ("beta", beta)):
        check_tensor(x, name, min_dim=1)
        check_same_device_and_dtype(query=query, **{name: x})
        if tuple(x.shape) != length:
            raise ValueError(
                f"{name} must have one number per head and position, shape {length} (query's shape without its "
                f"last dimension), but {name}.shape={tuple(x.shape)}; transformers' (B, L, H) is "
                f"{name}.transpose(1, 2).")
    if (g > 0).any():
        raise ValueError(
            f"g is the log of the decay and must be <= 0, but its largest entry is {g.max().item():.3g}; if you "
            f"passed the decay itself (between 0 and 1), pass its log: g = decay.log().")


def check_chunk_size(chunk_size) -> int:
    """Check that ``chunk_size`` is a positive int; return it."""
    return check_int(chunk_size, "chunk_size", minimum=1, fix="a chunk holds at least one token.")
