"""Activation patching: a head's output recorded on one input and written into another run, and donors for it.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``, on the hook of
:func:`attention_lib.interventions.edit_head`.
:func:`record_head` keeps what a head writes, :func:`patch_head` writes it into another run. A head's output
patched in from a *counterpart* of the same sentence can mend an answer only because that output carries the
answer: patching shows that the output is **sufficient**, an upper bound on what the head does, not how it found it.
The control is a donor that shares nothing with the sentence but its answer (resampling): if an unrelated
sentence's output mends as much, the head's output is a message about the answer, whatever the head read; a donor
with the opposite answer should then break as much.

Run the other way (noising), a correct input given the head's output from a failing one says how much of the error
runs through the head.

- :func:`pick_donors`: for each input, another input of the batch with the same (or the opposite) label;
- :func:`from_donors`: a recorded head output ``(N, L, Dh)`` with each input's chosen row taken from its donor's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .interventions import _hooked, _rows
from .multihead import MultiHeadAttention
from .validation import check_is_tensor


def pick_donors(labels: torch.Tensor, *, same: bool = True, seed: int = 0) -> torch.Tensor:
    """For each input, the index of another input of the batch whose label is the same (or differs), drawn at random.

    Args:
        labels: ``(N,)`` ints, e.g. each sentence's right answer.
        same: ``True``: a donor with the same label; ``False``: one with another label.
        seed: the seed of the draw (a :class:`torch.Generator` of its own; the global one is untouched).

    Returns:
        ``(N,)`` int64 indices, never an input's own.

    Raises:
        TypeError: if ``labels`` is not a tensor.
        ValueError: if ``labels`` is not ``(N,)`` integers, or some input has no possible donor.

    Example:
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> pick_donors(labels, same=True)  # 0 and 1 swap, 2 and 3 swap: the only choices
        tensor([1, 0, 3, 2])
        >>> bool((labels[pick_donors(labels, same=False)] != labels).all())
        True
    """
    check_is_tensor(labels, "labels")
    if labels.dim() != 1 or labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"labels must be (N,) integers, one label per input, but got {labels.dtype} "
                         f"{tuple(labels.shape)}.")
    n = labels.numel()
    allowed = (labels[:, None] == labels[None, :]) == same  # (N, N): [i, j] = j may be i's donor
    allowed &= ~torch.eye(n, dtype=torch.bool, device=labels.device)
    lacking = (~allowed.any(1)).nonzero().flatten()
    if lacking.numel():
        kind = "the same label" if same else "another label"
        raise ValueError(f"input {int(lacking[0])} (label {int(labels[lacking[0]])}) has no other input with {kind} "
                         f"in the batch; draw a larger batch with every label at least twice.")
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n, n, generator=g).to(labels.device).masked_fill(~allowed, -1.0)
    return scores.argmax(1)


def from_donors(recorded: torch.Tensor, donors: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``recorded (N, L, Dh)`` with row ``rows[i]`` of input ``i`` replaced by row ``rows[donors[i]]`` of its donor.

    The rows may stand at different positions in different inputs (each sentence's verb), so a donor's row is moved
    to where the recipient's stands; give the result to :func:`patch_head` with the
    same ``rows``.

    Args:
        recorded: ``(N, L, Dh)``, a head's output recorded on the batch (:func:`record_head`).
        donors: ``(N,)`` indices into the batch (:func:`pick_donors`).
        rows: ``(N,)`` the position of the row that matters in each input.

    Returns:
        A new ``(N, L, Dh)`` tensor; every other row as recorded.

    Raises:
        TypeError: if an argument is not a tensor.
        ValueError: if the shapes do not fit ``(N, L, Dh)``, ``(N,)``, ``(N,)``, or an index is out of range.

    Example:
        >>> recorded = torch.arange(6.0).reshape(2, 3, 1)  # input 0: rows 0, 1, 2; input 1: rows 3, 4, 5
        >>> from_donors(recorded, donors=torch.tensor([1, 0]), rows=torch.tensor([2, 0]))[..., 0]
        tensor([[0., 1., 3.],
                [2., 4., 5.]])
    """
    for value, name in ((recorded, "recorded"), (donors, "donors"), (rows, "rows")):
        check_is_tensor(value, name)
    if recorded.dim() != 3 or donors.shape != (recorded.shape[0],) or rows.shape != donors.shape:
        raise ValueError(f"recorded must be (N, L, Dh) and donors, rows (N,), but got {tuple(recorded.shape)}, "
                         f"{tuple(donors.shape)}, {tuple(rows.shape)}.")
    N, L, _ = recorded.shape
    for value, name, size in ((donors, "donors", N), (rows, "rows", L)):
        if value.is_floating_point() or bool(((value < 0) | (value >= size)).any()):
            raise ValueError(f"{name} must be integers in 0..{size - 1}, but got {value.tolist()[:8]}.")
    patched = recorded.clone()
    patched[torch.arange(N), rows] = recorded[donors, rows[donors]]
    return patched


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

    Where :func:`edit_head` changes where a head looks, this changes what it writes (its blend of the values,
    before ``out_proj``), taken from ``output``, recorded by :func:`record_head` on another input of the same shape.

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
