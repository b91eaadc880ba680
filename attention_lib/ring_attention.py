"""Ring attention: the sequence split over processes, keys and values passed round a ring, exact attention.

Built step by step in ``notebooks/16_ring_attention.ipynb``. Each of ``P`` processes (ranks) holds the
queries, keys and values of ``n / P`` positions; the key/value chunks travel round the ring, ``P - 1`` hops,
and each rank folds each chunk into its queries with lesson 10's :func:`~attention_lib.online_softmax_update`.
No rank holds more than two key/value chunks besides its own and one ``(n/P) x (n/P)`` block of scores per
head (Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers for Near-Infinite Context").

Two layouts say which positions a rank holds (:func:`chunk_positions`): ``"contiguous"`` (rank ``r`` holds
chunk ``r``) and ``"zigzag"`` (the sequence cut into ``2P`` chunks; rank ``r`` holds chunks ``r`` and
``2P - 1 - r``), which gives every rank the same causal work when the ring computes only the half-blocks
needed (:func:`block_to_compute`; Brandon et al. 2023 stripe positions for the same reason; Llama 3 splits in
``2P`` chunks like this). Lengths that do not divide are **refused** with a ValueError, not padded.
"""

from __future__ import annotations

import math

import torch

from .distributed import _pack, _unpack, _world_and_rank, pass_round
from .memory_efficient import online_softmax_update
from .ring_layout import (  # noqa: F401 - the layout's functions, also reachable from here
    LAYOUTS,
    block_to_compute,
    check_layout,
    check_split,
    chunk_positions,
    chunks_per_rank,
    computed_scores,
    ring_block_mask,
    shard,
    useful_scores,
    useful_scores_formula,
)
from .validation import check_bool, check_qkv


def ring_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False, *,
                   layout: str = "contiguous", scale: float | None = None, group=None) -> torch.Tensor:
    """Exact attention over a sequence split across the processes of ``group``: this rank's output chunk.

    Built step by step in ``notebooks/16_ring_attention.ipynb``. Every rank calls it with its own chunk (see
    :func:`shard`); the result and the gradients equal the rows of SDPA on the whole sequence that this rank
    holds (the backward pass walks the ring again, dK and dV travelling home). Alone: a ring of one.

    Args:
        query: ``(N, ..., C, E)``, the queries of this rank's ``C = n / world`` positions.
        key: ``(N, ..., C, E)``, the keys of the same positions.
        value: ``(N, ..., C, Ev)``.
        is_causal: global position ``i`` may attend to positions ``0..i`` (masks built from global positions).
        layout: ``"contiguous"`` or ``"zigzag"``, as in :func:`chunk_positions`.
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.
        group: the ``torch.distributed`` process group (default: the whole world).

    Returns:
        This rank's output ``(N, ..., C, Ev)``.

    Raises:
        TypeError: if an input is not a floating-point tensor, dtypes differ, ``is_causal`` is not a bool, or
            ``layout`` is not a string.
        ValueError: if shapes do not fit (query, key and value must share ``C`` and the batch shape), devices
            differ, the layout is unknown, ``C`` is odd with ``"zigzag"``, or ranks hold different ``C``
            (compared across the ranks before the first hop).

    Example:
        >>> import torch.nn.functional as F
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 1, 2, 6, 4, dtype=torch.float64)
        >>> out = ring_attention(q, k, v, is_causal=True)  # no process group: a ring of one
        >>> torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        True
    """
    check_qkv(query, key, value)
    if not (query.shape[:-1] == key.shape[:-1] == value.shape[:-1]):
        raise ValueError(f"ring attention is self-attention over one sequence: query, key and value must share the "
                         f"batch shape and the chunk length C, but query.shape={tuple(query.shape)}, "
                         f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}; give every rank the "
                         f"same positions of all three (shard(x, world, rank, layout)).")
    is_causal = check_bool(is_causal, "is_causal")
    world, rank = _world_and_rank(group)
    C = query.shape[-2]
    if world > 1:
        _check_same_length(C, world, rank, group)
    if chunks_per_rank(layout) == 2 and C % 2:
        raise ValueError(f"the zigzag layout holds two equal chunks per rank, so the local length C must be even, "
                         f"but found C={C}; use a sequence length that is a multiple of 2·world={2 * world}.")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    positions = [chunk_positions(C * world, world, r, layout).to(query.device) for r in range(world)]
    return _RingAttention.apply(query, key, value, is_causal, scale, positions, rank, group)


def _check_same_length(C: int, world: int, rank: int, group) -> None:
    """Every rank must hold as many positions: compared across the ranks (one small all-gather) before any hop,
    so that every rank raises the same ValueError instead of one rank's transfer failing."""
    import torch.distributed as dist

    lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(lengths, torch.tensor([C]), group=group)
    held = [int(x) for x in lengths]
    if len(set(held)) > 1:
        said = ", ".join(f"rank {r} holds {c}" for r, c in enumerate(held))
        raise ValueError(f"every rank of the ring must hold as many positions, but {said} (this is rank {rank}); "
                         f"cut the sequence with shard(x, world, rank, layout), which gives each rank n / world.")


