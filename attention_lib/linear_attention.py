"""Linear attention: the softmax replaced by a feature map, so that attention becomes a running sum.

Lesson 06's recipe blends the values with ``softmax(Q Kᵀ)``. Replace ``exp(q · k)`` by ``φ(q) · φ(k)`` with a
positive feature map ``φ`` (here ``elu(x) + 1``, Katharopoulos et al. 2020, "Transformers are RNNs") and the
weights are still positive and still sum to one, but the product regroups: ``(φ(Q) φ(K)ᵀ) V = φ(Q) (φ(K)ᵀ V)``.
``φ(K)ᵀ V`` is a ``(Dk, Dv)`` matrix whatever the length, so a causal model can carry it from token to token as a
state of fixed size instead of a cache that grows. Three forms give the same numbers: the parallel form
(:func:`linear_attention`, the weights written out, as lesson 06 does), the recurrent form
(:func:`recurrent_linear_attention`, one token at a time, the state carried) and the chunked form
(:func:`chunk_linear_attention`, blocks of tokens as in lesson 10). Built step by step in
``notebooks/19_linear_attention.ipynb``; the gated delta rule, which learns to overwrite the state, is in
:mod:`attention_lib.delta_rule`.

Layout: the course's ``(N, ..., L, E)``, heads before positions. ``transformers`` (and FLA) lay the same tensors out
as ``(B, L, H, E)``: ``ours = theirs.transpose(1, 2)``, and back the same way.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from ._linear_checks import check_chunk_size, check_recurrent_qkv, check_state_tensor
from .validation import check_bool

__all__ = ["LinearAttentionState", "chunk_linear_attention", "elu_feature_map", "linear_attention",
           "recurrent_linear_attention"]


class LinearAttentionState(NamedTuple):
    """The fixed-size state of causal linear attention after some tokens, per head.

    Attributes:
        kv: ``(N, ..., Dk, Dv)``, the sum of ``φ(k) vᵀ`` over the tokens seen (what a KV cache keeps as rows).
        k_sum: ``(N, ..., Dk)``, the sum of ``φ(k)``: the normaliser, so that the weights sum to one.
    """

    kv: torch.Tensor
    k_sum: torch.Tensor


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """The feature map ``φ(x) = elu(x) + 1`` of Katharopoulos et al. (2020): positive everywhere, ``x + 1`` for
    ``x > 0`` and ``exp(x)`` below.

    Built step by step in ``notebooks/19_linear_attention.ipynb``.

    Args:
        x: a floating-point tensor of any shape (queries or keys, ``(N, ..., L, Dk)``).

    Returns:
        A tensor of ``x``'s shape, every entry ``> 0``.

    Raises:
        TypeError: if ``x`` is not a floating-point tensor.

    Example:
        >>> elu_feature_map(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0.3679, 1.0000, 3.0000])
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        found = f"{type(x).__name__}" + (f" of dtype {x.dtype}" if isinstance(x, torch.Tensor) else "")
        raise TypeError(f"x must be a floating-point tensor, but got {found}; "
                        f"convert it with torch.as_tensor(x).float().")
    return F.elu(x) + 1


def linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                     is_causal: bool = False) -> torch.Tensor:
    """Linear attention in its parallel form: lesson 06's blend with ``φ(q) · φ(k)`` in place of ``exp(q · k)``.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. The weight of key ``j`` for query ``i`` is
    ``φ(q_i) · φ(k_j) / Σ_j' φ(q_i) · φ(k_j')`` (``φ`` = :func:`elu_feature_map`): positive, summing to one over
    the keys a query may see. Without a mask the product is regrouped, ``φ(Q) (φ(K)ᵀ V)``, and its cost grows with
    ``L + S``, not with ``L x S``; with ``is_causal=True`` the ``(L, L)`` weights are written out and masked (the form
    a model trains with; :func:`recurrent_linear_attention` gives the same numbers token by token). No scale: the
    feature map replaces it.

    Args:
        query: ``(N, ..., L, Dk)``; ``transformers``' ``(B, L, H, Dk)`` is ``query.transpose(1, 2)``.
        key: ``(N, ..., S, Dk)``, the same leading sizes as ``query``.
        value: ``(N, ..., S, Dv)``.
        is_causal: if True, position ``i`` sees keys ``0..i`` only (then ``S`` must equal ``L``).

    Returns:
        ``(N, ..., L, Dv)``.

    Raises:
        TypeError: if an input is not a floating-point tensor, the dtypes differ, or ``is_causal`` is not a bool.
        ValueError: if the shapes do not fit together, the devices differ, or ``is_causal`` with ``S != L``.

    Example:
        >>> q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 6)
        >>> linear_attention(q, k, v).shape
        torch.Size([2, 3, 5, 6])
        >>> out, state = recurrent_linear_attention(q, k, v)
        >>> torch.allclose(linear_attention(q, k, v, is_causal=True), out, atol=1e-6)
        True
    """
    check_bool(is_causal, "is_causal")
    check_recurrent_qkv(query, key, value, same_length=is_causal)
    phi_q, phi_k = elu_feature_map(query), elu_feature_map(key)
    if not is_causal:
        kv = phi_k.transpose(-2, -1) @ value                         # (N, ..., Dk, S) @ (N, ..., S, Dv) -> (Dk, Dv)
        numerator = phi_q @ kv                                       # (N, ..., L, Dk) @ (N, ..., Dk, Dv) -> (L, Dv)
        denominator = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)        # (N, ..., L, Dk) @ (N, ..., Dk, 1) -> (L, 1)
        return numerator / denominator
    L = query.shape[-2]
    scores = phi_q @ phi_k.transpose(-2, -1)                         # (N, ..., L, Dk) @ (N, ..., Dk, L) -> (L, L)
    allowed = torch.ones(L, L, dtype=torch.bool, device=query.device).tril()
    scores = scores.masked_fill(~allowed, 0.0)
    weights = scores / scores.sum(dim=-1, keepdim=True)              # each row sums to one
    return weights @ value                                           # (N, ..., L, L) @ (N, ..., L, Dv) -> (L, Dv)


def _zero_state(query: torch.Tensor, value: torch.Tensor) -> LinearAttentionState:
    batch, dk, dv = query.shape[:-2], query.shape[-1], value.shape[-1]
    return LinearAttentionState(query.new_zeros(*batch, dk, dv), query.new_zeros(*batch, dk))


def _check_linear_state(state, query: torch.Tensor, value: torch.Tensor) -> LinearAttentionState:
    if state is None:
        return _zero_state(query, value)
    if not isinstance(state, tuple) or len(state) != 2:
        raise TypeError(f"initial_state must be a LinearAttentionState (kv, k_sum), as returned by "
                        f"recurrent_linear_attention, but got {type(state).__name__}; pass the state it returned, "
                        f"or None to start from zero.")
    batch, dk, dv = tuple(query.shape[:-2]), query.shape[-1], value.shape[-1]
    check_state_tensor(state[0], "initial_state.kv", (*batch, dk, dv), query)
    check_state_tensor(state[1], "initial_state.k_sum", (*batch, dk), query)
    return LinearAttentionState(*state)


def recurrent_linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                               initial_state: LinearAttentionState | None = None,
                               ) -> tuple[torch.Tensor, LinearAttentionState]:
    """Causal linear attention one token at a time, carrying a state of fixed size.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. For each token ``t``: add ``φ(k_t) v_tᵀ`` to
    the ``(Dk, Dv)`` state and ``φ(k_t)`` to the normaliser, then read ``φ(q_t)ᵀ kv / φ(q_t) · k_sum``. The state
    never grows, so decoding a token costs the same at position 10 as at position 10,000: pass the returned state
    back as ``initial_state`` with the next token.

    Args:
        query: ``(N, ..., L, Dk)``; ``transformers``' ``(B, L, H, Dk)`` is ``query.transpose(1, 2)``.
        key: ``(N, ..., L, Dk)``.
        value: ``(N, ..., L, Dv)``.
        initial_state: the state after earlier tokens (``kv`` ``(N, ..., Dk, Dv)``, ``k_sum`` ``(N, ..., Dk)``),
            or None to start from zero.

    Returns:
        ``(output, state)``: ``(N, ..., L, Dv)`` and the :class:`LinearAttentionState` after the ``L`` tokens.

    Raises:
        TypeError: if an input is not a floating-point tensor, the dtypes differ, or ``initial_state`` is not a
            ``(kv, k_sum)`` pair.
        ValueError: if the shapes do not fit together or the devices differ.

    Example:
        >>> q, k, v = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 3)
        >>> whole, state = recurrent_linear_attention(q, k, v)
        >>> first, s = recurrent_linear_attention(q[..., :4, :], k[..., :4, :], v[..., :4, :])
        >>> rest, s = recurrent_linear_attention(q[..., 4:, :], k[..., 4:, :], v[..., 4:, :], initial_state=s)
        >>> torch.allclose(whole[..., 4:, :], rest, atol=1e-6), tuple(s.kv.shape)
        (True, (1, 2, 4, 3))
    """
    check_recurrent_qkv(query, key, value, same_length=True)
    kv, k_sum = _check_linear_state(initial_state, query, value)
    phi_q, phi_k = elu_feature_map(query), elu_feature_map(key)
    outputs = []
    for t in range(query.shape[-2]):
        q_t, k_t, v_t = phi_q[..., t, :], phi_k[..., t, :], value[..., t, :]   # (N, ..., Dk), (Dk), (Dv)
        kv = kv + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)                         # (Dk, 1) * (1, Dv) -> (Dk, Dv)
        k_sum = k_sum + k_t
        read = (q_t.unsqueeze(-2) @ kv).squeeze(-2)                             # (1, Dk) @ (Dk, Dv) -> (Dv)
        outputs.append(read / (q_t * k_sum).sum(dim=-1, keepdim=True))
    output = torch.stack(outputs, dim=-2) if outputs else value.new_zeros(value.shape)
    return output, LinearAttentionState(kv, k_sum)


