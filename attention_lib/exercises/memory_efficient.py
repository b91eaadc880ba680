"""The exercise of ``notebooks/10_memory_efficient.ipynb``: one step of the online softmax.

The learner writes ``online_softmax_update(running_max, running_sum, running_output, scores, value)``: fold
a new block of keys (its scores and values) into the running maximum, sum and blend, exactly what
:func:`attention_lib.memory_efficient.forward.online_softmax_update` does. The lesson asks for it right after
working the step out on one query, before it shows the package's version; the checker refuses that version (and
the attention functions that would do the work).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from ..memory_efficient.forward import online_softmax_update
from ._again import Awkward, loud
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, also_checked, check_function
from ._where import how_it_differs

_INF = float("inf")


#: How many trials: three states after a first block, then the initial state itself.
TRIALS = 4


def _inputs(seed: int):
    """A state after a first block of keys, and a second block whose larger scores move most rows' max.

    In trial 1 the first query's keys are all masked, in both blocks: its state stays ``-inf, 0, 0``. Trial 3 is
    the very first block: every query starts from the initial state ``(-inf, 0, 0)`` (one of them with its keys
    masked).
    """
    g = torch.Generator().manual_seed(3000 + seed)
    if seed == 3:
        n, L, B, Ev = 2, 4, 3, 3
        scores = torch.randn(n, L, B, generator=g)
        scores[:, 1] = -_INF
        state = (torch.full((n, L, 1), -_INF), torch.zeros(n, L, 1), torch.zeros(n, L, Ev))
        return (*state, scores, torch.randn(n, B, Ev, generator=g))
    n, L, B, Ev = 2, 3 + seed, 2 + seed, 3
    first = torch.randn(n, L, 4, generator=g)
    if seed == 1:
        first[:, 0] = -_INF
    state = (torch.full((n, L, 1), -_INF), torch.zeros(n, L, 1), torch.zeros(n, L, Ev))
    state = online_softmax_update(*state, first, torch.randn(n, 4, Ev, generator=g))
    scores = torch.randn(n, L, B, generator=g) + 2.0  # mostly larger than the first block's scores ...
    scores[:, -1] -= 6.0  # ... except in the last row, which keeps its old maximum
    if seed == 1:
        scores[:, 0] = -_INF  # the first query's keys are masked in both blocks
    return (*state, scores, torch.randn(n, B, Ev, generator=g))


def _one_query(args: tuple) -> tuple:
    """``args`` with their first query alone: ``L = 1``, one new token's state, as in decoding."""
    *state, scores, value = args
    return (*(t[:, :1] for t in state), scores[:, :1], value)


def _update(running_max, running_sum, running_output, scores, value, *, correct=True, guard=True,
            shift_by="new", new_max_out=True, normalise_block=False, correct_output=True, flipped=False,
            value_transposed=False):
    """The online update with one of the typical slips switched on (used to recognise them)."""
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    safe = new_max.masked_fill((running_max if guard == "old" else new_max) == -_INF, 0.0) if guard else new_max
    block_max = scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores - (safe if shift_by == "new" else block_max))
    if normalise_block:
        weights = torch.softmax(scores, dim=-1)
    correction = torch.exp((safe - running_max) if flipped else (running_max - safe))
    correction = correction if correct else torch.ones_like(running_max)
    running_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
    blend = weights @ (value.transpose(-2, -1) if value_transposed else value)  # (N, L, B) @ (N, B, Ev)
    running_output = running_output * (correction if correct_output else 1.0) + blend
    return (new_max if new_max_out else running_max), running_sum, running_output


_MISTAKES = [
    (lambda *a: _update(*a, guard="old"),
     "guard the shift by the new maximum, not the old one: on a query's first block the old maximum is -inf "
     "although this block's keys give a real maximum, so the weights would be exp(scores) unshifted. Shift by "
     "new_max.masked_fill(new_max == float('-inf'), 0.0): only a query that has seen no key at all has new_max -inf."),
    (lambda *a: _update(*a, guard=False),
     "a query that has seen only masked keys has running max -inf, and -inf - (-inf) is NaN: shift such rows by 0 "
     "instead (new_max.masked_fill(new_max == float('-inf'), 0.0))."),
    (lambda *a: _update(*a, correct=False),
     "when the maximum grows, the old sum and the old blend were measured against the old maximum: multiply both "
     "by torch.exp(running_max - new_max) before adding the new block."),
    (lambda *a: _update(*a, shift_by="block"),
     "subtract the new running maximum (the larger of the old one and this block's), not this block's own "
     "maximum, so that old and new numbers share one reference."),
    (lambda *a: _update(*a, new_max_out=False),
     "return the new maximum, torch.maximum(running_max, scores.amax(dim=-1, keepdim=True)), not the old one."),
    (lambda *a: _update(*a, correct_output=False),
     "the running blend was measured against the old maximum too: multiply running_output by the same "
     "correction as running_sum before adding weights @ value."),
    (lambda *a: (lambda m, s, o: (m, s, o / s.masked_fill(s == 0, 1.0)))(*_update(*a)),
     "return the running blend itself, not divided by the running sum: the one division happens at the very "
     "end, after the last block (output = running_output / running_sum)."),
    (lambda *a: _update(*a, normalise_block=True),
     "do not normalise the block with a softmax: keep torch.exp(scores - new_max) and let running_sum do the "
     "dividing at the very end."),
    (lambda *a: _update(*a, flipped=True),
     "the correction goes the other way: torch.exp(running_max - new_max), old minus new. The maximum only "
     "grows, so old - new <= 0 and the correction is at most 1: the old sum and blend hold exp(s - old max), "
     "and exp(s - old max) * exp(old max - new max) = exp(s - new max). exp(new - old) is at least 1 and "
     "blows them up instead of shrinking them."),
]

