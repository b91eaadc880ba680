"""Interventions: run a model with one head's attention weights replaced, to test what its map only suggests.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``; ``notebooks/13_induction_heads.ipynb`` ablates
heads with it. A map says where a head looks, not that the answer depends on it (Jain & Wallace, 2019, *Attention
is not Explanation*); so change the head and measure, as activation patching does (Meng et al., 2022; Wang et al.,
2023). :func:`edit_head` reruns a :class:`~attention_lib.MultiHeadAttention` with the recipe's steps and one
head's ``(N, L, S)`` weights passed through a function of yours: :func:`force_onto` (a row's whole weight on one
key), :func:`remove_keys` (a row's weight off some keys, renormalised), :func:`remove_weight` (a given amount off
some keys: the placebo beside a removal), :func:`zero_rows` (zero ablation). :func:`patch_head` replaces a head's
*output* with one :func:`record_head` took on another input, or on a donor (:func:`pick_donors`,
:func:`from_donors`), all in :mod:`attention_lib.patching`, which builds on this module. Each tells something else:
a patched output is sufficiency (an upper bound), a removal is a cause only beside its placebo, a forcing beside a
control position.
Run the other way (a correct input given the head's output from a failing one: noising), patching says how much
of an error runs through the head. Shapes: ``N`` inputs, ``H`` heads, ``L`` queries, ``S`` keys.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

from .attention import blend, matchmaker, percentages, scaler
from .masks import causal_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .validation import check_index, check_is_tensor

_EDITED: weakref.WeakSet = weakref.WeakSet()  # the modules with an edit in place: one at a time each


def _rows(weights: torch.Tensor, rows) -> torch.Tensor:
    """``(N, L, 1)`` bool: the rows to change (``rows``: ``None`` = every row, or one query position per sentence)."""
    N, L, _ = weights.shape
    if rows is None:
        return torch.ones(N, L, 1, dtype=torch.bool, device=weights.device)
    rows = torch.as_tensor(rows, device=weights.device)
    if rows.is_floating_point() or rows.dtype == torch.bool or rows.dim() > 1 or (
            rows.dim() == 1 and rows.numel() not in (1, N)) or bool(((rows < 0) | (rows >= L)).any()):
        raise ValueError(f"rows must be None (every row) or one query position in 0..{L - 1} per sentence, an int or "
                         f"({N},) ints, but got {rows if rows.numel() <= 8 else tuple(rows.shape)}.")
    return (torch.arange(L, device=weights.device) == rows.reshape(-1, 1)).expand(N, L)[..., None]


def _check_weights(weights) -> None:
    check_is_tensor(weights, "weights")
    if weights.dim() != 3:
        raise ValueError(f"an edit gets one head's weights (N, L, S), but weights.shape={tuple(weights.shape)}; "
                         f"for all heads (N, H, L, S) take weights[:, h].")


def force_onto(weights: torch.Tensor, rows, keys) -> torch.Tensor:
    """Put each chosen row's whole weight on one key: the row becomes 1 there and 0 elsewhere.

    Args:
        weights: ``(N, L, S)``, one head's attention weights.
        rows: one query position per sentence (an int or ``(N,)`` ints), or ``None`` for every row.
        keys: the key each sentence's rows look at: an int or ``(N,)`` ints in ``0..S-1``.

    Returns:
        A new ``(N, L, S)`` tensor; the other rows as they were.

    Example:
        >>> w = torch.full((1, 2, 4), 0.25)
        >>> force_onto(w, rows=1, keys=2)
        tensor([[[0.2500, 0.2500, 0.2500, 0.2500],
                 [0.0000, 0.0000, 1.0000, 0.0000]]])
    """
    _check_weights(weights)
    N, _, S = weights.shape
    keys = torch.as_tensor(keys, device=weights.device)
    if keys.is_floating_point() or keys.dtype == torch.bool or keys.dim() > 1 or (
            keys.dim() == 1 and keys.numel() not in (1, N)) or bool(((keys < 0) | (keys >= S)).any()):
        raise ValueError(f"keys must be one key position in 0..{S - 1} per sentence, an int or ({N},) ints, but got "
                         f"{keys if keys.numel() <= 8 else tuple(keys.shape)}.")
    one_hot = (torch.arange(S, device=weights.device) == keys.reshape(-1, 1)).to(weights.dtype)  # (N or 1, S)
    return torch.where(_rows(weights, rows), one_hot[:, None, :], weights)


def remove_keys(weights: torch.Tensor, rows, keys: torch.Tensor) -> torch.Tensor:
    """Take the chosen rows' weight off some keys and share the rest out again (renormalise to sum 1).

    A row left with no weight at all (every key it used removed) becomes zeros.

    Args:
        weights: ``(N, L, S)``, one head's attention weights.
        rows: one query position per sentence (an int or ``(N,)`` ints), or ``None`` for every row.
        keys: ``(N, S)`` or ``(S,)`` bool, ``True`` on the keys to remove.

    Returns:
        A new ``(N, L, S)`` tensor; the other rows as they were.

    Example:
        >>> w = torch.tensor([[[0.5, 0.25, 0.25]]])
        >>> remove_keys(w, rows=0, keys=torch.tensor([True, False, False]))
        tensor([[[0.0000, 0.5000, 0.5000]]])
    """
    _check_weights(weights)
    N, _, S = weights.shape
    if not isinstance(keys, torch.Tensor) or keys.dtype != torch.bool or keys.shape not in ((N, S), (S,)):
        found = f"{keys.dtype} {tuple(keys.shape)}" if isinstance(keys, torch.Tensor) else type(keys).__name__
        raise ValueError(f"keys must be a bool tensor of shape ({N}, {S}) or ({S},), True on the keys to remove, but "
                         f"got {found}.")
    kept = weights.masked_fill(keys.reshape(-1, 1, S), 0.0)  # (N, L, S)
    total = kept.sum(-1, keepdim=True)
    renormalised = torch.where(total > 0, kept / total.clamp_min(torch.finfo(weights.dtype).tiny), 0.0)
    return torch.where(_rows(weights, rows), renormalised, weights)


def remove_weight(weights: torch.Tensor, rows, keys: torch.Tensor, amount) -> torch.Tensor:
    """Take ``amount`` of each chosen row's weight off ``keys`` (each key losing its share), then renormalise.

    The placebo beside :func:`remove_keys`: the same weight taken from keys that cannot matter changes the rows as
    much in total, so what the real removal does beyond it is due to *which* keys lost the weight. A row whose
    ``keys`` hold less than ``amount`` loses all they hold.

    Args:
        weights: ``(N, L, S)``; rows: as for :func:`remove_keys`; keys: ``(N, S)`` or ``(S,)`` bool.
        amount: a number or ``(N,)`` numbers in ``[0, 1)``, the weight to take off each sentence's rows.

    Example:
        >>> w = torch.tensor([[[0.5, 0.25, 0.25]]])
        >>> remove_weight(w, rows=0, keys=torch.tensor([False, True, True]), amount=0.25)
        tensor([[[0.6667, 0.1667, 0.1667]]])
    """
    remove_keys(weights, rows, keys)  # checks the arguments
    amount = torch.as_tensor(amount, dtype=weights.dtype, device=weights.device)
    if amount.dim() > 1 or (amount.dim() == 1 and amount.numel() not in (1, weights.shape[0])) or bool(
            ((amount < 0) | (amount >= 1)).any()):
        raise ValueError(f"amount must be a number or ({weights.shape[0]},) numbers in [0, 1), but got {amount}.")
    on_keys = (weights * keys.reshape(-1, 1, weights.shape[-1])).sum(-1, keepdim=True)  # (N, L, 1)
    keep = 1 - (amount.reshape(-1, 1, 1) / on_keys.clamp_min(torch.finfo(weights.dtype).tiny)).clamp(max=1)
    scaled = torch.where(keys.reshape(-1, 1, weights.shape[-1]), weights * keep, weights)
    total = scaled.sum(-1, keepdim=True)
    return torch.where(_rows(weights, rows) & (total > 0), scaled / total.clamp_min(torch.finfo(weights.dtype).tiny),
                       torch.where(_rows(weights, rows), 0.0, weights))


def zero_rows(weights: torch.Tensor, rows=None) -> torch.Tensor:
    """Set the chosen rows to zero: the head then writes nothing at those queries (zero ablation).

    Args:
        weights: ``(N, L, S)``, one head's attention weights.
        rows: one query position per sentence (an int or ``(N,)`` ints), or ``None`` (the default) for every row.

    Example:
        >>> zero_rows(torch.full((1, 2, 2), 0.5), rows=0)
        tensor([[[0.0000, 0.0000],
                 [0.5000, 0.5000]]])
    """
    _check_weights(weights)
    return weights.masked_fill(_rows(weights, rows), 0.0)


def _edited_attention(module: MultiHeadAttention, heads: Sequence[int], edit, query, key, value, attn_mask,
                      is_causal, need_weights, patch=None):
    """The module's forward written out with the recipe's steps, one head's weights passed through ``edit``."""
    H, Dh = module.num_heads, module.head_dim
    # (N, L, E) -> (N, H, L, Dh); keys and values (N, S, E) -> (N, H, S, Dh)
    q, k, v = (split_heads(proj(x), H) for proj, x in ((module.q_proj, query), (module.k_proj, key),
                                                          (module.v_proj, value)))
    if is_causal:
        attn_mask = causal_mask(q.size(-2), k.size(-2), device=q.device)  # True = may attend
    if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() == 2:
        attn_mask = attn_mask[None, None]  # (L, S) -> (1, 1, L, S)
    scores = scaler(matchmaker(q, k), Dh)  # (N, H, L, Dh) @ (N, H, Dh, S) -> (N, H, L, S), / sqrt(Dh)
    weights = percentages(scores, attn_mask)  # (N, H, L, S)
    per_head = list(weights.unbind(1))  # H of (N, L, S)
    for h in heads:
        edited = edit(per_head[h])
        if not isinstance(edited, torch.Tensor) or edited.shape != per_head[h].shape:
            found = tuple(edited.shape) if isinstance(edited, torch.Tensor) else type(edited).__name__
            raise ValueError(f"edit must return one head's weights of shape {tuple(per_head[h].shape)}, the shape it "
                             f"was given, but returned {found}.")
        per_head[h] = edited.to(weights.dtype)
    weights = torch.stack(per_head, 1)  # (N, H, L, S)
    outputs = blend(weights, v)  # (N, H, L, S) @ (N, H, S, Dh) -> (N, H, L, Dh)
    if patch is not None:
        outputs = patch(outputs)  # (N, H, L, Dh), one head's output replaced or recorded
    mixed = module.out_proj(merge_heads(outputs))  # (N, H, L, Dh) -> (N, L, E)
    return mixed, (weights if need_weights else None)


