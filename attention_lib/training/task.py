"""What a toy task is: an object that carries its own behaviour.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. A :class:`Task` knows its vocabularies and
its length, how to read an input (:meth:`Task.encode`), how to draw examples (:meth:`Task.draw`), which of
them are held out from training (:meth:`Task.is_heldout`) and how to show the model's answers
(:meth:`Task.answer_words`). The tasks themselves are in :mod:`attention_lib.training.learning_to_attend.tasks`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..validation import is_int

#: The target of a position that is not scored (``cross_entropy``'s default ``ignore_index``).
IGNORE = -100

def is_heldout(ids: torch.Tensor) -> torch.Tensor:
    """A fixed hash of each example's ids that puts about 1 in 8 of all possible examples in the held-out split.

    Args:
        ids: ``(N, L)`` token ids.

    Returns:
        ``(N,)`` bool, ``True`` for held-out examples.

    Example:
        >>> is_heldout(torch.zeros(3, 8, dtype=torch.long)).tolist()
        [False, False, False]
    """
    h = torch.zeros(ids.shape[0], dtype=torch.long)
    for column in ids.T:  # a polynomial hash, modulo a prime, one position at a time
        h = (h * 131 + column + 1) % 1_000_003
    return (h * 2_654_435_761) % 1_000_003 % 8 == 3


class Task:
    """A toy task: its vocabularies, its maximum length, and its behaviour (drawing, holding out, showing).

    Subclasses draw examples (:meth:`draw`) and say what an answer looks like (:meth:`answer_words`). By default
    an example is held out by a fixed hash of its ids (:func:`is_heldout`, about 1 in 8).

    Attributes:
        name: the task's name, for :func:`get_task`.
        vocab: the input tokens; token id ``i`` is ``vocab[i]``.
        answers: the output classes; class ``c`` is ``answers[c]``.
        max_len: the longest input the task makes (and a model trained on it reads).
        pad: the id of the padding token, or ``None`` when every input has the same length.
        recipe: the model's size and the training settings of :func:`attention_lib.training.train`.
        examples: inputs the explorer offers.
    """

    def __init__(self, name: str, vocab: Sequence[str], answers: Sequence[str], max_len: int, pad: int | None,
                 recipe: dict, examples: Sequence[str] = ()):
        self.name, self.vocab, self.answers = name, tuple(vocab), tuple(answers)
        self.max_len, self.pad, self.recipe, self.examples = max_len, pad, dict(recipe), tuple(examples)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # -- reading inputs ---------------------------------------------------------------------------------------
    def encode(self, tokens: Sequence[str] | str | Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Turn one input into ids ``(L,)``: a string split on spaces, a list of tokens, or token ids.

        Raises:
            TypeError: if ``tokens`` is none of those (or mixes strings and ids).
            ValueError: if it is empty, too long, has the wrong length, or holds a token or id outside the
                vocabulary.

        Example:
            >>> digits = Task("digits", "0123456789", "0123456789", 4, None, recipe={})
            >>> digits.encode("1 2 3")
            tensor([1, 2, 3])
            >>> digits.encode([1, 2, 3]).tolist()
            [1, 2, 3]
        """
        allowed = [t for i, t in enumerate(self.vocab) if i != self.pad]
        if isinstance(tokens, torch.Tensor):
            if tokens.dim() != 1 or tokens.is_floating_point() or tokens.dtype == torch.bool:
                raise TypeError(f"one input is a 1-D tensor of integer ids, but got dtype={tokens.dtype}, "
                                f"shape={tuple(tokens.shape)}; for a batch call the model itself.")
            tokens = tokens.tolist()
        if isinstance(tokens, str):
            tokens = tokens.split()
        if not isinstance(tokens, Sequence):
            raise TypeError(f"an input is a string, a list of token strings or a list of token ids, but got "
                            f"{type(tokens).__name__}.")
        tokens = list(tokens)
        if tokens and all(is_int(t) for t in tokens):
            bad = sorted({t for t in tokens if not 0 <= t < len(self.vocab) or t == self.pad})
            if bad:
                raise ValueError(f"token ids {bad} are not ids of the {self.name} vocabulary: use 0.."
                                 f"{len(self.vocab) - 1}{'' if self.pad is None else f' except {self.pad} (padding)'}"
                                 f", or pass the tokens themselves, e.g. {' '.join(allowed[:3])!r}.")
            tokens = [self.vocab[t] for t in tokens]
        if not all(isinstance(t, str) for t in tokens):
            kinds = sorted({type(t).__name__ for t in tokens})
            raise TypeError(f"an input is a list of token strings or a list of int token ids, not a mix; "
                            f"got items of types {kinds}.")
        unknown = sorted({t for t in tokens if t not in allowed})
        if unknown:
            raise ValueError(f"tokens {unknown} are not in the {self.name} vocabulary; allowed: {allowed}.")
        if len(tokens) > self.max_len:
            raise ValueError(f"the {self.name} model reads at most {self.max_len} tokens, but got {len(tokens)}: "
                             f"shorten the input.")
        if not tokens:
            raise ValueError("the input is empty; give at least one token.")
        self._check_length(len(tokens))
        return torch.tensor([self.vocab.index(t) for t in tokens])

    def _check_length(self, length: int) -> None:
        """Refuse an input length the task never makes (nothing, by default)."""

    def decode(self, ids) -> list[str]:
        """Turn input ids back into tokens, dropping padding.

        Example:
            >>> Task("digits", "0123456789", "0123456789", 4, None, recipe={}).decode(torch.tensor([3, 1, 4]))
            ['3', '1', '4']
        """
        return [self.vocab[int(i)] for i in ids if self.pad is None or int(i) != self.pad]

    # -- examples and splits ----------------------------------------------------------------------------------
    def draw(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` random examples ``(inputs (n, max_len), targets (n, max_len))`` of either split."""
        raise NotImplementedError

    def is_heldout(self, ids: torch.Tensor) -> torch.Tensor:
        """``(N,)`` bool: which examples ``ids (N, L)`` belong to the held-out split (never to training)."""
        return is_heldout(ids)

    def sample(self, n: int, g: torch.Generator, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` examples of one split: draw, and keep those of the split."""
        inputs, targets, have = [], [], 0
        while have < n:  # 7 in 8 are training examples: draw more than needed, keep the requested split
            x, y = self.draw(2 * (n - have) + 64 if split == "train" else 9 * (n - have) + 64, g)
            keep = self.is_heldout(x) == (split == "heldout")
            inputs.append(x[keep])
            targets.append(y[keep])
            have += int(keep.sum())
        return torch.cat(inputs)[:n], torch.cat(targets)[:n]

    # -- showing answers --------------------------------------------------------------------------------------
    def answer_words(self, tokens: Sequence[str], best: Sequence[int]) -> list[str]:
        """What the model answers at each position, as words (``""`` where nothing is asked)."""
        return [self.answers[b] for b in best]

    def answer_text(self, tokens: Sequence[str], answers: Sequence[str]) -> str:
        """The model's answer to one input, as one line of text."""
        return " ".join(answers)


