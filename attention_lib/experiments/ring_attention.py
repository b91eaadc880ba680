"""Lesson 16's workers: what each rank of a ring runs, in a module that a spawned process can import.

Built for ``notebooks/16_ring_attention.ipynb``. Each ``worker(rank, world, ...)`` is started by
:func:`attention_lib.distributed.spawn` (or by torchrun: ``python -m attention_lib.experiments.ring_attention``
runs :func:`compare_cases` there and prints the largest differences from rank 0). The parent-side helpers
(:func:`ring_differences`, :func:`wrong_ranks`) start the ring and compare with ``scaled_dot_product_attention``
on the whole sequence, which the parent computes alone.

The bug gallery swaps one part of the ring (:data:`BUGS`): a fold without rescale, a skipped last hop, local
positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..distributed import ProcessRing, run_under_torchrun, spawn, tensor_bytes
from ..multihead import merge_heads, split_heads
from ..ring_attention import chunk_positions, ring_attention, ring_block_mask, ring_forward, shard
from ..ring_layout import check_split
from ..validation import check_int


def fold_without_rescale(running_max, running_sum, running_output, scores, value):
    """Lesson 10's step with its one slip: the old sum and blend are not multiplied by ``exp(old - new max)``."""
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    weights = torch.exp(scores - new_max)
    return new_max, running_sum + weights.sum(dim=-1, keepdim=True), running_output + weights @ value


def local_block_mask(q_positions, k_positions):
    """The slip: a causal mask from positions ``0 .. C-1`` inside each chunk, whichever chunks they are."""
    return ring_block_mask(torch.arange(len(q_positions)), torch.arange(len(k_positions)))


#: Each bug of the gallery: the keyword it swaps in :func:`attention_lib.ring_attention.ring_forward`.
BUGS = {"forgets to rescale": {"update": fold_without_rescale}, "skips the last hop": {"hops": -1},
        "masks with local positions": {"block_mask": local_block_mask}}


def hello(rank: int, world: int) -> int:
    """Worker: prints one line (to this rank's log, which ``ProcessRing.output`` reads) and returns its rank."""
    print(f"rank {rank} of {world} says hello")
    return rank


def make_case(n=16, heads=2, E=4, dtype=torch.float64, is_causal=False, layout="contiguous", seed=0, bug=None):
    """One case of :func:`compare_cases`, as a plain dict (picklable)."""
    return {"n": n, "heads": heads, "E": E, "dtype": dtype, "is_causal": is_causal, "layout": layout, "seed": seed,
            "bug": bug}


def whole_sequence(case) -> tuple[torch.Tensor, ...]:
    """The whole sequence's ``query, key, value (1, H, n, E)`` and a gradient of the output, from the case's seed."""
    g = torch.Generator().manual_seed(case["seed"])
    return tuple(torch.randn(1, case["heads"], case["n"], case["E"], generator=g, dtype=case["dtype"])
                 for _ in range(4))


def compare_cases(rank: int, world: int, cases: list[dict]) -> list[dict]:
    """Worker: for each case, this rank's chunk of the output and of dQ, dK, dV (no gradients for a bug)."""
    results = []
    for case in cases:
        q, k, v, grad = (shard(t, world, rank, case["layout"]) for t in whole_sequence(case))
        positions = chunk_positions(case["n"], world, rank, case["layout"])
        if case["bug"] is not None:
            swap = dict(BUGS[case["bug"]])
            if swap.get("hops") == -1:
                swap["hops"] = world - 1
            every = [chunk_positions(case["n"], world, r, case["layout"]) for r in range(world)]
            out = ring_forward(q, k, v, case["is_causal"], 1 / math.sqrt(case["E"]), every, rank, **swap)[0]
            results.append({"positions": positions, "output": out})
            continue
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        out = ring_attention(q, k, v, case["is_causal"], layout=case["layout"])
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
        results.append({"positions": positions, "output": out.detach(), "dQ": dq, "dK": dk, "dV": dv})
    return results


def gather(pieces: list[dict], name: str) -> torch.Tensor:
    """The whole sequence's ``name`` from every rank's chunk, each row back at its global position."""
    first = pieces[0][name]
    whole = first.new_empty(*first.shape[:-2], sum(p[name].shape[-2] for p in pieces), first.shape[-1])
    for piece in pieces:
        whole[..., piece["positions"], :] = piece[name]
    return whole


def reference(case) -> dict[str, torch.Tensor]:
    """``scaled_dot_product_attention`` on the whole sequence: the output and dQ, dK, dV."""
    q, k, v, grad = whole_sequence(case)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=case["is_causal"])
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
    return {"output": out.detach(), "dQ": dq, "dK": dk, "dV": dv}


