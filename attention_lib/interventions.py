"""Interventions: run a model with one head's attention weights replaced, to test what its map only suggests.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``; ``notebooks/13_induction_heads.ipynb`` ablates
heads with it. An attention map says where a head looks; it does not say that the model's answer depends on it
(Jain & Wallace, 2019, *Attention is not Explanation*). To find out, change the head and measure what changes,
as activation patching does in interpretability practice (e.g. Meng et al., 2022; Wang et al., 2023, ARENA's
and TransformerLens's exercises): :func:`edit_head` recomputes a :class:`~attention_lib.MultiHeadAttention`'s
weights with the recipe's own steps, hands one head's ``(N, L, S)`` weights to a function of yours, and blends
the values with what it returns. Three such functions are here:

- :func:`force_onto`: a row's whole weight on one key (the head "looks exactly there");
- :func:`remove_keys`: a row's weight on some keys taken away and the rest renormalised ("never looks there");
- :func:`zero_rows`: a row (or every row) set to zero, so the head writes nothing there (zero ablation).

:func:`patch_head` replaces a head's *output* instead, with one :func:`record_head` took on another input.

Shape legend, as everywhere in the package: ``N`` sentences, ``H`` heads, ``L`` queries, ``S`` keys; one head's
weights are ``(N, L, S)``, row = the query attending.
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

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. A forward hook on ``attention`` recomputes
    every call with the recipe's steps (:func:`~attention_lib.split_heads`, the matchmaker, the scaler, the
    percentages with the call's mask, the blend, :func:`~attention_lib.merge_heads`, ``out_proj``), with the
    chosen head's ``(N, L, S)`` weights passed through ``edit`` before the blend; the other heads are unchanged.
    The module returns ``(output, weights)`` as always, the weights as edited. On leaving the block the hook is
    removed, also after an error.

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



@contextmanager
def record_head(attention: MultiHeadAttention, head: int) -> Iterator[list[torch.Tensor]]:
    """Inside the block, append head ``head``'s output ``(N, L, Dh)`` (``weights @ values``, before ``out_proj``)
    to the list it yields, at each call of ``attention``: what :func:`patch_head` writes into another run."""
    records: list[torch.Tensor] = []

    def keep(outputs):  # (N, H, L, Dh)
        records.append(outputs[:, head].detach().clone())
        return outputs

    with _hooked(attention, head, lambda w: w, keep):
        yield records


@contextmanager
def patch_head(attention: MultiHeadAttention, head: int, output: torch.Tensor, rows=None) -> Iterator[None]:
    """Inside the ``with`` block, replace head ``head``'s output at ``rows`` by ``output``: activation patching.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. Where :func:`edit_head` changes where a head
    looks, this changes what it writes: its blend of the values, before ``out_proj``, taken from ``output``,
    usually recorded by :func:`record_head` on another input of the same shape (a "clean" sentence).

    Args:
        attention: a :class:`~attention_lib.MultiHeadAttention`, in eval mode or without dropout.
        head: the head whose output is replaced; ``output``: ``(N, L, Dh)``, what it writes instead.
        rows: one query position per sentence (an int or ``(N,)`` ints), or ``None`` for every row.

    Raises:
        TypeError: if ``attention`` is not a ``MultiHeadAttention`` or ``output`` is not a tensor.
        ValueError: if the head is out of range, or (while running) ``output`` is not of the head's shape.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(embed_dim=4, num_heads=2).eval()
        >>> x, clean = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
        >>> with torch.no_grad(), record_head(mha, 0) as recorded:
        ...     _ = mha(clean, clean, clean)
        >>> recorded[0].shape  # (N, L, Dh)
        torch.Size([1, 3, 2])
        >>> with torch.no_grad(), patch_head(mha, 0, recorded[0], rows=2):
        ...     out, _ = mha(x, x, x)
        >>> torch.equal(out[:, :2], mha(x, x, x)[0][:, :2].detach())  # rows 0 and 1 as they were
        True
    """
    check_is_tensor(output, "output")

    def replace(outputs):  # (N, H, L, Dh)
        if output.shape != outputs[:, head].shape:
            raise ValueError(f"output must have the head's output shape (N, L, Dh) = {tuple(outputs[:, head].shape)}"
                             f", but output.shape={tuple(output.shape)}; record it with record_head on an input of "
                             f"the same shape.")
        patched = outputs.clone()
        patched[:, head] = torch.where(_rows(outputs[:, head], rows), output.to(outputs.dtype), outputs[:, head])
        return patched

    with _hooked(attention, head, lambda w: w, replace):
        yield
