"""Checks of plain arguments (sizes, numbers, flags) and the error type for tensors whose dtypes disagree.

Each returns the checked value, so a call reads ``L = check_int(L, "L")``.
"""

from __future__ import annotations

import math
from numbers import Integral, Real


class DtypeMismatchError(ValueError, TypeError):
    """Two tensors that must share a dtype do not (catch it as ``ValueError`` or ``TypeError``)."""


def _fix(fix: str) -> str:
    return f"; {fix}" if fix else "."


def check_int(value, name: str, *, minimum: int | None = None, fix: str = "") -> int:
    """Check that ``value`` is an integer (Python or NumPy, not a bool) ``>= minimum``; return it as an ``int``.

    Raises:
        TypeError: if ``value`` is not an integer.
        ValueError: if ``value < minimum``.
    """
    if not is_int(value):
        raise TypeError(f"{name} must be an int, but got {type(value).__name__} ({value!r}){_fix(fix)}")
    if minimum is not None and value < minimum:
        wanted = {0: "non-negative", 1: "positive"}.get(minimum, f"at least {minimum}")
        raise ValueError(f"{name} must be {wanted}, but {name}={value}{_fix(fix)}")
    return int(value)


def is_int(value) -> bool:
    """Whether ``value`` is an integer (Python or NumPy, not a bool): :func:`check_int`'s test, for the checkers."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """Whether ``value`` is a finite real number, a bool excluded (the test behind :func:`check_number`)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def check_index(value, name: str, size: int, *, fix: str = "") -> int:
    """Check that ``value`` is an integer index in ``0 .. size - 1`` (a layer, a head, an example); return it.

    Raises:
        TypeError: if ``value`` is not an integer.
        ValueError: if it is outside ``0 .. size - 1``.
    """
    if not is_int(value):
        raise TypeError(f"{name} must be an int index in 0..{size - 1}, but got {type(value).__name__} "
                        f"({value!r}){_fix(fix)}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must be an index in 0..{size - 1}, but {name}={value!r}{_fix(fix)}")
    return int(value)


def check_number(value, name: str, *, positive: bool = False, minimum: float | None = None,
                 fix: str = "") -> float:
    """Check that ``value`` is a finite real number (not a bool), positive or ``>= minimum`` if asked; return it as a
    ``float``.

    Raises:
        TypeError: if ``value`` is not a real number.
        ValueError: if it is not finite, not positive when ``positive``, or below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, but got {type(value).__name__} ({value!r}){_fix(fix)}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, but {name}={value}{_fix(fix)}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, but {name}={value}{_fix(fix)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum:g}, but {name}={value}{_fix(fix)}")
    return float(value)


def check_probability(value, name: str) -> float:
    """Check that ``value`` is a number in ``[0, 1)`` (a dropout probability); return it as a ``float``.

    Raises ``TypeError`` if ``value`` is not a real number, ``ValueError`` if it is outside ``[0, 1)``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number in [0, 1), but got {type(value).__name__} ({value!r}).")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), but {name}={value}; use 0.0 to switch dropout off.")
    return float(value)


def check_bool(value, name: str) -> bool:
    """Check that ``value`` is ``True`` or ``False`` (not ``1``, ``"yes"`` or ``None``); else ``TypeError``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, but got {type(value).__name__} ({value!r}).")
    return value
