"""Two toy tasks a tiny transformer learns in seconds: one where position decides, one where content does.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. Everything is generated here, seeded, on the
CPU (no downloads):

- ``"reversal"``: read 8 digits, write them backwards. The answer at position ``i`` is the digit at position
  ``L - 1 - i``: only *where* a digit sits matters, so a model must know positions.
- ``"agreement"``: choose the verb's form, singular or plural, from its subject across distractor nouns:
  "the cat near the dogs purr(s)" -> "purrs". Only *what* the subject is matters, wherever the distractors
  are: the learned version of lesson 03's hand-made "purred -> cat" match, with the course's cats and dogs.

Each example is a row of token ids ``(N, L)`` with a target row ``(N, L)``; positions that are not scored
hold :data:`IGNORE` (``-100``, what ``torch.nn.functional.cross_entropy`` skips). Every possible example is
either a training or a held-out example, by a fixed rule (:func:`is_heldout`): the two never overlap, and
held-out batches come from a different seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: The target of a position that is not scored (``cross_entropy``'s default ``ignore_index``).
IGNORE = -100

#: How many digits the reversal task reads.
REVERSAL_LENGTH = 8

_NOUNS = {"cat": "cats", "dog": "dogs"}  # the course's animals (attention_lib.lessons.data.VOCAB), singular -> plural
_PREPOSITIONS = ("near", "with", "behind")
_ADJECTIVES = ("small", "black")
#: The verb slots of "agreement" and their (singular, plural) forms.
VERB_FORMS = {"purr(s)": ("purrs", "purr"), "bark(s)": ("barks", "bark"), "sit(s)": ("sits", "sit")}
_AGREEMENT_VOCAB = ("<pad>", "the", "a", "cat", "cats", "dog", "dogs", *_ADJECTIVES, *_PREPOSITIONS, *VERB_FORMS,
                    "softly")


@dataclass(frozen=True)
class Task:
    """A toy task: its vocabularies, its maximum length, and what its answers mean.

    Attributes:
        name: ``"reversal"`` or ``"agreement"``.
        vocab: the input tokens; token id ``i`` is ``vocab[i]``.
        answers: the output classes; class ``c`` is ``answers[c]``.
        max_len: the longest input the task makes (and a model trained on it reads).
        pad: the id of the padding token, or ``None`` when every input has the same length.
    """

    name: str
    vocab: tuple[str, ...]
    answers: tuple[str, ...]
    max_len: int
    pad: int | None

    def encode(self, tokens: Sequence[str] | str) -> torch.Tensor:
        """Turn one input (a list of tokens, or a string split on spaces) into ids ``(L,)``.

        Raises:
            TypeError: if ``tokens`` is not a string or a sequence of strings.
            ValueError: if it is empty, too long, has the wrong length or holds a token outside the vocabulary.

        Example:
            >>> get_task("reversal").encode("1 2 3 4 5 6 7 8")
            tensor([1, 2, 3, 4, 5, 6, 7, 8])
        """
        if isinstance(tokens, str):
            tokens = tokens.split()
        if not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
            raise TypeError(f"an input is a string or a list of token strings, but got {type(tokens).__name__}.")
        tokens = list(tokens)
        allowed = [t for t in self.vocab if t != "<pad>"]
        unknown = sorted({t for t in tokens if t not in allowed})
        if unknown:
            raise ValueError(f"tokens {unknown} are not in the {self.name} vocabulary; allowed: {allowed}.")
        if len(tokens) > self.max_len:
            raise ValueError(f"the {self.name} model reads at most {self.max_len} tokens, but got {len(tokens)}: "
                             f"shorten the input.")
        if self.name == "reversal" and len(tokens) != self.max_len:
            raise ValueError(f"the reversal model reads exactly {self.max_len} digits, but got {len(tokens)}.")
        if not tokens:
            raise ValueError("the input is empty; give at least one token.")
        return torch.tensor([self.vocab.index(t) for t in tokens])

    def decode(self, ids) -> list[str]:
        """Turn input ids back into tokens, dropping padding.

        Example:
            >>> get_task("agreement").decode(get_task("agreement").encode("the cat purr(s)"))
            ['the', 'cat', 'purr(s)']
        """
        return [self.vocab[int(i)] for i in ids if self.pad is None or int(i) != self.pad]


REVERSAL = Task("reversal", tuple("0123456789"), tuple("0123456789"), REVERSAL_LENGTH, None)
AGREEMENT = Task("agreement", _AGREEMENT_VOCAB, ("singular", "plural"), 13, 0)
TASKS = {"reversal": REVERSAL, "agreement": AGREEMENT}


def get_task(name: str) -> Task:
    """The task called ``name``: ``"reversal"`` or ``"agreement"``.

    Raises:
        ValueError: if there is no such task.

    Example:
        >>> get_task("agreement").answers
        ('singular', 'plural')
    """
    if isinstance(name, Task):
        return name
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; the tasks are {sorted(TASKS)}.")
    return TASKS[name]


def is_heldout(ids: torch.Tensor) -> torch.Tensor:
    """Which examples belong to the held-out split: a fixed hash of the ids, about 1 in 8.

    Args:
        ids: ``(N, L)`` token ids.

    Returns:
        ``(N,)`` bool, ``True`` for held-out examples. Training batches never contain them.

    Example:
        >>> is_heldout(torch.zeros(3, 8, dtype=torch.long)).tolist()
        [False, False, False]
    """
    h = torch.zeros(ids.shape[0], dtype=torch.long)
    for column in ids.T:  # a polynomial hash, modulo a prime, one position at a time
        h = (h * 131 + column + 1) % 1_000_003
    return (h * 2_654_435_761) % 1_000_003 % 8 == 3


def _reversal_batch(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, 10, (n, REVERSAL_LENGTH), generator=g)
    return ids, ids.flip(1)  # the target at position i is the digit at position L - 1 - i


def _agreement_batch(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sentences at once: 13 word slots, some left out, then each row closed up to the left."""
    ids_of = {w: i for i, w in enumerate(AGREEMENT.vocab)}

    def draw(k: int) -> torch.Tensor:  # (n,) random choices among k
        return torch.randint(k, (n,), generator=g)

    def word(words, choice: torch.Tensor) -> torch.Tensor:
        return torch.tensor([ids_of[w] for w in words])[choice]

    def noun_phrase(plural: torch.Tensor):  # determiner, optional adjective, noun: 3 slots
        animal = draw(len(_NOUNS))
        noun = torch.where(plural, word(list(_NOUNS.values()), animal), word(list(_NOUNS), animal))
        det = torch.where(plural | (draw(2) == 1), ids_of["the"], ids_of["a"])  # "a" only before a singular
        adjective = word(_ADJECTIVES, draw(len(_ADJECTIVES)))
        return [det, adjective, noun], [torch.ones(n, dtype=torch.bool), draw(3) == 0, torch.ones(n, dtype=torch.bool)]

    plural = draw(2) == 1  # the subject's number: the answer
    slots, present = noun_phrase(plural)
    distractors = torch.tensor([0, 1, 1, 2, 2])[draw(5)]  # 0, 1 or 2 phrases, each with its own number
    for d in range(2):
        words, shown = noun_phrase(draw(2) == 1)
        slots += [word(_PREPOSITIONS, draw(len(_PREPOSITIONS))), *words]
        present += [s & (distractors > d) for s in [torch.ones(n, dtype=torch.bool), *shown]]
    slots += [word(list(VERB_FORMS), draw(len(VERB_FORMS))), torch.full((n,), ids_of["softly"])]
    present += [torch.ones(n, dtype=torch.bool), draw(2) == 1]
    slots, present = torch.stack(slots, 1), torch.stack(present, 1)  # (n, 13) each
    order = torch.argsort((~present).int(), dim=1, stable=True)  # the words present first, in their order
    ids = slots.gather(1, order).masked_fill(~present.gather(1, order), AGREEMENT.pad)
    verb_at = present[:, :11].sum(1)  # the verb is slot 11: the words present before it
    targets = torch.full((n, AGREEMENT.max_len), IGNORE)
    targets[torch.arange(n), verb_at] = plural.long()  # only the verb is scored: 0 = singular, 1 = plural
    return ids, targets


