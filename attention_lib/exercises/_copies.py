"""The learner's function gets copies of the caller's tensors, laid out as they were; a copy that comes back with
other numbers, another shape or other strides was changed in place.

Example:
    >>> x = torch.ones(3, 2).T  # a transposed view
    >>> copies, layouts = copies_of((x,))
    >>> copies[0].stride() == x.stride(), changed_inputs((x,), copies, layouts)
    (True, [])
    >>> _ = copies[0].t_()
    >>> changed_inputs((x,), copies, layouts)
    [0]
"""

from __future__ import annotations

import torch


def _copy(x):
    """A copy of ``x`` laid out as ``x`` is: the same strides (a transposed, sliced or broadcast view stays one)."""
    if isinstance(x, torch.Tensor):
        if x.is_contiguous() or x.is_meta or x.layout != torch.strided:
            return x.clone()
        if 0 in x.stride():  # a broadcast view: copy the numbers once, then broadcast the copy
            one = x[tuple(slice(0, 1) if s == 0 and n > 1 else slice(None) for s, n in zip(x.stride(), x.shape,
                                                                                             strict=True))]
            return _copy(one).expand(x.shape)
        copy = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
        return copy.copy_(x)
    return type(x)(_copy(y) for y in x) if isinstance(x, tuple | list) else x


def copies_of(args: tuple) -> tuple[tuple, list]:
    """Copies of ``args`` (tensors copied with their strides; other values as they are), and their layouts."""
    copies = _copy(args)
    return copies, [_layout(c) for c in copies]


def changed_inputs(args: tuple, copies: tuple, layouts: list) -> list[int]:
    """Which of ``copies`` (from :func:`copies_of`, with their ``layouts``) no longer equal ``args``: numbers, shape
    or strides."""
    return [i for i, (a, c, was) in enumerate(zip(args, copies, layouts, strict=True))
            if not _unchanged(a, c) or _layout(c) != was]


def _layout(x):
    """The shapes and strides of the tensors in ``x``: a ``.t_()`` or ``.unsqueeze_()`` changes them."""
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), x.stride() if x.layout == torch.strided else None)
    return tuple(_layout(y) for y in x) if isinstance(x, tuple | list) else None


def _unchanged(original, copy) -> bool:
    """Whether ``copy`` (a tensor, or a tuple or list of them) still equals ``original``, shape and numbers."""
    if isinstance(original, torch.Tensor) and isinstance(copy, torch.Tensor):
        return (original.shape == copy.shape and original.dtype == copy.dtype
                and (original.is_meta or bool(torch.equal(original.nan_to_num(0.0, 1.0, -1.0), copy.nan_to_num(
                    0.0, 1.0, -1.0)) and torch.equal(original.isnan(), copy.isnan()))))
    if isinstance(original, tuple | list) and isinstance(copy, tuple | list) and len(original) == len(copy):
        return all(_unchanged(a, c) for a, c in zip(original, copy, strict=True))
    return True
