"""How a learner's answer differs from the expected one, in a few words.

Tensors are compared with :func:`torch.testing.assert_close`, whose report (how many numbers differ, the largest
difference and where) is passed on in a few words; other answers (a tuple of sizes) must match in type too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from ..validation import is_int, is_number
from ._running import Run, run_learner


def difference(got, expected, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """How ``got`` differs from ``expected`` in a few words, or ``None`` when they match.

    Tensors are compared with :func:`torch.testing.assert_close` (any float dtype, NaN equal to NaN); other
    answers (a tuple of sizes) must match in type too, so ``(4.0, 5)`` or ``("4", "5")`` is not ``(4, 5)``.

    Example:
        >>> difference(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
        '1 of 2 numbers differ, largest difference 0.5 at index (1,)'
        >>> difference((4, 5), (4, 5)) is None, difference((4.0, 5), (4, 5)) is None
        (True, False)
    """
    tensor = _holds_tensors(expected)
    try:
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol, equal_nan=True, check_dtype=not tensor,
                                   check_device=False, check_layout=False)
    except AssertionError as mismatch:
        return _in_a_few_words(str(mismatch), got, expected)
    except Exception:  # noqa: BLE001 - an answer of another kind (a str, a tensor for a tuple) is no match
        return f"a {type(got).__name__} where a {type(expected).__name__} is expected"
    return None


def _holds_tensors(x) -> bool:
    return isinstance(x, torch.Tensor) or (isinstance(x, tuple | list) and any(map(_holds_tensors, x)))


def _in_a_few_words(report: str, got, expected) -> str:
    """assert_close's report, shortened: ``"3 of 12 numbers differ, largest difference 0.5 at index (0, 1)"``."""
    counted = re.search(r"Mismatched elements: (\d+) / (\d+)", report)
    largest = re.search(r"Greatest absolute difference: (\S+) at index (\([^)]*\))", report)
    if counted and largest:
        size = float(largest.group(1))
        return (f"{counted.group(1)} of {counted.group(2)} numbers differ, largest difference {size:.3g} at index "
                f"{largest.group(2)}")
    length = re.search(r"length of the sequences mismatch: (\d+) != (\d+)", report)
    if length:
        return f"{length.group(1)} items where {length.group(2)} are expected"
    first = report.strip().splitlines()[0] if report.strip() else "they differ"
    return first.rstrip(".!").lower() if isinstance(expected, torch.Tensor) else first.rstrip(".!")


def _finite_parts_agree(got, wrong, atol: float, rtol: float) -> bool:
    """Do ``got`` and ``wrong`` agree wherever both are finite? On the inputs other than the failing one, a mistake
    is ruled out by numbers that differ, not by a NaN where its recipe happens to guard a 0 / 0."""
    if isinstance(got, torch.Tensor) and isinstance(wrong, torch.Tensor):
        if got.shape != wrong.shape or not (got.is_floating_point() and wrong.is_floating_point()):
            return difference(got, wrong, atol, rtol) is None
        both = got.detach().isfinite() & wrong.detach().isfinite()
        return difference(got.detach()[both], wrong.detach()[both].to(got.dtype), atol, rtol) is None
    if isinstance(got, tuple | list) and isinstance(wrong, tuple | list) and _holds_tensors(wrong):
        return len(got) == len(wrong) and all(_finite_parts_agree(g, w, atol, rtol)
                                              for g, w in zip(got, wrong, strict=True))
    return difference(got, wrong, atol, rtol) is None


def whole_number(x) -> int | None:
    """``x`` as an int when it is a whole number (``7``, ``7.0``, a one-element tensor holding 7), else ``None``.

    The one rule every checker uses for a position or a count: a bool, a string, NaN or 4.5 is not one.

    Example:
        >>> whole_number(7), whole_number(7.0), whole_number(torch.tensor(3)), whole_number(4.5), whole_number(True)
        (7, 7, 3, None, None)
    """
    if isinstance(x, torch.Tensor):
        if x.numel() != 1 or x.dtype == torch.bool:
            return None
        x = x.item()
    if is_int(x):
        return int(x)
    return int(x) if is_number(x) and float(x).is_integer() else None


def _agrees_everywhere(wrong_fn: Callable, failing: int, answers: dict[int, Run], learner_fn: Callable,
                       make_inputs: Callable[[int], tuple], trials: int, atol: float, rtol: float) -> bool:
    """Does the learner's function give ``wrong_fn``'s answer on the failing input, and agree with it on every other
    input: where both run, the same finite numbers, and where one raises, the other raises too (a slip whose recipe
    cannot run where the learner's code runs is not the learner's)? (``answers`` holds the runs so far; the others
    are run here, once.)"""
    for trial in (failing, *(t for t in range(trials) if t != failing)):
        args = make_inputs(trial)
        if trial not in answers:
            answers[trial] = run_learner(learner_fn, args)
        run = answers[trial]
        try:
            wrong = wrong_fn(*args)
        except Exception:  # noqa: BLE001 - a mistake that cannot be made on these inputs
            if trial == failing or run.error is None:
                return False
            continue
        if run.error is not None:
            return False
        if run.result is None:
            continue
        agrees = difference(run.result, wrong, atol, rtol) is None if trial == failing else _finite_parts_agree(
            run.result, wrong, atol, rtol)
        if not agrees:
            return False
    return True


def which_part_differs(parts, got, expected, shape_note: Callable[[str, torch.Tensor, torch.Tensor], str],
                       has: Callable[[str], str] = lambda part: "has") -> str | None:
    """Say which of several results is off, ``parts`` being ``(name, what it is)`` in order: a result that is not a
    tensor, then a wrong shape (``shape_note(part, mine, right)`` ends that message), then the largest difference
    with :func:`~._where.how_it_differs`'s hint; ``None`` when every part agrees."""
    from ._where import how_it_differs

    for (part, meaning), mine, right in zip(parts, got, expected, strict=True):
        if not isinstance(mine, torch.Tensor):
            return f"the {part} must be a torch.Tensor {meaning}, but got {type(mine).__name__}."
        if mine.shape != right.shape:
            return (f"the {part} {has(part)} the wrong shape: expected {tuple(right.shape)} {meaning}, but got "
                    f"{tuple(mine.shape)}{shape_note(part, mine, right)}")
    for (part, _), mine, right in zip(parts, got, expected, strict=True):
        if not torch.allclose(mine.to(right.dtype), right, atol=1e-5, rtol=1e-4):
            gap = float((mine.to(right.dtype) - right).abs().max())
            how = how_it_differs(mine.to(right.dtype), right)
            return (f"every shape is right, but the {part} differs from the reference (largest difference {gap:.3g})."
                    + (f" Hint: {how[0].upper()}{how[1:]}" if how else ""))
    return None
