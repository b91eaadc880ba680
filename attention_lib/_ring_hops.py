"""One hop of a ring: :func:`pass_round` (what the package's ring sends), and ``pass_on(key, value)``, the hop
lesson 16's hop-loop exercise hands to the learner.

Every rank calls ``pass_on`` with the key/value chunk it holds; the chunk goes to rank ``r + 1`` and the chunk of
rank ``r - 1`` comes back (round the ring). A pass is collective: both neighbours must take part, so every rank
must make the same passes in the same order. When one rank stops early (its loop is shorter, or it raised), its
neighbours would wait for ever; the checker's passes are therefore *guarded*: before each pass every rank says,
in one small all-reduce, whether it is still passing, and once one rank has finished the others stop with
:class:`RingStopped` instead of waiting. :func:`finish` is what a finished rank runs until every rank has.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _world_and_rank(group) -> tuple[int, int]:
    initialised = dist.is_available() and dist.is_initialized()
    return (dist.get_world_size(group), dist.get_rank(group)) if initialised else (1, 0)


def pass_round(tensor: torch.Tensor, group=None):
    """Send ``tensor`` to the next rank and receive the previous rank's (``dist.batch_isend_irecv``, which cannot
    deadlock): ``(buffer, wait)``; call ``wait()`` before reading ``buffer``, and work in between, overlapping."""
    (world, rank), buffer = _world_and_rank(group), torch.empty_like(tensor)
    peer = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))  # a group's rank -> global
    requests = dist.batch_isend_irecv([dist.P2POp(dist.isend, tensor, peer((rank + 1) % world), group),
                                       dist.P2POp(dist.irecv, buffer, peer((rank - 1) % world), group)])
    return buffer, lambda: [r.wait() for r in requests]


def _pack(*tensors: torch.Tensor) -> torch.Tensor:  # one message per hop
    return torch.cat([t.reshape(-1) for t in tensors])


def _unpack(flat: torch.Tensor, *like: torch.Tensor) -> list[torch.Tensor]:
    return [part.view_as(t) for part, t in zip(flat.split([t.numel() for t in like]), like, strict=True)]


class RingStopped(RuntimeError):
    """Raised in a rank that asks to pass a chunk after another rank has stopped passing."""


class PassOn:
    """``pass_on(key, value) -> (key, value)``: this rank's chunk to rank ``r + 1``, rank ``r - 1``'s back.

    Counts its calls (:attr:`hops`). Without a process group (a ring of one) it hands the chunk back unchanged.
    ``guarded``: the checker's passes (see the module's docstring).
    """

    def __init__(self, group=None, guarded: bool = True):
        self.group, self.guarded, self.hops = group, guarded, 0

    def __call__(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(key, torch.Tensor) or not isinstance(value, torch.Tensor):
            raise TypeError(f"pass_on(key, value) passes two tensors, the key and value chunk this rank holds, but "
                            f"got {type(key).__name__} and {type(value).__name__}.")
        self.hops += 1
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(self.group) == 1:
            return key, value  # a ring of one: the chunk comes back to its own rank
        if self.guarded and _still_passing(0, self.group) > 0:
            raise RingStopped(f"this rank asked for pass {self.hops}, but another rank had already stopped passing.")
        world, rank = dist.get_world_size(self.group), dist.get_rank(self.group)
        peer = (lambda r: r) if self.group is None else (lambda r: dist.get_global_rank(self.group, r))
        sent = [key.contiguous(), value.contiguous()]
        received = [torch.empty_like(t) for t in sent]
        ops = [dist.P2POp(dist.isend, t, peer((rank + 1) % world), self.group) for t in sent]
        ops += [dist.P2POp(dist.irecv, t, peer((rank - 1) % world), self.group) for t in received]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        return received[0], received[1]


def _still_passing(done: int, group) -> int:
    """One round of the guard: every rank adds 1 if it has finished; returns how many have."""
    flag = torch.tensor([done])
    dist.all_reduce(flag, group=group)
    return int(flag)


def finish(group=None) -> None:
    """Run by a guarded rank after its loop (or its error): guard rounds until every rank has finished too."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
        while _still_passing(1, group) < dist.get_world_size(group):
            pass
