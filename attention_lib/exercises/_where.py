"""Where and how a wrong tensor differs from the reference's, said as a hint: a pattern when one fits (a factor, a
constant per row, rows that no longer add up to 1, a transpose, a shift by one), else the first differing number.

Example:
    >>> expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> print(how_it_differs(2 * expected, expected))
    every number of yours is the reference's times 2: a factor is off (a scale, a sum divided twice, ...).
    >>> print(how_it_differs(expected.T, expected))
    your result is the reference's with its last two dimensions swapped: rows are queries, columns are keys.
    >>> print(how_it_differs(torch.tensor([[1.0, 2.0], [3.0, 5.0]]), expected))
    only 1 of 2 rows differs, the first at index (1, 1) (yours 5, the reference's 4): look at what sets that row \
apart (its position, a masked or empty row, its batch entry).
"""

from __future__ import annotations

import torch


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-4, rtol: float = 1e-3) -> bool:
    return a.shape == b.shape and bool(torch.isclose(a, b, atol=atol, rtol=rtol, equal_nan=True).all())


def _index(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) if len(shape) else ()


def _number(x: float) -> str:
    return f"{x:.4g}"


#: Operations whose overflow makes inf (then NaN): without one of them, a NaN comes from 0 / 0 or inf - inf.
_OVERFLOWING = {"exp", "exp2", "expm1", "softmax", "log_softmax", "logsumexp", "pow", "cosh", "sinh", "sigmoid"}


def how_it_differs(got, expected, ops: set[str] | None = None) -> str | None:
    """A hint on how the tensor ``got`` differs from ``expected`` (same shape), or ``None`` when it is not a float
    tensor of the same shape. ``ops``, the operations the learner's run called when known, keeps a NaN's hint to
    the causes that can make it (no exp of a large number in a function that calls no exp)."""
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)) or got.shape != expected.shape:
        return None
    if got.numel() == 0:
        return None
    if not (got.is_floating_point() and expected.is_floating_point()):
        wrong = got != expected.to(got.dtype)
        if not bool(wrong.any()):
            return None
        at = _index(int(wrong.flatten().nonzero()[0]), got.shape)
        return (f"{int(wrong.sum())} of {wrong.numel()} entries differ, the first at index {at}: yours is "
                f"{got[at].item()}, the reference's {expected[at].item()}.")
    got, expected = got.detach().double(), expected.detach().double()
    wrong = ~torch.isclose(got, expected, atol=1e-5, rtol=1e-4, equal_nan=True)
    if not bool(wrong.any()):  # within this tolerance, not within the checker's (tighter) one
        gap = float((got - expected).abs().nan_to_num(0.0).max())
        return _close_but(gap) if gap > 0 else None
    first = _index(int(wrong.flatten().nonzero()[0]), got.shape)
    mine, right = float(got[first]), float(expected[first])
    bad = ~got.isfinite() & expected.isfinite()
    if bool(bad.any()):
        at = _index(int(bad.flatten().nonzero()[0]), got.shape)
        if ops is not None and not ops & _OVERFLOWING:
            return (f"your result is {_number(float(got[at]))} at index {at} where the reference's is "
                    f"{_number(float(expected[at]))}: look for 0 / 0 (a sum that is 0 where you divide by it: is it "
                    f"taken over the right dimension?), x / 0, or -inf - (-inf).")
        return (f"your result is {_number(float(got[at]))} at index {at} where the reference's is "
                f"{_number(float(expected[at]))}: look for exp of a large number (subtract each row's max first), "
                f"0 / 0, or -inf - (-inf).")
    if bool((got.isfinite() & ~expected.isfinite()).any()):
        at = _index(int((got.isfinite() & ~expected.isfinite()).flatten().nonzero()[0]), got.shape)
        return (f"the reference is {_number(float(expected[at]))} at index {at}, but yours is "
                f"{_number(float(got[at]))}: a blocked or impossible place keeps its -inf (or NaN) there.")
    pattern = _pattern(got, expected)
    if pattern:
        return pattern
    gap = float((got - expected).abs().max())
    if gap <= 1e-3 * max(1.0, float(expected.abs().max())):
        return _close_but(gap)
    rows = wrong.reshape(-1, got.shape[-1]).any(dim=-1) if got.dim() >= 1 else wrong.reshape(1)
    if got.dim() >= 2 and int(rows.sum()) < rows.numel():
        count = int(rows.sum())
        return (f"only {count} of {rows.numel()} rows {'differs' if count == 1 else 'differ'}, the first at index "
                f"{first} (yours "
                f"{_number(mine)}, the reference's {_number(right)}): look at what sets that row apart (its "
                f"position, a masked or empty row, its batch entry).")
    return (f"the first number that differs is at index {first}: yours is {_number(mine)}, the reference's "
            f"{_number(right)}.")


def _close_but(gap: float) -> str:
    return (f"your numbers are close to the reference's but not within its tolerance (largest difference "
            f"{_number(gap)}): something small changes them, such as an eps added to a sum or a weight, a clamp, or "
            f"a step in a lower precision. Compute exactly the formula asked, with nothing added.")


def _pattern(got: torch.Tensor, expected: torch.Tensor) -> str | None:
    finite = expected.isfinite() & got.isfinite()
    nonzero = finite & (expected.abs() > 1e-6)
    if bool(nonzero.any()):
        ratio = got[nonzero] / expected[nonzero]
        factor = float(ratio.median())
        if abs(factor - 1) > 1e-3 and abs(factor) > 1e-3 and _close(got[finite], factor * expected[finite]):
            if abs(factor + 1) < 1e-3:
                return "every number of yours is the reference's with the opposite sign: a minus is off."
            return (f"every number of yours is the reference's times {factor:.4g}: a factor is off (a scale, a sum "
                    f"divided twice, ...).")
    if got.dim() >= 2 and got.shape[-1] == got.shape[-2] and _close(got, expected.mT):
        return ("your result is the reference's with its last two dimensions swapped: rows are queries, columns "
                "are keys.")
    if got.dim() >= 1 and got.shape[-1] > 1 and bool(finite.all()):
        offset = got - expected
        if _close(offset, offset[..., :1].expand_as(offset)):
            return ("each row of yours is the reference's plus a constant of its own (the first row's is "
                    f"{_number(float(offset.reshape(-1, offset.shape[-1])[0, 0]))}): a per-row shift that should "
                    "cancel does not (a max subtracted but not added back, a log of the sum left out).")
        sums, right_sums = got.sum(dim=-1), expected.sum(dim=-1)
        ones = torch.ones_like(sums)
        if _close(right_sums, ones) and not _close(sums, ones):
            at = _index(int((~torch.isclose(sums, ones, atol=1e-4)).flatten().nonzero()[0]), sums.shape)
            return (f"the reference's rows each add up to 1, yours do not (row {at} adds up to "
                    f"{_number(float(sums[at]))}): normalise over the last dimension, the keys.")
        if _close(sums, ones) and not _close(right_sums, ones):
            return "your rows each add up to 1, the reference's do not: is there a softmax or a division too many?"
        for dim in range(got.dim()):
            if got.shape[dim] > 1 and _close(got, expected.flip(dim)):
                return f"your result is the reference's in reverse order along dimension {dim}."
            if got.shape[dim] > 2:
                size = got.shape[dim]
                if _close(got.narrow(dim, 1, size - 1), expected.narrow(dim, 0, size - 1)) or _close(
                        got.narrow(dim, 0, size - 1), expected.narrow(dim, 1, size - 1)):
                    return f"your result is the reference's shifted by one place along dimension {dim}: an off-by-one."
    return None