def chunk_linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, chunk_size: int = 64,
                           initial_state: LinearAttentionState | None = None,
                           ) -> tuple[torch.Tensor, LinearAttentionState]:
    """Causal linear attention in chunks: inside a chunk the parallel form, between chunks the state.

    Built step by step in ``notebooks/19_linear_attention.ipynb``, as lesson 10's blocks once more. Each chunk of
    ``chunk_size`` tokens reads the state left by the chunks before it (one product), adds its own masked
    ``(C, C)`` weights, then folds its keys and values into the state. Equal to
    :func:`recurrent_linear_attention`; the last chunk may be shorter.

    Args:
        query: ``(N, ..., L, Dk)``; ``transformers``' ``(B, L, H, Dk)`` is ``query.transpose(1, 2)``.
        key: ``(N, ..., L, Dk)``.
        value: ``(N, ..., L, Dv)``.
        chunk_size: tokens per chunk, a positive int (any ``L`` works; the last chunk holds the rest).
        initial_state: as in :func:`recurrent_linear_attention`.

    Returns:
        ``(output, state)``: ``(N, ..., L, Dv)`` and the :class:`LinearAttentionState` after the ``L`` tokens.

    Raises:
        TypeError: as :func:`recurrent_linear_attention`, or if ``chunk_size`` is not an int.
        ValueError: as :func:`recurrent_linear_attention`, or if ``chunk_size < 1``.

    Example:
        >>> q, k, v = torch.randn(1, 2, 7, 4), torch.randn(1, 2, 7, 4), torch.randn(1, 2, 7, 3)
        >>> out, state = chunk_linear_attention(q, k, v, chunk_size=3)
        >>> torch.allclose(out, recurrent_linear_attention(q, k, v)[0], atol=1e-6)
        True
    """
    check_recurrent_qkv(query, key, value, same_length=True)
    chunk_size = check_chunk_size(chunk_size)
    kv, k_sum = _check_linear_state(initial_state, query, value)
    phi_q, phi_k = elu_feature_map(query), elu_feature_map(key)
    outputs = []
    for start in range(0, query.shape[-2], chunk_size):
        q, k, v = (x[..., start:start + chunk_size, :] for x in (phi_q, phi_k, value))   # (N, ..., C, E)
        C = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)).masked_fill(                                # (C, Dk) @ (Dk, C) -> (C, C)
            ~torch.ones(C, C, dtype=torch.bool, device=q.device).tril(), 0.0)
        numerator = q @ kv + scores @ v                  # what earlier chunks left + this chunk: (C, Dv)
        denominator = q @ k_sum.unsqueeze(-1) + scores.sum(dim=-1, keepdim=True)         # (C, 1)
        outputs.append(numerator / denominator)
        kv = kv + k.transpose(-2, -1) @ v                                               # (Dk, C) @ (C, Dv)
        k_sum = k_sum + k.sum(dim=-2)
    output = torch.cat(outputs, dim=-2) if outputs else value.new_zeros(value.shape)
    return output, LinearAttentionState(kv, k_sum)