def run_on(processes: int | ProcessRing, fn, *args) -> list:
    """``fn`` on a running :class:`~attention_lib.distributed.ProcessRing`, or on ``processes`` new ones."""
    return processes.run(fn, *args) if isinstance(processes, ProcessRing) else spawn(fn, processes, *args)


def ring_differences(processes: int | ProcessRing, cases: list[dict]) -> list[dict[str, float]]:
    """Run the cases on a ring (a world size or a running ring): the largest ``|ring - SDPA|`` of each result."""
    per_rank = run_on(processes, compare_cases, cases)
    differences = []
    for i, case in enumerate(cases):
        pieces, expected = [r[i] for r in per_rank], reference(case)
        differences.append({name: (gather(pieces, name) - expected[name]).abs().max().item()
                            for name in pieces[0] if name != "positions"})
    return differences


def wrong_ranks(processes: int | ProcessRing, cases: list[dict], atol: float = 1e-8) -> list[list[int]]:
    """For each case (a bug, say), the ranks whose output chunk differs from SDPA's rows by more than ``atol``."""
    per_rank = run_on(processes, compare_cases, cases)
    world, wrong = len(per_rank), []
    for i, case in enumerate(cases):
        expected = reference(case)["output"]
        wrong.append([r for r in range(world) if not torch.allclose(
            per_rank[r][i]["output"], expected[..., per_rank[r][i]["positions"], :], atol=atol, rtol=0)])
    return wrong


def held_bytes(n: int, world: int, heads: int, E: int, dtype=torch.float32) -> dict[str, int]:
    """The bytes one rank holds during one ring forward, exactly: its Q/K/V; the K/V passing through (at most two
    chunks besides its own: the one it computes with and sends on, and the one arriving); the blocks of scores
    alive at once (three: the scores, ``scores - max`` and their ``exp`` inside lesson 10's
    ``online_softmax_update``, which works out of place); and the running max, sum and blend. Each is built as
    the ring builds it, then counted.

    Raises:
        TypeError: a size not an int, or ``dtype`` not floating. ValueError: a size below 1, ``n % world``.

    Example:
        >>> held_bytes(4096, 4, heads=4, E=64)["Q, K, V"] / 2**20
        3.0
    """
    C, heads, E = check_split(n, world), check_int(heads, "heads", minimum=1), check_int(E, "E", minimum=1)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, such as torch.float32, but got {dtype!r}.")
    q, k, v = (torch.empty(1, heads, C, E, dtype=dtype) for _ in range(3))
    passing = [torch.cat([k.flatten(), v.flatten()]) for _ in range(2 if world > 1 else 0)]
    blocks = [q.new_empty(1, heads, C, C) for _ in range(3)]
    return {"Q, K, V": tensor_bytes(q, k, v), "K/V passing (2 chunks)": tensor_bytes(*passing),
            "score blocks (3)": tensor_bytes(*blocks),
            "max, sum, blend": tensor_bytes(q.new_empty(1, heads, C, 1), q.new_empty(1, heads, C, 1), q)}


