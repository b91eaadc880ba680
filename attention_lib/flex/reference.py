"""The recipe with two hooks: FlexAttention computed the course's way, every score in one table.

``flex_attention(query, key, value, score_mod, block_mask)`` is lesson 06's recipe with a ``score_mod`` run on
each scaled score and a ``mask_mod`` in place of the mask tensor. :func:`flex_reference` is that recipe built from
the package's own steps (the matchmaker, the scaler, the percentages, the blend), with the two rules evaluated on
a grid of positions (:func:`index_grid`): what a compiled FlexAttention kernel computes, without the blocks it
skips. Built step by step in ``notebooks/20_flex_attention.ipynb``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import blend, matchmaker, percentages, scaler
from ..validation import check_int, check_qkv


def index_grid(B: int, H: int, L: int, S: int, device=None) -> tuple[torch.Tensor, ...]:
    """The four positions a rule is asked about, as tensors that broadcast to ``(B, H, L, S)``.

    Built step by step in ``notebooks/20_flex_attention.ipynb``: ``b`` is ``(B, 1, 1, 1)``, ``h`` ``(1, H, 1, 1)``,
    ``q_idx`` ``(1, 1, L, 1)`` and ``kv_idx`` ``(1, 1, 1, S)``, so that a rule written with tensor operations is
    evaluated at every ``(b, h, q_idx, kv_idx)`` at once.

    Raises:
        TypeError, ValueError: if a size is not a non-negative int.

    Example:
        >>> b, h, q_idx, kv_idx = index_grid(1, 2, 3, 4)
        >>> [tuple(t.shape) for t in (b, h, q_idx, kv_idx)]
        [(1, 1, 1, 1), (1, 2, 1, 1), (1, 1, 3, 1), (1, 1, 1, 4)]
        >>> (q_idx >= kv_idx).shape  # the causal rule, evaluated everywhere
        torch.Size([1, 1, 3, 4])
    """
    sizes = [check_int(n, name, minimum=0, fix="pass the sizes B, H, L, S of the scores (batch, heads, queries, "
                       "keys).") for n, name in zip((B, H, L, S), "BHLS", strict=True)]
    shapes = ((-1, 1, 1, 1), (1, -1, 1, 1), (1, 1, -1, 1), (1, 1, 1, -1))
    return tuple(torch.arange(n, device=device).view(shape) for n, shape in zip(sizes, shapes, strict=True))


def dense_mask(mask_mod: Callable, B: int, H: int, L: int, S: int, device=None) -> torch.Tensor:
    """A rule turned into its mask tensor ``(B, H, L, S)``, ``True`` = **may attend**, by evaluating it on the grid.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. The same tensor as FlexAttention's
    ``create_mask(mask_mod, B, H, L, S)`` (which evaluates the rule with ``torch.vmap``); ``tests/`` checks both.

    Raises:
        TypeError: if ``mask_mod`` is not callable, or returns something other than a bool tensor.
        ValueError: if its result does not broadcast to ``(B, H, L, S)``.

    Example:
        >>> dense_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, 1, 1, 2, 3).int()
        tensor([[[[1, 0, 0],
                  [1, 1, 0]]]], dtype=torch.int32)
    """
    _check_rule(mask_mod, "mask_mod", "(b, h, q_idx, kv_idx) -> bool tensor, True = may attend")
    grid = index_grid(B, H, L, S, device=device)
    allowed = mask_mod(*grid)
    if not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool:
        found = allowed.dtype if isinstance(allowed, torch.Tensor) else type(allowed).__name__
        raise TypeError(f"mask_mod must return a bool tensor (True = may attend), but it returned {found}; build it "
                        f"from comparisons such as q_idx >= kv_idx, combined with & and |.")
    return _broadcast(allowed, (B, H, L, S), "mask_mod")


def flex_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, score_mod: Callable | None = None,
                   mask_mod: Callable | None = None, scale: float | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """FlexAttention in the course's steps: scores, scaler, ``score_mod``, mask from ``mask_mod``, percentages, blend.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. What
    ``torch.nn.attention.flex_attention.flex_attention(query, key, value, score_mod, block_mask)`` computes, where
    ``block_mask = create_block_mask(mask_mod, ...)``, every score in one table: the reference its compiled kernel
    is checked against. A query whose every key is blocked gets zeros (weights and output), as in FlexAttention.

    Args:
        query: ``(B, H, L, E)``.
        key: ``(B, H, S, E)``.
        value: ``(B, H, S, Ev)``.
        score_mod: ``None``, or ``(score, b, h, q_idx, kv_idx) -> score``, run on every scaled score.
        mask_mod: ``None``, or ``(b, h, q_idx, kv_idx) -> bool``, ``True`` = **may attend**
            (``nn.MultiheadAttention`` uses ``True`` = blocked).
        scale: multiplies the scores; defaults to ``1 / sqrt(E)``.

    Returns:
        ``(output, weights)``: ``(B, H, L, Ev)`` and ``(B, H, L, S)``.

    Raises:
        TypeError: if an input is not a floating-point tensor, a rule is not callable, ``mask_mod`` returns no bool
            tensor or ``score_mod`` no floating-point tensor.
        ValueError: if the inputs are not 4-D ``(B, H, positions, features)`` with matching sizes, or a rule's result
            does not broadcast to ``(B, H, L, S)``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 1, 2, 4, 8).unbind(0)
        >>> out, weights = flex_reference(q, k, v, mask_mod=lambda b, h, q_idx, kv_idx: q_idx >= kv_idx)
        >>> F = torch.nn.functional
        >>> torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6)
        True
    """
    check_qkv(query, key, value)
    if not (query.dim() == key.dim() == value.dim() == 4 and query.shape[:2] == key.shape[:2] == value.shape[:2]):
        raise ValueError(f"FlexAttention's inputs are (B, H, positions, features), with the same B and H, but "
                         f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)} and value.shape="
                         f"{tuple(value.shape)}; add the missing dimensions with .unsqueeze(0) (batch) or "
                         f".unsqueeze(1) (heads).")
    _check_rule(score_mod, "score_mod", "(score, b, h, q_idx, kv_idx) -> score", optional=True)
    _check_rule(mask_mod, "mask_mod", "(b, h, q_idx, kv_idx) -> bool tensor, True = may attend", optional=True)
    B, H, L, S = query.size(0), query.size(1), query.size(2), key.size(2)
    b, h, q_idx, kv_idx = index_grid(B, H, L, S, device=query.device)
    # 2. The matchmaker: (B, H, L, E) @ (B, H, E, S) -> (B, H, L, S); 3. the scaler.
    scores = scaler(matchmaker(query, key), query.size(-1), scale=scale)
    # Hook 1, score_mod: every scaled score, told where it sits.
    if score_mod is not None:
        scores = _scores_from(score_mod(scores, b, h, q_idx, kv_idx), scores)
    # Hook 2, mask_mod: the rule, evaluated at every position, is the mask (True = may attend).
    mask = None if mask_mod is None else dense_mask(mask_mod, B, H, L, S, device=query.device)
    # 4. The percentages (a row without any key gets zeros); 5. the blend.
    weights = percentages(scores, mask)  # (B, H, L, S)
    return blend(weights, value), weights  # (B, H, L, S) @ (B, H, S, Ev) -> (B, H, L, Ev)


def _check_rule(rule, name: str, signature: str, optional: bool = False) -> None:
    if rule is None and optional:
        return
    if not callable(rule):
        raise TypeError(f"{name} must be a function {signature}, but got {type(rule).__name__}; pass the function "
                        f"itself (mask_mod=causal_mod), not its result.")


def _scores_from(new: object, scores: torch.Tensor) -> torch.Tensor:
    if not isinstance(new, torch.Tensor) or not new.is_floating_point():
        found = new.dtype if isinstance(new, torch.Tensor) else type(new).__name__
        raise TypeError(f"score_mod must return the new scores as a floating-point tensor, but it returned {found}; "
                        f"start from score, e.g. return score + bias.")
    return _broadcast(new, tuple(scores.shape), "score_mod").to(scores.dtype)


def _broadcast(x: torch.Tensor, shape: tuple[int, ...], name: str) -> torch.Tensor:
    try:
        return x.expand(shape)
    except RuntimeError:
        raise ValueError(f"{name} returned a tensor of shape {tuple(x.shape)}, which does not broadcast to the scores "
                         f"(B, H, L, S) = {shape}; index with the positions it is given (b, h, q_idx, kv_idx), not "
                         f"with a fixed range.") from None
