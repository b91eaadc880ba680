"""A task's vocabulary: its tokens in id order, and the one way to turn text into ids and back.

Each task that trains has one: lesson 12's tasks (:attr:`~attention_lib.training.task.Task.vocab`, the agreement
words of :mod:`~attention_lib.training.grammar`), lesson 13's one-character tokens
(:data:`~attention_lib.training.induction_heads.VOCAB`) and lesson 15's words
(:data:`~attention_lib.training.generation.VOCAB`). A :class:`Vocabulary` is a tuple of its tokens, so
``vocab[i]``, ``vocab.index(token)``, ``len(vocab)`` and ``" ".join(vocab)`` work as on the plain tuple.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class Vocabulary(tuple):
    """The tokens of one task, token id ``i`` being ``self[i]``, with :meth:`encode` and :meth:`decode`.

    Args:
        tokens: the tokens, in id order.
        pad: the id of the padding token (never encoded, left out when decoding), or ``None``.
        joiner: how text joins its tokens: ``" "`` (words split on spaces) or ``""`` (one character each,
            spaces ignored).
        name: the task's name, for the error messages (``"the agreement vocabulary"``), or ``None``.
        allowed: how the error messages list the allowed tokens (default: the list of them).
        unit: what the error messages call a token (``"tokens"``, ``"words"``).

    Example:
        >>> digits = Vocabulary("0123456789", joiner="")
        >>> digits.encode("3 1 4").tolist(), digits.decode([3, 1, 4]), digits[9]
        ([3, 1, 4], '314', '9')
    """

    def __new__(cls, tokens: Sequence[str], *, pad: int | None = None, joiner: str = " ", name: str | None = None,
                allowed: str | None = None, unit: str = "tokens"):
        vocab = super().__new__(cls, tuple(tokens))
        vocab.pad, vocab.joiner, vocab.name, vocab.unit = pad, joiner, name, unit
        vocab.allowed = allowed if allowed is not None else str([t for i, t in enumerate(vocab) if i != pad])
        vocab._ids = {t: i for i, t in enumerate(vocab)}
        return vocab

    def __getnewargs_ex__(self):  # copies and pickles keep the settings
        return (tuple(self),), {"pad": self.pad, "joiner": self.joiner, "name": self.name, "allowed": self.allowed,
                                "unit": self.unit}

    def split(self, text: str | Sequence[str]) -> list[str]:
        """The tokens of ``text``: split on spaces (``joiner=" "``) or into characters (``joiner=""``), or a list
        of tokens as it is.

        Raises:
            TypeError: if ``text`` is neither a string nor a list of token strings.
        """
        if isinstance(text, str):
            return text.split() if self.joiner else [c for c in text if not c.isspace()]
        if not isinstance(text, Sequence) or not all(isinstance(t, str) for t in text):
            raise TypeError(f"an input is a string of {self.unit} or a list of them, but got "
                            f"{type(text).__name__}{'' if not isinstance(text, Sequence) else ' of other items'}.")
        return list(text)

    def encode(self, text: str | Sequence[str], *, max_len: int | None = None) -> torch.Tensor:
        """Token ids ``(L,)`` of ``text`` (see :meth:`split`), int64.

        Raises:
            TypeError: if ``text`` is neither a string nor a list of token strings.
            ValueError: if it holds a token outside the vocabulary (or padding), is empty, or is longer than
                ``max_len``.

        Example:
            >>> Vocabulary(["<pad>", "the", "cat"], pad=0, name="toy").encode("the cat").tolist()
            [1, 2]
        """
        tokens = self.split(text)
        unknown = sorted({t for t in tokens if t not in self._ids or self._ids[t] == self.pad})
        if unknown:
            where = f"the {self.name} vocabulary" if self.name else "the vocabulary"
            raise ValueError(f"{self.unit} {unknown} are not in {where}; allowed: {self.allowed}.")
        if max_len is not None and len(tokens) > max_len:
            raise ValueError(f"the {self.name + ' ' if self.name else ''}model reads at most {max_len} tokens, but "
                             f"got {len(tokens)}: shorten the input.")
        if not tokens:
            raise ValueError("the input is empty; give at least one token.")
        return torch.tensor([self._ids[t] for t in tokens], dtype=torch.long)

    def words(self, ids) -> list[str]:
        """The tokens of ``ids`` (a 1-D tensor or a list), padding left out.

        Example:
            >>> Vocabulary(["<pad>", "the", "cat"], pad=0).words([1, 2, 0])
            ['the', 'cat']
        """
        return [self[int(i)] for i in ids if self.pad is None or int(i) != self.pad]

    def decode(self, ids) -> str:
        """The text of ``ids`` (a 1-D tensor or a list): its tokens joined, padding left out.

        Example:
            >>> Vocabulary(["<pad>", "the", "cat"], pad=0).decode(torch.tensor([1, 2, 0, 0]))
            'the cat'
        """
        return self.joiner.join(self.words(ids))
