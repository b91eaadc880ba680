"""The words of a failed check: the inputs it failed on, which item of a tuple is off and how, a dtype that
differs, and a clue from what the learner's run left behind (an operation whose slip is present, an input written
into, how the numbers differ).

Example:
    >>> shapes_said((torch.ones(2, 3), 4))
    'the inputs of shape (2, 3), 4'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ._compare import difference
from ._running import Run
from ._trials import CHANGED_INPUT
from ._where import how_it_differs

#: A clue that looks for its slip: ``(the inputs, the run) -> hint``, or ``None`` when the slip is not present (a
#: ``clamp`` that changed no score).
Clue = Callable[[tuple, Run], str | None]


def roles_said(got, reference: Callable, args: tuple, params: list[str], atol: float, rtol: float) -> str | None:
    """A hint when ``got`` is the reference's result with one input in another's place (``key`` where ``value``
    belongs), two inputs swapped, or one input scaled by a size (see :func:`_scaled_said`), else ``None`` (also when
    the search itself fails: a checker never raises)."""
    try:
        return _roles_said(got, reference, args, params, atol, rtol)
    except Exception:  # noqa: BLE001 - no hint rather than a crash of the checker
        return None


def _roles_said(got, reference: Callable, args: tuple, params: list[str], atol: float, rtol: float) -> str | None:
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    pairs = [(i, j) for i in tensors for j in tensors if i != j and args[i].shape == args[j].shape]
    for i, j in pairs:
        for swapped in (False, True):
            changed = list(args)
            changed[i] = args[j]
            if swapped:
                changed[j] = args[i]
            try:
                differs = difference(got, reference(*changed), atol, rtol)
            except Exception:  # noqa: BLE001 - a reference that cannot run on these roles rules them out
                continue
            if differs is None:
                how = (f"`{params[i]}` and `{params[j]}` swapped" if swapped else
                       f"`{params[j]}` in the place of `{params[i]}` (and `{params[j]}` in its own)")
                return (f"not quite for {shapes_said(args)}. Hint: your result is the reference's with {how}: look at "
                        f"where your function uses `{params[j]}`, and which input each step should take.")
    return _scaled_said(got, reference, args, params, tensors, atol, rtol)


def _scaled_said(got, reference: Callable, args: tuple, params: list[str], tensors: list[int], atol: float,
                 rtol: float) -> str | None:
    """A hint when ``got`` is the reference's result on one input scaled by a size's root (or the size, or their
    inverses): a scale the exercise does not ask for, or the wrong one."""
    expected = reference(*args)
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor) and got.shape == expected.shape:
        scale = (got * expected).sum() / (expected * expected).sum().clamp_min(1e-30)
        if difference(got, scale * expected, atol, rtol) is None:  # a factor on the result: the pattern says it
            return None
    sizes = sorted({n for i in tensors for n in args[i].shape if n > 1})
    for i in tensors:
        for n in sizes:
            for factor, said in ((n ** -0.5, f"1 / sqrt({n})"), (n ** 0.5, f"sqrt({n})"), (1 / n, f"1 / {n}"),
                                 (float(n), f"{n}")):
                changed = list(args)
                changed[i] = args[i] * factor
                try:
                    differs = difference(got, reference(*changed), atol, rtol)
                except Exception:  # noqa: BLE001 - a reference that cannot run on it rules the scale out
                    continue
                if differs is None:
                    where = next(f"`{params[t]}`'s dimension {d - args[t].dim()}" for t in tensors
                                 for d, m in enumerate(args[t].shape) if m == n)
                    return (f"not quite for {shapes_said(args)}. Hint: your result is the reference's with "
                            f"`{params[i]}` multiplied by {said} ({n} is the size of {where}): a scale the exercise "
                            f"does not ask for, or the wrong size's.")
    return None


def shapes_said(args: tuple) -> str:
    """The inputs in a few words: tensors by their shapes, the rest as they are."""
    return "the inputs " + ", ".join(f"of shape {tuple(a.shape)}" if isinstance(a, torch.Tensor) else repr(a)
                                     for a in args)


def dtype_differs(got, expected) -> str | None:
    """How the dtype of a right answer differs from the reference's (float64 in, float64 out), or ``None``."""
    for g, e in zip(_tensor_items(got), _tensor_items(expected), strict=False):
        if e.is_floating_point() and g.is_floating_point() and g.dtype != e.dtype:
            return (f"for {str(e.dtype).removeprefix('torch.')} inputs your result is "
                    f"{str(g.dtype).removeprefix('torch.')}. Hint: keep the inputs' dtype: make new tensors with "
                    f"dtype=x.dtype (or torch.zeros_like(x)), and leave out .float() and dtype=torch.float32.")
    return None


def _tensor_items(x) -> list[torch.Tensor]:
    items = [x] if isinstance(x, torch.Tensor) else list(x) if isinstance(x, tuple | list) else []
    return [t if isinstance(t, torch.Tensor) else torch.empty(0, dtype=torch.bool) for t in items]


def which_item(got, expected, atol: float, rtol: float, ops: set[str] | None = None) -> str:
    """For a tuple of tensors: which item is off, its shape or its values."""
    count = len(expected)
    if not isinstance(got, tuple | list) or len(got) != count:
        found = f"a {type(got).__name__}" + (f" of {len(got)}" if isinstance(got, tuple | list) else "")
        return f"expected {count} results, a tuple of tensors, but got {found}."
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if isinstance(e, torch.Tensor) and not isinstance(g, torch.Tensor):
            return f"result {i + 1} of {count} should be a tensor, but it is a {type(g).__name__}."
        if _shape(e) is not None and _shape(g) != _shape(e):
            return f"result {i + 1} of {count} should have shape {_shape(e)}, but it has shape {_shape(g)}."
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        differs = difference(g, e, atol, rtol)
        if differs is not None:
            how = how_it_differs(g, e, ops)
            return (f"the shapes are right, but result {i + 1} of {count} differs from the reference: {differs}."
                    + (f" Hint: {how[0].upper()}{how[1:]}" if how else ""))
    return "the values differ from the reference."


def clue(got, expected, args: tuple, run: Run, clues: Mapping[str, str | Clue] | None, params: list[str]) -> str:
    """A hint for a wrong answer that matches no listed mistake, from what the run left behind: a clue whose
    operation the run called (a :data:`Clue` only when it says its slip is present), else how the numbers differ."""
    for op, hint in (clues or {}).items():
        said = hint(args, run) if callable(hint) else hint
        if op in run.ops and said:
            return f" Hint: {said}"
    if run.changed and run.in_place:  # the answer wrote into an input and then read it again
        ops = ", ".join(dict.fromkeys(run.in_place))
        return " Hint: " + CHANGED_INPUT.format(name=params[run.changed[0]], ops=ops)
    said = how_it_differs(got, expected, run.ops)
    return f" Hint: {said}" if said else ""


def _shape(x):
    return tuple(x.shape) if isinstance(x, torch.Tensor) else None