@contextmanager
def edit_head(attention: MultiHeadAttention, head: int | Sequence[int],
              edit: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """Inside the ``with`` block, run ``attention`` with head ``head``'s weights replaced by ``edit(weights)``.

    A forward hook recomputes every call with the recipe's steps (split, matchmaker, scaler, percentages with the
    call's mask, blend, merge, ``out_proj``), the chosen head's ``(N, L, S)`` weights passed through ``edit``
    before the blend. The module returns ``(output, weights)``, the weights as edited; the hook goes on leaving.

    Args:
        attention: a :class:`~attention_lib.MultiHeadAttention` anywhere in a model (e.g.
            ``model.blocks[1].attention``), in eval mode or without dropout.
        head: the head to edit, or several (each gets the same ``edit``).
        edit: a function of one head's weights ``(N, L, S) -> (N, L, S)``, e.g.
            ``lambda w: force_onto(w, rows=verb, keys=subject)``; :func:`zero_rows` zeroes the head.

    Raises:
        TypeError: if ``attention`` is not a ``MultiHeadAttention`` or ``edit`` is not callable.
        ValueError: if a head is out of range, the module is already being edited, it has dropout in training
            mode, or (while running) ``edit`` returns another shape.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(embed_dim=4, num_heads=2).eval()
        >>> x = torch.randn(1, 3, 4)
        >>> with torch.no_grad(), edit_head(mha, 0, lambda w: force_onto(w, rows=None, keys=2)):
        ...     out, weights = mha(x, x, x)
        >>> weights[0, 0]  # head 0: every query on key 2
        tensor([[0., 0., 1.],
                [0., 0., 1.],
                [0., 0., 1.]])
        >>> torch.equal(weights[0, 1], mha(x, x, x)[1][0, 1].detach())  # head 1 as it was
        True
    """
    if not callable(edit):
        raise TypeError(f"edit must be a function of one head's weights (N, L, S), but got {type(edit).__name__}.")
    with _hooked(attention, head, edit):
        yield


@contextmanager
def _hooked(attention, head, edit, patch=None) -> Iterator[list[int]]:
    """Run ``attention`` through :func:`_edited_attention` inside the block; yields the heads, checked."""
    if not isinstance(attention, MultiHeadAttention):
        raise TypeError(f"an intervention edits a MultiHeadAttention, but got {type(attention).__name__}; pass the "
                        f"attention module itself, e.g. model.blocks[0].attention or model.layers[0].")
    heads = [head] if isinstance(head, int) else list(head)
    for h in heads:
        check_index(h, "head", attention.num_heads)
    if attention in _EDITED:
        raise ValueError("this module is already being edited; edit several heads of one module in one call, "
                         "edit_head(module, [0, 1], edit), instead of nesting two.")
    if attention.training and attention.dropout > 0:
        raise ValueError(f"the module drops weights in training mode (dropout={attention.dropout}): call "
                         f"model.eval() before an intervention, so that only your edit changes the weights.")
    signature = inspect.signature(attention.forward)

    def hook(module, args, kwargs, _output):
        H = module.num_heads
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        call = bound.arguments
        if call.get("cache") is not None or getattr(module, "rotary", None) is not None or getattr(
                module, "window", None) is not None or getattr(module, "num_kv_heads", module.num_heads) != H:
            raise ValueError("edit_head works on plain multi-head attention: no cache, rotary positions, sliding "
                             "window or grouped key/value heads.")
        return _edited_attention(module, heads, edit, call["query"], call["key"], call["value"], call["attn_mask"],
                                 call["is_causal"], call["need_weights"], patch)

    handle = attention.register_forward_hook(hook, with_kwargs=True)
    _EDITED.add(attention)
    try:
        yield heads
    finally:
        handle.remove()
        _EDITED.discard(attention)
