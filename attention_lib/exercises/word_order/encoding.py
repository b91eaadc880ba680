"""The first exercise of ``notebooks/11_word_order.ipynb``: the sinusoidal encoding, written from its formula.

The lesson states the formula and asks for the code before it shows its own; the checker refuses the package's
:func:`attention_lib.sinusoidal_encoding`. Cross-attention over a padded batch is checked in
:mod:`attention_lib.exercises.word_order.cross_attention`, the predict-then-check on shuffled words in
:mod:`attention_lib.exercises.word_order.shuffles`.
"""

from __future__ import annotations

import torch

from ...positions import sinusoidal_encoding
from .._again import Awkward
from .._allowed import PLAIN, PLAIN_SAID, PRODUCTS, Allowed
from .._checker import CheckResult, check_function


def _sizes(seed: int) -> tuple[int, int]:
    """``(length, dim)`` for one trial: a few positions and an even number of features."""
    g = torch.Generator().manual_seed(110 + seed)
    length = int(torch.randint(3, 40, (1,), generator=g))
    dim = 2 * int(torch.randint(2, 9, (1,), generator=g))
    return length, dim


def _angles(length: int, dim: int, *, first: int = 0, exponent=lambda two_i, dim: two_i / dim):
    position = torch.arange(first, first + length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)  # (E / 2,)
    return position / 10000.0 ** exponent(two_i, dim)  # (L, E / 2)


def _interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    # two (L, E / 2) -> (L, E / 2, 2) -> (L, E): column 2i from even, 2i + 1 from odd
    return torch.stack([even, odd], dim=-1).flatten(-2).float()


def _swapped(length, dim):
    angle = _angles(length, dim)
    return _interleave(torch.cos(angle), torch.sin(angle))


def _concatenated(length, dim):
    angle = _angles(length, dim)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1).float()


def _pair_index(length, dim):
    angle = _angles(length, dim, exponent=lambda two_i, dim: (two_i / 2) / dim)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _own_column(length, dim):
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    column = torch.arange(dim, dtype=torch.float64)  # (E,)
    angle = position / 10000.0 ** (column / dim)  # (L, E)
    out = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, 1::2])
    return out.float()


def _multiplied(length, dim):
    angle = _angles(length, dim, exponent=lambda two_i, dim: -two_i / dim)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _base_1000(length, dim):
    angle = _angles(length, dim) * 10.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # base 1000
    return _interleave(torch.sin(angle), torch.cos(angle))