#: The hint for ``weights @ value.transpose(-2, -1)``, which raises unless a block has as many keys as features.
VALUE_TRANSPOSED = ("value is already (N, B, Ev): one row per key, just as the weights (N, L, B) have one column "
                    "per key, so weights @ value pairs each key's weight with its value as they are: (N, L, B) @ "
                    "(N, B, Ev) -> (N, L, Ev). Remove the .transpose(-2, -1) on value (it makes (N, Ev, B), whose "
                    "rows are features, not keys).")


_BY_HAND = ("write the step yourself, from torch.maximum, torch.exp and a matrix product: your function called {call}, "
            "which does it for you.")

#: Plain PyTorch operations; the package's step, and the attention functions built on it, do the exercise for you.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX, said=PLAIN_SAID, library_hint=_BY_HAND,
                  instead={"scaled_dot_product_attention": _BY_HAND}, own_helpers=False)


#: The hint for an update whose exp overflows once the block's scores are loud.
LOUD_BLOCK = ("exp of a large score overflows to inf in float32 (above about 88): take the exp of each score minus "
              "the new running maximum, torch.exp(scores - new_max), never of the score alone.")


def check_online_softmax_update(fn: Callable) -> CheckResult:
    """Check ``online_softmax_update(running_max, running_sum, running_output, scores, value)``.

    The exercise of ``notebooks/10_memory_efficient.ipynb``. The learner's function gets a state made from a
    first block of keys and a new block ``scores (N, L, B)``, ``value (N, B, Ev)``, on three fixed inputs
    (random numbers from fixed seeds; in one, a query whose keys are all masked), then on a first block from the
    initial state ``(-inf, 0, 0)``, then in float64 and backward, and must return
    ``(new_max, new_sum, new_output)`` as :func:`attention_lib.memory_efficient.forward.online_softmax_update`
    does, without calling it; typical slips get their own hint.

    Args:
        fn: ``(running_max (N, L, 1), running_sum (N, L, 1), running_output (N, L, Ev), scores (N, L, B),
            value (N, B, Ev)) -> (new_max, new_sum, new_output)``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> print(check_online_softmax_update(online_softmax_update))
        ❌ online_softmax_update: not allowed here. Hint: write the step yourself, ...
        >>> print(check_online_softmax_update(lambda *state_and_block: _update(*state_and_block)))
        ❌ online_softmax_update: not allowed here. Hint: ... `attention_lib.exercises.memory_efficient._update`, ...
    """
    result = check_function(fn, online_softmax_update, _inputs, name="online_softmax_update", mistakes=_MISTAKES,
                            allowed=ALLOWED, trials=TRIALS, float64=True, backward=True,
                            keep_inputs=True, awkward=[loud(_inputs(0), 60.0, 3, hint=LOUD_BLOCK),
                                                       Awkward("one query per row block (L = 1, as in decoding)",
                                                               _one_query(_inputs(2)))])
    if result.passed:
        return CheckResult("passed", f"✅ online_softmax_update: correct on three fixed states and blocks (in one, a "
                                     f"query whose keys have all been masked) and on a first block from the initial "
                                     f"state (-inf, 0, 0){also_checked(True, True)}. Well done!")
    if result.status == "error" and _transposes_value(fn):
        lines = [f"Hint: {VALUE_TRANSPOSED}" if line.startswith("Hint:") else line
                 for line in result.message.split("\n")]
        return CheckResult("error", "\n".join(lines))
    if result.status != "failed" or ("Hint:" in result.message and "the shapes are right, but" not in result.message):
        return result  # a named slip; a tuple that only differs is told result by result below
    explained = _which_result_is_wrong(fn)
    return result if explained is None else explained


