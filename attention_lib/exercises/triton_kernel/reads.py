"""What a kernel reads, watched in Triton's interpreter: the tiles of keys it loads (with a mask or without), and any
read that lands outside the tensors it was given (in the padding of their buffers).

Used by :func:`~attention_lib.exercises.triton_kernel.cases.run_case`; every load of the interpreter goes through
``create_masked_load``, which :func:`watching_reads` wraps for the length of one launch.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch


class _View:
    """Where a tensor's numbers lie in its storage: which addresses are its own."""

    def __init__(self, name: str, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        self.name, self.itemsize = name, tensor.element_size()
        self.start, self.stop = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
        offsets = torch.arange(storage.nbytes() // self.itemsize).as_strided(
            tensor.shape, tensor.stride(), tensor.storage_offset())
        self.own = np.zeros(storage.nbytes() // self.itemsize, dtype=bool)
        self.own[offsets.flatten().numpy()] = True

    def covers(self, addresses: np.ndarray) -> np.ndarray:
        """Which of ``addresses`` are this tensor's own numbers."""
        inside = (addresses >= self.start) & (addresses < self.stop)
        found = np.zeros(addresses.shape, dtype=bool)
        found[inside] = self.own[(addresses[inside] - self.start) // self.itemsize]
        return found


@contextmanager
def watching_reads(tensors: dict[str, torch.Tensor]):
    """Watch the interpreter's loads while a kernel runs on ``tensors`` (name -> the view passed to the kernel).

    Yields a dict filled as the kernel runs: ``"all"`` and ``"masked"``, the loads from ``"key"`` (one per tile) and
    those made with a mask; ``"selected"``, the tiles of keys loaded without a mask whose scores still went through
    a ``tl.where`` (a mask the full tiles do not need); ``"past"``, the tiles of keys loaded with every key masked
    (wholly past the last key); ``"outside"``, the name of the first tensor a load read past
    (its buffer's padding rows), or ``"memory outside every input"``.
    """
    from triton.runtime.interpreter import InterpreterBuilder, interpreter_builder

    views = [_View(name, t) for name, t in tensors.items()]
    seen: dict = {"all": 0, "masked": 0, "outside": None, "selected": 0, "past": 0}
    key = next((view for view in views if view.name == "key"), None)
    unmasked, tile = [], {"unmasked": False, "selected": False}

    def masked_load(ptrs, mask, *args):
        active = ptrs.data[mask.data.astype(bool)] if mask.data.shape == ptrs.data.shape else ptrs.data.ravel()
        active = active.astype(np.uint64).ravel()
        if active.size:
            owners = [view.covers(active) for view in views]
            first = next((view.name for view, own in zip(views, owners, strict=True) if own[0]), None)
            if first == "key":
                seen["all"] += 1
                seen["masked"] += not unmasked
                tile.update(unmasked=bool(unmasked), selected=False)
            if seen["outside"] is None and not np.logical_or.reduce(owners).all():
                seen["outside"] = _whose(views, active, owners)
        elif key is not None and ptrs.data.size and key.start <= int(ptrs.data.min()) < key.stop:
            seen["past"] += 1  # a tile of keys whose every key is masked: it lies wholly past the last one
        return InterpreterBuilder.create_masked_load(interpreter_builder, ptrs, mask, *args)

    def load(ptr, *args):
        unmasked.append(True)
        try:
            return InterpreterBuilder.create_load(interpreter_builder, ptr, *args)
        finally:
            unmasked.pop()

    def select(cond, lhs, rhs):
        if tile["unmasked"] and not tile["selected"]:  # a tl.where in a tile of keys loaded without a mask
            seen["selected"] += 1
            tile["selected"] = True
        return InterpreterBuilder.create_select(interpreter_builder, cond, lhs, rhs)

    builder = interpreter_builder
    builder.create_masked_load, builder.create_load, builder.create_select = masked_load, load, select
    try:
        yield seen
    finally:
        del builder.create_masked_load, builder.create_load, builder.create_select


def _whose(views: list[_View], active: np.ndarray, owners: list[np.ndarray]) -> str:
    """The tensor a load meant to read: the one that owns most of its addresses, else the one whose buffer holds
    the first address no tensor owns."""
    counts = [int(own.sum()) for own in owners]
    if max(counts) > 0:
        return views[counts.index(max(counts))].name
    stray = active[~np.logical_or.reduce(owners)][0]
    return next((view.name for view in views if view.start <= stray < view.stop), "memory outside every input")
