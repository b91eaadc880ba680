"""What the two checkers of ``notebooks/17_latent_and_paged.ipynb`` share: named trials, the checker's own helpers
refused as an answer, results that must survive the next call, and where a wrong answer first differs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch

from .._running import run_learner

_EXERCISES = str(Path(__file__).parents[1])


def helper_called(fn: Callable, args: tuple, answers: frozenset[str]) -> str | None:
    """The name of the checker's function that gives the answer (of ``answers``, in ``attention_lib/exercises``)
    that ``fn(*args)`` called first, or ``None``: a checker's own reference is not an answer. (A checker's slip,
    called, gets its own hint.)"""
    found: list[str] = []

    def watch(frame, event, arg):
        if event == "call" and not found and frame.f_code.co_filename.startswith(_EXERCISES):
            found.append(frame.f_code.co_name)

    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    before = sys.getprofile()
    sys.setprofile(watch)
    try:
        fn(*copies)
    except Exception:  # noqa: BLE001, S110 - a crash is the checker's to explain, on its own run
        pass
    finally:
        sys.setprofile(before)
    return found[0] if found and found[0] in answers else None


def helper_refusal(name: str, helper: str) -> str:
    return (f"❌ {name}: not allowed here. Hint: your function called `{helper}`, a helper of the checker itself; "
            f"write the computation in your own code.")


def kept_after_next_call(fn: Callable, reference: Callable, make_inputs: Callable[[int], tuple], first: int,
                         second: int) -> bool:
    """Whether ``fn``'s result for input ``first`` is still right after ``fn`` ran again on ``second`` (of the same
    shape): an answer that reuses one buffer, or remembers its result by shape, fails."""
    args = make_inputs(first)
    kept = run_learner(fn, args).result
    again = run_learner(fn, make_inputs(second)).result
    if not isinstance(kept, torch.Tensor) or not isinstance(again, torch.Tensor):
        return True  # the ordinary trials judge it
    expected = reference(*args)
    return kept.shape == expected.shape and torch.allclose(kept.double(), expected.double(), atol=1e-4, rtol=1e-3)


def first_difference(got: torch.Tensor, expected: torch.Tensor, names: tuple[str, ...], atol: float, rtol: float
                     ) -> str:
    """Where ``got`` first differs from ``expected``: ``"at n=0, h=1, l=2, s=0 (3 of 24 numbers differ)"``."""
    bad = ~torch.isclose(got.double(), expected.double(), atol=atol, rtol=rtol)
    where = bad.nonzero()[0].tolist()
    said = ", ".join(f"{n}={i}" for n, i in zip(names, where, strict=True))
    return f"first at {said} ({int(bad.sum())} of {bad.numel()} numbers differ)"
