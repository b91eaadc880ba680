"""The gated delta rule: a state of fixed size that decays and overwrites, as Qwen3-Next's linear layers keep it.

Linear attention (:mod:`attention_lib.linear_attention`) only ever adds ``k vᵀ`` to its state, so old associations
pile up. The delta rule (Schlag et al. 2021) first reads what the state already says for the key, ``Sᵀ k``, and
writes only the correction ``β (v - Sᵀ k)``: with ``β = 1`` and a unit key, the value stored for ``k`` is replaced.
The gate (Yang et al. 2024, Gated DeltaNet) multiplies the state by ``exp(g) <= 1`` before each token, so it can also
forget. Per token ``t``, with a state ``S`` of ``(Dk, Dv)`` numbers per head::

    S   = exp(g_t) · S                          # forget a little
    S   = S + k_t (β_t (v_t - Sᵀ k_t))ᵀ          # overwrite what k_t reads
    o_t = Sᵀ (q_t · scale)                      # read with the query

:func:`recurrent_gated_delta_rule` is this loop, :func:`chunk_gated_delta_rule` the same numbers a chunk of tokens at
a time (one triangular solve per chunk). Both equal ``transformers``' ``torch_recurrent_gated_delta_rule`` and
``torch_chunk_gated_delta_rule`` (Qwen3-Next's reference code). Built step by step in
``notebooks/19_linear_attention.ipynb``.

Layout: the course's ``(N, ..., L, E)`` and ``(N, ..., L)`` for ``g`` and ``beta``; ``transformers`` lays them out as
``(B, L, H, E)`` and ``(B, L, H)``: ``ours = theirs.transpose(1, 2)``. The state ``(N, H, Dk, Dv)`` is laid out alike
in both.
"""

from __future__ import annotations

import math

import torch

from ._linear_checks import check_chunk_size, check_gates, check_recurrent_qkv, check_state_tensor
from .validation import check_bool, check_number, check_tensor

__all__ = ["chunk_gated_delta_rule", "l2_normalize", "recurrent_gated_delta_rule"]


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Scale each vector (the last dimension) to length one: ``x / sqrt(Σ x² + eps)``, as Qwen3-Next's ``l2norm``.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. A unit key makes the delta rule's overwrite
    exact (``β = 1`` replaces what the key stored) and keeps the state from growing.

    Args:
        x: ``(..., E)``, a floating-point tensor.
        eps: added under the square root, so that a zero vector stays zero.

    Returns:
        A tensor of ``x``'s shape.

    Raises:
        TypeError: if ``x`` is not a floating-point tensor or ``eps`` not a number.
        ValueError: if ``eps`` is negative.

    Example:
        >>> l2_normalize(torch.tensor([[3.0, 4.0]]), eps=0.0)
        tensor([[0.6000, 0.8000]])
    """
    eps = check_number(eps, "eps", minimum=0.0)
    check_tensor(x, "x", min_dim=1)
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _prepare(query, key, value, g, beta, initial_state, scale, use_qk_l2norm):
    """Check everything once; return the scaled (and normalised) query, the key and the starting state."""
    check_recurrent_qkv(query, key, value, same_length=True)
    check_gates(g, beta, query)
    check_bool(use_qk_l2norm, "use_qk_l2norm")
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else check_number(
        scale, "scale", positive=True, fix="leave it None for 1/sqrt(Dk).")
    shape = (*query.shape[:-2], query.shape[-1], value.shape[-1])
    if initial_state is None:
        state = query.new_zeros(shape)
    else:
        check_state_tensor(initial_state, "initial_state", shape, query)
        state = initial_state
    if use_qk_l2norm:
        query, key = l2_normalize(query), l2_normalize(key)
    return query * scale, key, state


def recurrent_gated_delta_rule(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, g: torch.Tensor,
                               beta: torch.Tensor, *, initial_state: torch.Tensor | None = None,
                               scale: float | None = None, use_qk_l2norm: bool = False,
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule one token at a time: decay the state, overwrite what the key reads, read with the query.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. Equal to ``transformers``'
    ``torch_recurrent_gated_delta_rule`` (Qwen3-Next) on the transposed inputs, which also scales the query by
    ``1/sqrt(Dk)`` and, with ``use_qk_l2norm_in_kernel=True``, normalises queries and keys first.

    Args:
        query: ``(N, ..., L, Dk)``; ``transformers``' ``(B, L, H, Dk)`` is ``query.transpose(1, 2)``.
        key: ``(N, ..., L, Dk)``.
        value: ``(N, ..., L, Dv)``.
        g: ``(N, ..., L)``, the log of the decay, ``<= 0``: the state is multiplied by ``exp(g_t)`` before token
            ``t`` (``0`` keeps everything).
        beta: ``(N, ..., L)``, how strongly token ``t`` writes (``0`` nothing, ``1`` a full overwrite; a sigmoid in
            Qwen3-Next).
        initial_state: ``(N, ..., Dk, Dv)``, the state after earlier tokens, or None to start from zero.
        scale: the query's factor; None for ``1/sqrt(Dk)`` (as ``transformers`` always does).
        use_qk_l2norm: if True, queries and keys are first scaled to length one (:func:`l2_normalize`), as
            Qwen3-Next does.

    Returns:
        ``(output, state)``: ``(N, ..., L, Dv)`` and the state ``(N, ..., Dk, Dv)`` after the ``L`` tokens.

    Raises:
        TypeError: if an input is not a floating-point tensor, the dtypes differ, or an option has the wrong type.
        ValueError: if the shapes do not fit together, the devices differ, ``g`` has a positive entry, or
            ``scale`` is not positive.

    Example:
        >>> N, H, L, Dk, Dv = 1, 2, 5, 4, 3
        >>> q, k, v = torch.randn(N, H, L, Dk), torch.randn(N, H, L, Dk), torch.randn(N, H, L, Dv)
        >>> g, beta = -torch.rand(N, H, L), torch.rand(N, H, L)
        >>> out, state = recurrent_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm=True)
        >>> tuple(out.shape), tuple(state.shape)
        ((1, 2, 5, 3), (1, 2, 4, 3))
    """
    query, key, state = _prepare(query, key, value, g, beta, initial_state, scale, use_qk_l2norm)
    outputs = []
    for t in range(query.shape[-2]):
        q_t, k_t, v_t = query[..., t, :], key[..., t, :], value[..., t, :]       # (N, ..., Dk), (Dk), (Dv)
        state = state * g[..., t].exp()[..., None, None]                         # forget: (Dk, Dv) * scalar
        stored = (k_t.unsqueeze(-2) @ state).squeeze(-2)                         # what k_t reads: (1, Dk) @ (Dk, Dv)
        delta = beta[..., t, None] * (v_t - stored)                              # the correction to write: (Dv)
        state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)                  # (Dk, 1) * (1, Dv) -> (Dk, Dv)
        outputs.append((q_t.unsqueeze(-2) @ state).squeeze(-2))                  # read: (1, Dk) @ (Dk, Dv) -> (Dv)
    output = torch.stack(outputs, dim=-2) if outputs else value.new_zeros(value.shape)
    return output, state


