"""The trials of lesson 16's hop-loop checker, the slips it names, and the worker each rank runs.

Every trial has the same shape per rank, ``(2, 2, 4, 16)`` (fresh values each time), on a ring of ``world``
processes; one has values of another size, one a view as input whose dimensions are all out of memory order (no
``.view`` can merge two of them), one loud float32 scores, and the last repeats the first after the others.
:func:`hop_loop_worker` runs the learner's function on every trial in one call (so a result that shares memory with
a later one is caught when the results travel home), under the course's watch, with the checker's guarded
``pass_on``; it measures on the first trial the peak bytes of the learner's call and of the package's
:func:`~attention_lib.ring_attention.ring_forward`, and counts the learner's passes and folds (calls of
``online_softmax_update``), which right numbers cannot show.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch

from ..._ring_hops import PassOn, RingStopped, finish
from ...bench import peak_memory
from ...experiments.ring_attention import fold_without_rescale
from ...memory_efficient import online_softmax_update
from ...ring_attention import chunk_positions, ring_forward
from .._allowed import PLAIN, PRODUCTS, SOFTMAX, Allowed
from .._crashes import explain_crash
from .._running import run_learner
from .shipping import unship

NAME = "ring_forward"
PARAMS = ("query", "key", "value", "positions", "rank", "is_causal", "pass_on")
BATCH, HEADS, C, E = 2, 2, 4, 16  #: every trial's batch, heads, positions per rank and query size

#: The causal skip asks a Python question of a tensor (``if not allowed.any()``), so that much leaves PyTorch.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX | {"py_bool", "item"},
                  said="plain tensor operations, lesson 10's online_softmax_update and pass_on",
                  functions=frozenset({online_softmax_update, PassOn.__call__}),
                  library_hint="this exercise asks you to write the hop loop yourself; your function called {call}, "
                               "which does it for you (use online_softmax_update for the fold and pass_on for "
                               "the hop).")


@dataclass(frozen=True)
class Trial:
    name: str
    is_causal: bool
    layout: str = "contiguous"
    dtype: torch.dtype = torch.float64
    loud: float = 1.0  # multiplies the queries: large enough in float32 to overflow exp without the max
    transposed: bool = False  # the inputs are views with every dimension out of memory order
    value_size: int = E
    seed: int = 0


TRIALS = (Trial("plain (no mask)", False, seed=160), Trial("causal", True, seed=161),
          Trial("causal, zigzag positions, values of size 12", True, "zigzag", value_size=12, seed=162),
          Trial("causal, a transposed view as input", True, transposed=True, seed=163),
          Trial("causal, loud scores in float32", True, dtype=torch.float32, loud=40.0, seed=164),
          Trial("the first trial again, after the others", False, seed=160))


def whole_sequence(trial: Trial, world: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The trial's whole ``query, key, value (2, 2, 4·world, E or Ev)``, seeded."""
    g, n = torch.Generator().manual_seed(trial.seed), C * world
    sizes = (E, E, trial.value_size)
    if trial.transposed:  # stored (E, n, H, N), seen (N, H, n, E): no two neighbouring dimensions can be merged
        q, k, v = (torch.randn(s, n, HEADS, BATCH, generator=g, dtype=trial.dtype).permute(3, 2, 1, 0) for s in sizes)
    else:
        q, k, v = (torch.randn(BATCH, HEADS, n, s, generator=g, dtype=trial.dtype) for s in sizes)
    return q * trial.loud, k, v


def positions_of(trial: Trial, world: int) -> list[torch.Tensor]:
    return [chunk_positions(C * world, world, r, trial.layout) for r in range(world)]


def rank_chunk(x: torch.Tensor, trial: Trial, positions: torch.Tensor) -> torch.Tensor:
    """This rank's rows; a transposed trial keeps them a view (contiguous layout: a slice)."""
    if trial.transposed:
        return x[..., int(positions[0]):int(positions[-1]) + 1, :]
    return x[..., positions, :]