def measure_peak(rank: int, world: int, n: int, heads: int, E: int) -> int:
    """Worker: the peak extra bytes of one ring forward on this rank, as ``torch.profiler`` records them."""
    from ..bench import peak_memory

    g = torch.Generator().manual_seed(rank)
    q, k, v = (torch.randn(1, heads, n // world, E, generator=g) for _ in range(3))
    return peak_memory(ring_attention, q, k, v)


def torch_private_ring():
    """torch's own ring, ``_templated_ring_attention``, where the installed torch has it (private: it moves
    between releases), else ``None``. Its causal mode with load balancing holds the zigzag layout."""
    try:
        from torch.distributed.tensor.experimental._attention import _cp_options, _templated_ring_attention
        return _templated_ring_attention, _cp_options
    except ImportError:
        return None


def compare_with_torch_ring(rank: int, world: int, case: dict) -> dict:
    """Worker: this rank's output from torch's private ring (CPU flash kernel) and from ours, same chunk."""
    import torch.distributed as dist

    ring, options = torch_private_ring()
    options.enable_load_balance = case["is_causal"] and case["layout"] == "zigzag"
    q, k, v, _ = (shard(t, world, rank, case["layout"]) for t in whole_sequence(case))
    theirs = ring(dist.group.WORLD, 2, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, q, k, v,
                  is_causal=case["is_causal"])[0]
    return {"positions": chunk_positions(case["n"], world, rank, case["layout"]), "torch": theirs,
            "ours": ring_attention(q, k, v, case["is_causal"], layout=case["layout"])}


# -- training: lesson 12's model with its sequence split over the ranks ----------------------------------------------
def half_shift_batch(n: int, vocab: int, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens ``(batch, n)``; position ``i``'s target is the token at ``(i + n/2) mod n``, which lies on
    another rank in both layouts on 2 ranks (contiguous: the other half; zigzag: the other pair of chunks).

    Example:
        >>> tokens, targets = half_shift_batch(8, 5, 1, seed=0)
        >>> torch.equal(targets[0, :4], tokens[0, 4:]) and torch.equal(targets[0, 4:], tokens[0, :4])
        True
    """
    tokens = torch.randint(0, vocab, (batch, n), generator=torch.Generator().manual_seed(seed))
    return tokens, tokens.roll(-(n // 2), dims=-1)


def within_chunk(query, key, value, is_causal=False, *, layout="contiguous"):
    """The control of the training: attention among this rank's own positions only, no ring (SDPA on the chunk)."""
    return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)


def split_forward(model, tokens: torch.Tensor, positions: torch.Tensor, layout: str, attend=ring_attention):
    """:class:`~attention_lib.TinyTransformer`'s forward on this rank's positions, attention by the ring:
    logits ``(N, C, classes)``. Everything but attention works on each position alone, so it runs unchanged."""
    x = model.token_embedding(tokens) + model.positions.weight[positions]  # (N, C, E): each position its vector
    for block in model.blocks:
        attention, h = block.attention, block.norm1(x)
        q, k, v = (split_heads(proj(h), attention.num_heads)  # (N, C, E) -> (N, H, C, Dh)
                   for proj in (attention.q_proj, attention.k_proj, attention.v_proj))
        x = x + attention.out_proj(merge_heads(attend(q, k, v, layout=layout)))
        x = x + block.mlp(block.norm2(x))
    return model.readout(model.norm(x))


def build_model(n: int, vocab: int, seed: int):
    from ..encoder import TinyTransformer

    torch.manual_seed(seed)
    return TinyTransformer(vocab_size=vocab, num_answers=vocab, max_len=n)


def train_split_sequence(rank: int, world: int, steps: int = 5, n: int = 16, vocab: int = 8, batch: int = 8,
                         seed: int = 0, layout: str = "zigzag", ring: bool = True, lr: float = 1e-2) -> list[float]:
    """Worker (also runs alone with ``rank=0, world=1`` and no process group): ``steps`` Adam steps of lesson
    12's model on :func:`half_shift_batch` with the sequence split over the ranks; every rank's gradients summed
    (all-reduce). ``ring=False`` is the control: attention within each rank's chunk (:func:`within_chunk`).
    Returns the losses, the same on every rank."""
    import torch.distributed as dist

    model = build_model(n, vocab, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    positions = chunk_positions(n, world, rank, layout)
    losses = []
    for step in range(steps):
        tokens, targets = half_shift_batch(n, vocab, batch, seed + step)
        logits = split_forward(model, tokens[:, positions], positions, layout, ring_attention if ring else within_chunk)
        # This rank's share of the mean over every position of the whole batch.
        loss = F.cross_entropy(logits.flatten(0, 1), targets[:, positions].flatten(), reduction="sum") / tokens.numel()
        optimizer.zero_grad()
        loss.backward()
        total = loss.detach().clone()
        if world > 1:
            for p in model.parameters():
                dist.all_reduce(p.grad)
            dist.all_reduce(total)
        optimizer.step()
        losses.append(total.item())
    return losses


def train_within_chunk(rank: int, world: int, steps: int = 5) -> list[float]:
    """Worker: :func:`train_split_sequence` with attention within each rank's chunk, no ring (the control)."""
    return train_split_sequence(rank, world, steps, ring=False)


def train_one_process(steps: int = 5, n: int = 16, vocab: int = 8, batch: int = 8, seed: int = 0,
                      lr: float = 1e-2) -> list[float]:
    """The same steps in one process through the model's own forward (``calculate_attention``): the losses."""
    model = build_model(n, vocab, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        tokens, targets = half_shift_batch(n, vocab, batch, seed + step)
        loss = F.cross_entropy(model(tokens).logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def compare_and_gather(rank: int, world: int, cases: list[dict]) -> list[list[dict]]:
    """Worker: :func:`compare_cases` on every rank, then every rank's results on every rank (all-gather)."""
    import torch.distributed as dist

    gathered = [None] * world
    dist.all_gather_object(gathered, compare_cases(rank, world, cases))
    return gathered


def main() -> None:
    """Under torchrun: the ring against SDPA on a causal zigzag and a plain case; rank 0 prints the differences."""
    import os

    cases = [make_case(is_causal=True, layout="zigzag"), make_case(n=12, seed=1)]
    gathered = run_under_torchrun(compare_and_gather, cases)
    if int(os.environ["RANK"]) == 0:
        for i, case in enumerate(cases):
            expected = reference(case)
            worst = max((gather([r[i] for r in gathered], name) - expected[name]).abs().max().item()
                        for name in expected)
            print(f"world={len(gathered)} causal={case['is_causal']} {case['layout']}: largest difference {worst:.2e}")


if __name__ == "__main__":
    main()