def chunk_gated_delta_rule(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, g: torch.Tensor,
                           beta: torch.Tensor, *, chunk_size: int = 64, initial_state: torch.Tensor | None = None,
                           scale: float | None = None, use_qk_l2norm: bool = False,
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule a chunk of tokens at a time: the recurrent loop's numbers with products of matrices.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. Inside a chunk, write ``u_i`` for what token
    ``i`` adds to the state (its correction ``β_i (v_i - Sᵀ k_i)``). Each ``u_i`` depends on the ``u_j`` before it
    in the chunk, through ``β_i (k_i · k_j)`` times the decay between ``j`` and ``i``: a lower-triangular system,
    solved at once (``torch.linalg.solve_triangular``). Then the chunk's outputs are what the state before the chunk
    gives, plus masked attention inside the chunk with the ``u`` as values, and the state moves to the chunk's end.
    Equal to :func:`recurrent_gated_delta_rule` and to ``transformers``' ``torch_chunk_gated_delta_rule``; the last
    chunk may be shorter (no padding).

    Args:
        query, key, value, g, beta, initial_state, scale, use_qk_l2norm: as in :func:`recurrent_gated_delta_rule`.
        chunk_size: tokens per chunk, a positive int (Qwen3-Next uses 64).

    Returns:
        ``(output, state)``: ``(N, ..., L, Dv)`` and the state ``(N, ..., Dk, Dv)`` after the ``L`` tokens.

    Raises:
        TypeError: as :func:`recurrent_gated_delta_rule`, or if ``chunk_size`` is not an int.
        ValueError: as :func:`recurrent_gated_delta_rule`, or if ``chunk_size < 1``.

    Example:
        >>> N, H, L, Dk, Dv = 1, 2, 7, 4, 3
        >>> q, k, v = torch.randn(N, H, L, Dk), torch.randn(N, H, L, Dk), torch.randn(N, H, L, Dv)
        >>> g, beta = -torch.rand(N, H, L), torch.rand(N, H, L)
        >>> out, state = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=3, use_qk_l2norm=True)
        >>> ref, ref_state = recurrent_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm=True)
        >>> torch.allclose(out, ref, atol=1e-5), torch.allclose(state, ref_state, atol=1e-5)
        (True, True)
    """
    chunk_size = check_chunk_size(chunk_size)
    query, key, state = _prepare(query, key, value, g, beta, initial_state, scale, use_qk_l2norm)
    outputs = []
    for start in range(0, query.shape[-2], chunk_size):
        q, k, v = (x[..., start:start + chunk_size, :] for x in (query, key, value))  # (N, ..., C, E)
        b = beta[..., start:start + chunk_size, None]                                  # (N, ..., C, 1)
        decay = g[..., start:start + chunk_size].cumsum(dim=-1)          # log of the decay from the chunk's start
        C = q.shape[-2]
        below = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()             # j <= i
        between = (decay.unsqueeze(-1) - decay.unsqueeze(-2)).masked_fill(~below, -math.inf).exp()  # (C, C): i after j
        # (I + A) u = β (v - decayed Sᵀ k), A[i, j] = β_i (k_i · k_j) decay(j -> i) for j < i
        system = (b * (k @ k.transpose(-2, -1)) * between).tril(-1) + torch.eye(C, dtype=q.dtype, device=q.device)
        start_read = decay.exp().unsqueeze(-1) * (k @ state)                           # (C, Dk) @ (Dk, Dv) -> (C, Dv)
        u = torch.linalg.solve_triangular(system, b * (v - start_read), upper=False, unitriangular=True)
        attend = (q @ k.transpose(-2, -1)) * between                                   # (C, C), masked by the decay
        outputs.append(decay.exp().unsqueeze(-1) * (q @ state) + attend @ u)           # (C, Dv)
        to_end = (decay[..., -1:] - decay).exp().unsqueeze(-1)                         # decay from token to chunk end
        state = decay[..., -1, None, None].exp() * state + (k * to_end).transpose(-2, -1) @ u   # (Dk, C) @ (C, Dv)
    output = torch.cat(outputs, dim=-2) if outputs else value.new_zeros(value.shape)
    return output, state
