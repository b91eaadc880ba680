"""Lesson 13's data: sequences whose first tokens are repeated right after themselves, and their vocabulary.

Built step by step in ``notebooks/13_induction_heads.ipynb``. A sequence is 32 random tokens whose first ``k``
tokens (``k`` drawn from 6 to 16) are repeated right after themselves: ``A B C D E F A B C D E F x y z ...``.
The next token is predictable only inside the copy, and only by looking back at the first time round; where
the copy starts changes from one sequence to the next, so no rule based on position alone can find it.
Everything is generated here, seeded, on the CPU (no downloads).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ...validation import check_int

#: The 32 tokens: one character each, so a sequence can be typed as a string.
VOCAB = tuple("abcdefghijklmnopqrstuvwxyz012345")
#: The length of every training sequence, and the range of the repeated segment's length ``k``.
SEQ_LEN, MIN_REPEAT, MAX_REPEAT = 32, 6, 16


class RepeatBatch(NamedTuple):
    """``tokens (N, L)`` int64 ids and ``lengths (N,)``: tokens ``0..k-1`` are repeated at ``k..2k-1``."""

    tokens: torch.Tensor
    lengths: torch.Tensor


def make_repeats(n: int, *, seed: int = 0, min_repeat: int = MIN_REPEAT, max_repeat: int = MAX_REPEAT,
                 length: int = SEQ_LEN) -> RepeatBatch:
    """``n`` seeded sequences of random tokens whose first ``k`` tokens are repeated right after themselves.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. ``k`` is drawn uniformly from
    ``min_repeat..max_repeat`` for each sequence (``min_repeat == max_repeat`` gives a fixed-length repeat).

    Raises:
        ValueError: if ``n < 1`` or the lengths do not fit (``1 <= min_repeat <= max_repeat``, ``2 * max_repeat
            <= length``).

    Example:
        >>> batch = make_repeats(2, seed=0, min_repeat=3, max_repeat=3, length=8)
        >>> torch.equal(batch.tokens[:, :3], batch.tokens[:, 3:6]), batch.lengths.tolist()
        (True, [3, 3])
    """
    n = check_int(n, "n", minimum=1)
    if not (isinstance(min_repeat, int) and isinstance(max_repeat, int) and 1 <= min_repeat <= max_repeat
            and 2 * max_repeat <= length):
        raise ValueError(f"need 1 <= min_repeat <= max_repeat <= length // 2, but min_repeat={min_repeat!r}, "
                         f"max_repeat={max_repeat!r}, length={length!r}: the segment and its copy must fit.")
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, len(VOCAB), (n, length), generator=g)  # (N, L)
    k = torch.randint(min_repeat, max_repeat + 1, (n,), generator=g)  # (N,)
    i = torch.arange(length)[None]  # (1, L)
    source = torch.where((i >= k[:, None]) & (i < 2 * k[:, None]), i - k[:, None], i)  # copy positions read i - k
    return RepeatBatch(tokens.gather(1, source), k)


def repeated_part(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """Which predictions are predictable: ``(N, L - 1)`` bool, ``True`` at query ``i`` when ``k <= i <= 2k - 2``.

    Query ``i`` predicts the token at ``i + 1``; inside the copy, that token was seen before. Everywhere else
    (the first segment, the last token of the copy, the random tail) the next token is random.

    Example:
        >>> repeated_part(torch.tensor([3]), 8).int()
        tensor([[0, 0, 0, 1, 1, 0, 0]], dtype=torch.int32)
    """
    i = torch.arange(length - 1)[None]  # (1, L - 1)
    return (i >= lengths[:, None]) & (i <= 2 * lengths[:, None] - 2)


def encode(text: str) -> torch.Tensor:
    """Turn a string of tokens (one character each; spaces are ignored) into ids ``(L,)``.

    Raises:
        TypeError: if ``text`` is not a string. ValueError: if it is empty, too long or has unknown characters.

    Example:
        >>> encode("abc abc").tolist()
        [0, 1, 2, 0, 1, 2]
    """
    if not isinstance(text, str):
        raise TypeError(f"a sequence is a string of tokens such as 'abcdabcd', but got {type(text).__name__}.")
    chars = [c for c in text if not c.isspace()]
    unknown = sorted({c for c in chars if c not in VOCAB})
    if unknown:
        raise ValueError(f"tokens {unknown} are not in the vocabulary; allowed: a-z and 0-5.")
    if not chars or len(chars) > SEQ_LEN:
        raise ValueError(f"a sequence has 1 to {SEQ_LEN} tokens, but got {len(chars)}.")
    return torch.tensor([VOCAB.index(c) for c in chars])


def decode(ids) -> str:
    """Turn ids back into a string. Example: ``decode(encode("abab")) == "abab"``."""
    return "".join(VOCAB[int(i)] for i in ids)
