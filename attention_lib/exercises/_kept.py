"""The last trials of every checker: does the answer keep something of one call for the next?

Two ways a right answer can still hand a caller a wrong result later, which no trial on fresh inputs shows:

- **one result handed out twice** (``functools.lru_cache``, a dict of results): a caller who changes the result
  in place (``mask[0] = False``) changes what the next call on the same arguments returns (tried where a checker
  asks for it, ``fresh_result``: a mask is edited in place, a cached table of sizes need not be);
- **results remembered by the tensors themselves** (``id(x)``, ``x.data_ptr()``, a dict keyed on the tensors):
  the same tensors refilled with new numbers (a preallocated cache is written in place) get the old result, and
  Python gives a freed tensor's id to a new one.

Example:
    >>> import functools
    >>> double = lambda x: 2 * x
    >>> inputs = lambda trial: (torch.arange(3.0),)
    >>> kept_slip(double, double, inputs, None, 1e-5, 1e-4) is None
    True
    >>> seen = {}
    >>> by_id = lambda x: seen.setdefault(id(x), 2 * x)
    >>> kept_slip(by_id, double, inputs, None, 1e-5, 1e-4)[:50]
    'on the same tensors refilled with new numbers, you'
    >>> cached = functools.lru_cache(lambda n: torch.zeros(n))
    >>> kept_slip(cached, lambda n: torch.zeros(n), lambda trial: (3,), None, 1e-5, 1e-4)[:42]
    'after a caller changed the result of a cal'
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._again import fresh_values, map_tensors
from ._compare import difference
from ._copies import copies_of
from ._running import run_learner

#: The hint for a result handed out again after the caller changed it.
SHARED = ("after a caller changed the result of a call in place (as masks and buffers often are: mask[0] = False, "
          "out.add_(...)), your next call on the same arguments returned the changed tensor ({differs}): your "
          "function hands out one tensor it keeps (functools.lru_cache, a dict, a global). Return a new tensor each "
          "call (or a .clone() of what you keep).")
#: The hint for a right answer that is wrong when called again on the same numbers.
AGAIN_WRONG = ("called again on the first input (the same numbers, in new tensors), your function returned another "
               "result ({differs}): it keeps results between calls and hands one back for other inputs (a dict or a "
               "cache keyed on the tensors' ids, which Python gives to new tensors once the old ones are freed, or a "
               "global). Compute every call from its own arguments.")
#: The hint for a result remembered by the tensors themselves.
BY_IDENTITY = ("on the same tensors refilled with new numbers, your function returned its result for their old "
               "numbers ({differs}): it remembers by the tensors themselves (id(), .data_ptr(), a dict or lru_cache "
               "keyed on them). A caller may refill the same tensors (a preallocated cache is written in place), and "
               "Python gives a freed tensor's id to a new one: compute every call afresh.")


def _tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for y in x for t in _tensors(y)] if isinstance(x, tuple | list) else []


def _scribble(t: torch.Tensor) -> bool:
    """Change ``t`` in place, as a caller might; ``False`` when it cannot be written (a broadcast view)."""
    try:
        with torch.no_grad():
            t.logical_not_() if t.dtype == torch.bool else t.fill_(7)
    except RuntimeError:
        return False
    return True


def kept_slip(learner_fn: Callable, reference_fn: Callable, make_inputs: Callable[[int], tuple], allowed,
              atol: float, rtol: float, fresh_result: bool = True) -> str | None:
    """The hint (:data:`SHARED` or :data:`BY_IDENTITY`) when ``learner_fn``, right on ``make_inputs(0)``, keeps a
    result from one call for the next, else ``None``. A run that raises or was right all along says nothing.
    ``fresh_result=False`` leaves out the test of one result handed out twice (a table cached by its sizes, which
    nobody changes in place, is no slip)."""
    expected = reference_fn(*make_inputs(0))
    said = _by_identity(learner_fn, reference_fn, make_inputs, allowed, expected, atol, rtol)
    if said is not None or not fresh_result:
        return said
    held = [copies_of(make_inputs(0))[0] for _ in range(2)]  # both alive: no id is reused between the calls
    first = run_learner(learner_fn, held[0], allowed, copy=False).result
    if _tensors(first) and all(_scribble(t) for t in _tensors(first)):
        again = run_learner(learner_fn, held[1], allowed, copy=False)
        differs = None if again.error is not None else difference(again.result, expected, atol, rtol)
        if differs is not None:
            return SHARED.format(differs=differs)
    return None


def _by_identity(learner_fn, reference_fn, make_inputs, allowed, expected, atol, rtol) -> str | None:
    """:data:`BY_IDENTITY` when the same tensor objects, refilled with new numbers, get the old result."""
    held, _ = copies_of(make_inputs(0))  # the same tensor objects, called twice
    floats = [t for t in _tensors(held) if t.is_floating_point()]
    if not floats or any(0 in t.stride() for t in floats):  # nothing to refill, or a broadcast view
        return None
    run = run_learner(learner_fn, held, allowed, copy=False)
    if run.error is not None:
        return None
    differs = difference(run.result, expected, atol, rtol)
    if differs is not None:  # right on these numbers before: this call got another call's result
        return AGAIN_WRONG.format(differs=differs)
    before = map_tensors(run.result, lambda t: t.detach().clone())
    new = fresh_values(make_inputs(0), 0.5)
    with torch.no_grad():
        for mine, fresh in zip(_tensors(held), _tensors(new), strict=True):
            if mine.is_floating_point():
                mine.copy_(fresh)
    run = run_learner(learner_fn, held, allowed, copy=False)
    differs = None if run.error is not None else difference(run.result, reference_fn(*new), atol, rtol)
    if differs is not None and difference(run.result, before, atol, rtol) is None:
        return BY_IDENTITY.format(differs=differs)
    return None