def simulate(q, k, v, positions, rank, is_causal, slip=None) -> torch.Tensor:
    """Rank ``rank``'s output of a ring with ``slip`` (a key of ``SLIPS`` in ``hop_loop``), in one process."""
    world, scale = len(positions), 1 / math.sqrt(v.shape[-1] if slip == "scaled by Ev" else q.shape[-1])
    mine = q[..., positions[rank], :]
    state = (mine.new_full((*mine.shape[:-1], 1), -math.inf), mine.new_zeros(*mine.shape[:-1], 1),
             mine.new_zeros(*mine.shape[:-1], v.shape[-1]))
    hops = {"the last hop skipped": range(world - 1), "the own chunk skipped": range(1, world)}.get(slip, range(world))
    for hop in hops:
        held = (rank - hop) % world  # whose chunk arrived; a ring turned backwards takes it for another's
        said = (rank + hop) % world if slip == "turned backwards" else held
        scores = mine @ k[..., positions[held], :].transpose(-2, -1) * (1 if slip == "no scale" else scale)
        if is_causal and slip != "no mask":
            local = slip == "local positions"
            here, there = (torch.arange(len(p)) for p in (positions[rank], positions[said])) if local else (
                positions[rank], positions[said])
            allowed = (there[None, :] < here[:, None]) if slip == "strict mask" else (
                there[None, :] <= here[:, None])  # (C, C): who may attend to whom
            if not allowed.any():
                continue
            scores = scores.masked_fill(~allowed, -math.inf)
        fold = fold_without_rescale if slip == "no rescale" else online_softmax_update
        state = fold(*state, scores, v[..., positions[held], :])
    return state[2] if slip == "no division" else state[2] / state[1]


def folds_due(trial: Trial, world: int, rank: int) -> int:
    """How many chunks rank ``rank`` folds: every chunk, but one whose every key is in its queries' future."""
    positions = positions_of(trial, world)
    return sum(not trial.is_causal or bool((positions[(rank - hop) % world][None, :] <= positions[rank][:, None]).any())
               for hop in range(world))


class _Counting:
    """Counts the calls of ``fn`` while it is entered (a profile hook: the learner's code stays as it is)."""

    def __init__(self, fn):
        self.code, self.calls = fn.__code__, 0

    def _hook(self, frame, event, arg):
        if event == "call" and frame.f_code is self.code:
            self.calls += 1
        if self.before is not None:
            self.before(frame, event, arg)

    def __enter__(self):
        self.before = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.before)


def _kept(x: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides (a transposed view stays transposed)."""
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype).copy_(x)


def _same(before: torch.Tensor, after: torch.Tensor) -> bool:
    return (before.shape == after.shape and before.stride() == after.stride()
            and bool(torch.equal(before.nan_to_num(), after.nan_to_num())))


def hop_loop_worker(rank: int, world: int, shipped: tuple) -> dict:
    """Worker: the learner's function on every trial on this rank: what it returned, raised or changed."""
    try:
        fn = unship(shipped)
    except Exception as error:  # noqa: BLE001 - told to the learner
        return {"setup": f"{type(error).__name__}: {error}"}
    reports = []
    for index, trial in enumerate(TRIALS):
        positions = positions_of(trial, world)
        q, k, v = (rank_chunk(x, trial, positions[rank]) for x in whole_sequence(trial, world))
        args = (_kept(q), _kept(k), _kept(v), positions, rank, trial.is_causal, PassOn())
        runs = []

        def once(*a, runs=runs):
            with _Counting(online_softmax_update) as folds:
                runs.append(run_learner(fn, a, ALLOWED, copy=False))
            runs.append(folds.calls)

        peak = peak_memory(once, *args) if index == 0 else once(*args)
        finish()
        run, report = runs[0], {"hops": args[-1].hops, "folds": runs[1]}
        report["changed"] = [name for name, a, b in zip(PARAMS, (q, k, v), args, strict=False) if not _same(a, b)]
        report["in_place"] = list(dict.fromkeys(run.in_place))
        if index == 0:
            scale = 1 / math.sqrt(E)
            report["peak"] = peak
            report["ring_peak"] = peak_memory(ring_forward, q.contiguous(), k.contiguous(), v.contiguous(),
                                              trial.is_causal, scale, positions, rank)
            report["chunk"] = (k.numel() + v.numel()) * k.element_size()
        if run.refused is not None:
            report["refused"] = run.refused
        elif isinstance(run.error, RingStopped):
            report["stopped"] = True
        elif isinstance(run.error, NotImplementedError) and run.failed_op is None:
            report["not attempted"] = True
        elif run.error is not None:
            report["error"] = explain_crash(NAME, run.error, args, params=PARAMS, failed_op=run.failed_op)
        elif isinstance(run.result, torch.Tensor):
            report["result"] = run.result.detach()
        else:
            report["returned"] = "None" if run.result is None else type(run.result).__name__
        reports.append(report)
    return {"reports": reports}
