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


def abort_on_rank(rank: int, world: int, victim: int) -> int:
    """Rank ``victim`` writes a line to its stderr, then aborts (SIGABRT, as a C++ library's fatal error does)."""
    if rank == victim:
        import sys

        print("about to abort", file=sys.stderr, flush=True)
        os.abort()
    dist.barrier()
    return rank


def uneven_chunks(rank: int, world: int) -> None:
    """Rank 0 holds 5 positions, the others 4: ring_attention must refuse before any hop."""
    import torch

    from attention_lib.ring_attention import ring_attention

    q = torch.randn(1, 5 if rank == 0 else 4, 2)
    return ring_attention(q, q, q)


def listening_ports(pid: int) -> list[str]:
    """The local TCP addresses process ``pid`` listens on (Linux: its socket inodes in /proc/net/tcp*)."""
    sockets = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
               if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")}
    rows = [line.split() for table in ("/proc/net/tcp", "/proc/net/tcp6")
            for line in open(table).read().splitlines()[1:]]
    return [row[1] for row in rows if row[9] in sockets and row[3] == "0A"]  # 0A: LISTEN


def sleep(rank: int, world: int, seconds: float) -> int:
    time.sleep(seconds)
    return rank


def count_computed_scores(rank: int, world: int, n: int, layouts: list[str]) -> list[int]:
    """For each layout, the scores this rank's causal ring forward computes: what ``update`` receives, counted."""
    import torch

    from attention_lib.memory_efficient import online_softmax_update
    from attention_lib.ring_attention import chunk_positions, ring_forward

    counts = []
    for layout in layouts:
        seen = []

        def counting(*state_scores_value, seen=seen):
            seen.append(state_scores_value[3].numel())
            return online_softmax_update(*state_scores_value)

        q = k = v = torch.randn(1, 1, n // world, 2)
        every = [chunk_positions(n, world, r, layout) for r in range(world)]
        ring_forward(q, k, v, True, 1.0, every, rank, update=counting)
        counts.append(sum(seen))
    return counts