def make_batch(task: str | Task, n: int, *, seed: int = 0, split: str = "train"
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` seeded examples of ``task`` from one split: ``(inputs (N, L), targets (N, L))``, int64.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. The same ``seed`` gives the same batch;
    use a different seed for held-out data. Targets hold :data:`IGNORE` where nothing is scored (padding, and
    every word but the verb in ``"agreement"``).

    Args:
        task: ``"reversal"`` or ``"agreement"`` (or a :class:`Task`).
        n: how many examples.
        seed: the seed of the generator that draws them.
        split: ``"train"`` or ``"heldout"`` (disjoint, see :func:`is_heldout`).

    Returns:
        ``(inputs, targets)``, both ``(N, max_len)``.

    Raises:
        ValueError: for an unknown task or split, or ``n < 1``.

    Example:
        >>> x, y = make_batch("reversal", 2, seed=0)
        >>> torch.equal(y, x.flip(1)), tuple(x.shape)
        (True, (2, 8))
    """
    task = get_task(task)
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', but split={split!r}.")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, but n={n!r}.")
    g = torch.Generator().manual_seed(seed)
    draw = _reversal_batch if task.name == "reversal" else _agreement_batch
    inputs, targets, have = [], [], 0
    while have < n:  # draw more than needed, keep the examples of the requested split
        x, y = draw(n + n // 6 + 64 if split == "train" else 9 * n + 64, g)  # 7 in 8 are training examples
        keep = is_heldout(x) == (split == "heldout")
        inputs.append(x[keep])
        targets.append(y[keep])
        have += int(keep.sum())
    return torch.cat(inputs)[:n], torch.cat(targets)[:n]