def ring_forward(query, key, value, is_causal, scale, positions, rank, group=None, *, update=online_softmax_update,
                 hops=None, block_mask=ring_block_mask):
    """The forward walk: ``(output, running_max, running_sum)``. ``update``, ``hops`` and ``block_mask`` are the
    three parts lesson 16's bug gallery swaps (a fold that does not rescale, a hop skipped, local positions).

    Example:
        >>> q = k = v = torch.randn(1, 4, 2, dtype=torch.float64)  # a ring of one: positions of rank 0 only
        >>> out, row_max, row_sum = ring_forward(q, k, v, False, 1.0, [torch.arange(4)], rank=0)
        >>> torch.allclose(out, torch.softmax(q @ k.mT, dim=-1) @ v)
        True
    """
    world = len(positions)
    hops = world if hops is None else hops
    state = (query.new_full((*query.shape[:-1], 1), -math.inf), query.new_zeros(*query.shape[:-1], 1),
             query.new_zeros(*value.shape))
    k, v, flat = key, value, None
    for hop in range(hops):
        source = (rank - hop) % world  # whose chunk arrived at this hop
        if hop < world - 1:  # start passing it on before computing with it: the transfer overlaps the work
            flat = _pack(key, value) if flat is None else flat  # a chunk that arrived goes on as it came
            incoming, wait = pass_round(flat, group)
        part = block_to_compute(block_mask(positions[rank], positions[source]) if is_causal else None)
        if part is not None:  # a chunk entirely in the future is skipped; of the others, only the part needed
            rows, cols, mask = part
            scores = (query[..., rows, :] @ k[..., cols, :].transpose(-2, -1)) * scale  # (.., Cq, E) @ (.., E, Ck)
            if mask is not None:
                scores = scores.masked_fill(~mask, -math.inf)
            folded = update(*(s[..., rows, :] for s in state), scores, v[..., cols, :])  # those queries' state
            for s, new in zip(state, folded, strict=True):
                s[..., rows, :] = new
        if hop < world - 1:
            wait()
            flat = incoming
            k, v = _unpack(flat, key, value)
    running_max, running_sum, running_output = state
    return running_output / running_sum, running_max, running_sum


class _RingAttention(torch.autograd.Function):
    """The ring forward, saving the output and each query's max and sum; the backward walks the ring again."""

    @staticmethod
    def forward(ctx, query, key, value, is_causal, scale, positions, rank, group):
        output, row_max, row_sum = ring_forward(query, key, value, is_causal, scale, positions, rank, group)
        ctx.save_for_backward(query, key, value, output, row_max, row_sum)
        ctx.options = is_causal, scale, positions, rank, group
        return output

    @staticmethod
    def backward(ctx, grad_output):
        query, key, value, output, row_max, row_sum = ctx.saved_tensors
        grads = ring_backward(grad_output, query, key, value, output, row_max, row_sum, *ctx.options)
        return (*grads, None, None, None, None, None)


def ring_backward(grad_output, query, key, value, output, row_max, row_sum, is_causal, scale, positions, rank,
                  group=None):
    """``(dQ, dK, dV)`` of this rank's chunk. Each hop rebuilds the weights ``exp(s - m) / l`` of the chunk it
    holds (lesson 10's backward), adds to dQ here and to that chunk's dK and dV, which travel on with it; after
    the last hop, dK and dV make one more hop, home. Unlike the forward pass, each hop computes first and then
    passes the chunk on (its dK and dV are not finished before), so the transfer does not overlap the work."""
    world = len(positions)
    grad_output = grad_output.contiguous()
    row_term = (grad_output * output).sum(dim=-1, keepdim=True)  # D = rowsum(dO * O): (N, ..., C, 1)
    grad_query = torch.zeros_like(query)
    k, v, dk, dv = key, value, torch.zeros_like(key), torch.zeros_like(value)
    for hop in range(world):
        source = (rank - hop) % world
        part = block_to_compute(ring_block_mask(positions[rank], positions[source]) if is_causal else None)
        if part is not None:  # the same parts as the forward pass
            rows, cols, mask = part
            q, do, kc = query[..., rows, :], grad_output[..., rows, :], k[..., cols, :]
            scores = (q @ kc.transpose(-2, -1)) * scale  # (N, ..., Cq, E) @ (N, ..., E, Ck) -> (N, ..., Cq, Ck)
            if mask is not None:
                scores = scores.masked_fill(~mask, -math.inf)
            weights = torch.exp(scores - row_max[..., rows, :]) / row_sum[..., rows, :]  # W, rebuilt: (.., Cq, Ck)
            grad_scores = weights * (do @ v[..., cols, :].transpose(-2, -1) - row_term[..., rows, :])  # W * (dW - D)
            dv[..., cols, :] += weights.transpose(-2, -1) @ do  # (Ck, Cq) @ (Cq, Ev) -> (Ck, Ev)
            grad_query[..., rows, :] += scale * grad_scores @ kc  # (Cq, Ck) @ (Ck, E) -> (Cq, E)
            dk[..., cols, :] += scale * grad_scores.transpose(-2, -1) @ q  # (Ck, Cq) @ (Cq, E) -> (Ck, E)
        if world > 1:  # pass the chunk on with its gradients; after the last hop only dK and dV, going home
            last = hop == world - 1
            incoming, wait = pass_round(_pack(dk, dv) if last else _pack(k, v, dk, dv), group)
            wait()
            if last:
                dk, dv = _unpack(incoming, key, value)
            else:
                k, v, dk, dv = _unpack(incoming, key, value, key, value)
    return grad_query, dk, dv