def _integer_division(length, dim):
    angle = _angles(length, dim, exponent=lambda two_i, dim: two_i // dim)  # 0 for every pair: 2i < dim
    return _interleave(torch.sin(angle), torch.cos(angle))


def _from_one(length, dim):
    angle = _angles(length, dim, first=1)
    return _interleave(torch.sin(angle), torch.cos(angle))


SINUSOIDAL_MISTAKES = [
    (_swapped, "sine and cosine are swapped: the even columns (0, 2, 4, ...) hold the sines and the odd columns "
               "the cosines, so the first row is [0, 1, 0, 1, ...]."),
    (_concatenated, "all the sines come first and all the cosines after them. Some libraries (tensor2tensor) lay "
                    "it out that way; the paper interleaves them: column 2i is a sine, column 2i + 1 the cosine "
                    "of the same frequency (e.g. enc[:, 0::2] = sin, enc[:, 1::2] = cos)."),
    (_pair_index, "the frequencies fall too slowly: the exponent is 2i / dim, where i counts the pairs (so 2i is "
                  "the even column number 0, 2, 4, ...), not i / dim."),
    (_own_column, "the cosine column 2i + 1 must share the frequency of the sine column 2i before it: use the "
                  "even column number 2i in the exponent for both."),
    (_multiplied, "divide the position by 10000 ** (2i / dim); multiplying makes the waves faster and faster "
                  "instead of slower and slower."),
    (_from_one, "positions count from 0: the first row is sin(0) = 0 and cos(0) = 1 in every pair."),
    (_base_1000, "the base is 10000 (ten thousand), not 1000: sin(pos / 10000 ** (2i / dim)). With 1000 the "
                 "pairs turn faster than the paper's (the slowest nearly ten times faster)."),
    (_integer_division, "2 * i // dim is integer (floor) division: 2i is always smaller than dim, so it rounds to "
                        "0 and every pair gets the same frequency, one radian per position. Use true division, "
                        "2 * i / dim (e.g. torch.arange(0, dim, 2) / dim gives floats)."),
]


#: The package's encoding is the answer itself.
ALLOWED = Allowed(PLAIN | PRODUCTS, said=PLAIN_SAID, library_hint="write the table yourself from the formula, with "
                  "torch.arange, torch.sin and torch.cos: your function called {call}, which is the answer itself.",
                  own_helpers=False)


def check_sinusoidal_encoding(fn) -> CheckResult:
    """Check ``fn(length, dim)``, which should return the ``(length, dim)`` encoding of
    :func:`attention_lib.sinusoidal_encoding` (base 10000).

    Built step by step in ``notebooks/11_word_order.ipynb``. It tries three fixed sizes and refuses a call of
    :func:`attention_lib.sinusoidal_encoding` itself.

    Args:
        fn: ``(length, dim) -> (length, dim)`` tensor; ``dim`` is always even.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (sine and cosine
        swapped, the sines and cosines in two halves, ``i / dim`` in the exponent, a cosine with its own
        frequency, multiplying instead of dividing, positions counted from 1, a transposed table).

    Example:
        >>> def encoding(length, dim):
        ...     angles = torch.arange(length, dtype=torch.float64)[:, None] / 10000.0 ** (torch.arange(0, dim, 2) / dim)
        ...     return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2).float()  # (length, dim)
        >>> check_sinusoidal_encoding(encoding).status
        'passed'
        >>> print(check_sinusoidal_encoding(_swapped))
        ❌ sinusoidal encoding: not quite. Hint: sine and cosine are swapped: ...
    """
    result = check_function(fn, sinusoidal_encoding, _sizes, name="sinusoidal encoding",
                            mistakes=SINUSOIDAL_MISTAKES, allowed=ALLOWED,
                            awkward=[Awkward("a long text, (length, dim) = (300, 6)", (300, 6),
                                             "right on short texts, but not on a long one: does your function build a "
                                             "table for a fixed maximum length and slice it? Build it for the length "
                                             "asked, from torch.arange(length)."),
                                     Awkward("a wide table, (length, dim) = (12, 64)", (12, 64),
                                             "right on narrow tables, but not on a wide one: does your function stop "
                                             "at a fixed number of features or frequencies? Build every pair of "
                                             "columns from torch.arange(0, dim, 2).")],
                            shape_hint="one row per position and one column per feature: (length, dim). If you "
                                       "got (dim, length), build the angles as positions[:, None] / frequencies"
                                       "[None, :].")
    if not result.passed:
        return result
    got, expected = fn(*_sizes(0)), sinusoidal_encoding(*_sizes(0))
    if got.dtype != expected.dtype:
        return CheckResult("failed", f"❌ sinusoidal encoding: right numbers, but your table is "
                           f"{str(got.dtype).removeprefix('torch.')}, and the reference's is "
                           f"{str(expected.dtype).removeprefix('torch.')}, the dtype of the word vectors it is added "
                           f"to (torch's default): added to them, a float64 table turns every activation into float64. "
                           f"Compute in float64 if you like, then return it with .to(torch.get_default_dtype()).")
    sizes = ", ".join(f"{length} x {dim}" for length, dim in map(_sizes, range(3)))
    return CheckResult("passed", f"✅ sinusoidal encoding: correct on three fixed sizes (length x dim: {sizes}). "
                                 f"Well done!")