def _same(got, expected) -> bool:
    return (isinstance(got, tuple | list) and len(got) == len(expected)
            and all(isinstance(g, torch.Tensor) and g.shape == e.shape
                    and torch.allclose(g.detach().to(e.dtype), e, atol=1e-5, rtol=1e-4, equal_nan=True)
                    for g, e in zip(got, expected, strict=True)))


def _transposes_value(fn: Callable) -> bool:
    """Whether ``fn`` blends with ``weights @ value.transpose(-2, -1)``: tried on a block of as many keys as
    features (trial 1: ``B = Ev = 3``), where that product runs instead of raising."""
    args = _inputs(1)
    try:
        got = fn(*args)
    except Exception:  # noqa: BLE001 - it raises for some other reason: the crash's own hint stands
        return False
    return any(_same(got, _update(*args, value_transposed=True, guard=guard)) for guard in (True, False))


_NAMES = ("the new max", "the new sum", "the new output")
_VARIABLES = ("new_max", "new_sum", "new_output")
_SHAPES = ("(N, L, 1)", "(N, L, 1)", "(N, L, Ev)")


def _order(got, expected) -> tuple[int, ...] | None:
    """The order ``p`` in which ``got`` holds the expected results (``got[i] == expected[p[i]]``), if any."""
    for order in itertools.permutations(range(len(expected))):
        if _same(got, [expected[i] for i in order]):
            return order
    return None


def _which_result_is_wrong(fn: Callable) -> CheckResult | None:
    """Name the returned tensor that is wrong (its shape or its values), trial by trial."""
    for trial in range(TRIALS):
        args = _inputs(trial)
        expected = online_softmax_update(*args)
        got = fn(*args)
        if not isinstance(got, tuple | list) or len(got) != 3:
            what = f"a {type(got).__name__}" + (f" of {len(got)}" if isinstance(got, tuple | list) else "")
            return _failed(f"expected a tuple of three tensors (new_max, new_sum, new_output), but got {what}.")
        order = _order(got, expected)
        if order is not None and order != (0, 1, 2):
            returned = ", ".join(_VARIABLES[i] for i in order)
            return _failed(f"all three results are right, but in the wrong order: you returned ({returned}). "
                           f"Return (new_max, new_sum, new_output), the order in which the running state comes "
                           f"in (running_max, running_sum, running_output), so that the next block can take it.")
        for position, (name, shape, g, e) in enumerate(zip(_NAMES, _SHAPES, got, expected, strict=True)):
            if not isinstance(g, torch.Tensor):
                return _failed(f"{name} (result {position + 1} of 3) should be a tensor {shape}, but it is "
                               f"a {type(g).__name__}.")
            if g.shape != e.shape:
                return _failed(f"{name} (result {position + 1} of 3) should have shape {shape} = {tuple(e.shape)}, "
                               f"but it has shape {tuple(g.shape)}. Hint: keep the last dimension with "
                               f"keepdim=True (amax(dim=-1, keepdim=True), sum(dim=-1, keepdim=True)).")
        for position, (name, g, e) in enumerate(zip(_NAMES, got, expected, strict=True)):
            if not torch.allclose(g.detach().to(e.dtype), e, atol=1e-5, rtol=1e-4, equal_nan=True):
                finite = torch.isfinite(e) & torch.isfinite(g.detach().to(e.dtype))
                diff = (g.detach().to(e.dtype) - e)[finite].abs().max().item() if bool(finite.any()) else float("nan")
                nans = int(torch.isnan(g.detach()).sum())
                mine = g.detach().to(e.dtype)
                apart = (mine.isinf() != e.isinf()) | ((mine.isinf() & e.isinf()) & (mine != e))
                where = ""
                if bool(apart.any()):
                    index = tuple(int(i) for i in apart.nonzero()[0])
                    where = (f"; at {int(apart.sum())} places one of yours and the reference's is infinite and the "
                             f"other not, e.g. at {index} yours is {mine[index].item():.3g} and the reference's "
                             f"{e[index].item():.3g}" + (" (a query that has seen no key keeps the max -inf)"
                                                          if e[index].item() == -_INF else ""))
                largest = f"largest difference {diff:.3g} where both are finite" if where else \
                    f"largest difference {diff:.3g}"
                how = how_it_differs(g, e) if not where else (
                    "a query whose keys have all been masked so far keeps the running max -inf, its sum and output 0; "
                    "elsewhere an exp of a large number overflows: subtract the new maximum first."
                    if e[index].item() == -_INF or mine[index].item() == -_INF else
                    "an exp of a large number overflows to inf: subtract the new maximum before the exp.")
                return _failed(f"{name} (result {position + 1} of 3) is wrong: {largest}{where}"
                               + (f", and it holds {nans} NaN" if nans else "") + "."
                               + (f" Hint: {how[0].upper()}{how[1:]}" if how else ""))
    return None


def _failed(message: str) -> CheckResult:
    return CheckResult("failed", f"❌ online_softmax_update: {message}")
