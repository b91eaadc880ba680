"""Workers for tests/test_ring_attention.py's tests of spawn: a spawned child imports them by name from here."""

import os
import signal
import time

import torch.distributed as dist


def die_on_rank(rank: int, world: int, victim: int) -> int:
    """Rank ``victim`` is killed (SIGKILL, no traceback); the others wait at a barrier that never completes."""
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return rank


def raise_on_rank(rank: int, world: int, victim: int) -> int:
    """Prints (which must not reach the parent), then rank ``victim`` raises."""
    print(f"rank {rank} says hello")
    if rank == victim:
        raise ValueError(f"boom from rank {rank}")
    return rank


def sleep(rank: int, world: int, seconds: float) -> int:
    time.sleep(seconds)
    return rank
