"""Lesson 15's language: the course's grammar as text to continue, and a checker of what a model writes.

Built step by step in ``notebooks/15_generation.ipynb``. The sentences are lesson 12's
(:mod:`attention_lib.training.grammar`), with the verb written in its right form and framed for a language
model: ``<bos> near the dogs the cat purrs softly .``. A model trained to predict the next word of such texts
must, to write the verb, find the subject (wherever it sits) and agree with it, then close the sentence the
grammar's way. :func:`check_sentences` reads what it wrote: **well-formed** (a sentence the grammar makes, ended
by ``.``) and **agreeing** (well-formed, with the verb's number that of its subject).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ...validation import check_int
from ..grammar import AGREEMENT, NOUNS, PREPOSITIONS, STRUCTURES, VERB_FORMS
from ..vocabulary import Vocabulary

PAD, BOS, END = 0, 1, 2
#: The words of the texts: padding, the start, the full stop, then the grammar's words with verbs in both forms.
VOCAB = Vocabulary(("<pad>", "<bos>", ".", "the", "a", "cat", "cats", "dog", "dogs", "small", "big", "black", "white",
                    "near", "with", "behind", "purrs", "purr", "barks", "bark", "sits", "sit", "softly"), pad=PAD,
                   unit="words")
_ID = {w: i for i, w in enumerate(VOCAB)}
#: The longest text: ``<bos>``, the grammar's longest sentence (21 words) and ``.``.
MAX_LEN = AGREEMENT.max_len + 2
_SINGULAR_VERBS = {forms[0] for forms in VERB_FORMS.values()}
_PLURAL_VERBS = {forms[1] for forms in VERB_FORMS.values()}
SPLITS = {"train": AGREEMENT.training_structures, "heldout": AGREEMENT.heldout_structures}


def encode(text: str | Sequence[str]) -> torch.Tensor:
    """Token ids ``(L,)`` of a text such as ``"<bos> the cat purrs ."`` (words split on spaces): :data:`VOCAB`'s
    :meth:`~attention_lib.training.vocabulary.Vocabulary.encode`.

    Raises:
        ValueError: for a word outside :data:`VOCAB` (the message lists them), or an empty text.
        TypeError: for something that is neither a string nor a list of words.

    Example:
        >>> encode("<bos> the cat purrs .").tolist()
        [1, 3, 5, 16, 2]
    """
    return VOCAB.encode(text)


def decode(ids) -> str:
    """The text of token ids (a 1-D tensor or a list), padding left out.

    Example:
        >>> decode(torch.tensor([1, 3, 5, 16, 2, 0, 0]))
        '<bos> the cat purrs .'
    """
    return VOCAB.decode(ids)


def _to_text(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Grammar rows (verb slot, target 0/1 at the verb) -> framed texts ``(n, MAX_LEN)``: verb in its right form."""
    rows = []
    for ids, target in zip(inputs.tolist(), targets.tolist(), strict=True):
        words = []
        for token_id, answer in zip(ids, target, strict=True):
            word = AGREEMENT.vocab[token_id]
            if token_id == AGREEMENT.pad:
                continue
            words.append(VERB_FORMS[word][answer] if word in VERB_FORMS else word)
        text = [BOS, *(_ID[w] for w in words), END]
        rows.append(text + [PAD] * (MAX_LEN - len(text)))
    return torch.tensor(rows, dtype=torch.long)


def make_texts(n: int, *, seed: int = 0, split: str = "train", structures: Sequence[str] | None = None
               ) -> torch.Tensor:
    """``n`` seeded texts ``(n, MAX_LEN)``, padded at the end: ``<bos>``, a sentence of the grammar, ``.``.

    Built step by step in ``notebooks/15_generation.ipynb``.

    Args:
        n: how many texts.
        seed: the seed of their generator.
        split: ``"train"`` (the grammar's training structures) or ``"heldout"`` (the structures kept out).
        structures: draw from these structures instead (any the grammar can make, e.g. ``["P P S V"]``).

    Raises:
        TypeError, ValueError: for a bad ``n``, an unknown split, or a structure the grammar cannot make.

    Example:
        >>> decode(make_texts(1, seed=0, structures=["S V"])[0])
        '<bos> the cat purrs .'
    """
    n = check_int(n, "n", minimum=1)
    if structures is None:
        if split not in SPLITS:
            raise ValueError(f"split must be 'train' or 'heldout', but split={split!r}.")
        structures = SPLITS[split]
    inputs, targets = AGREEMENT.sentences(list(structures), n, torch.Generator().manual_seed(seed))
    return _to_text(inputs, targets)


def verb_position(texts: torch.Tensor) -> torch.Tensor:
    """``(N,)``: where each text's verb is (``-1`` if it has none).

    Example:
        >>> verb_position(encode("<bos> the cats near a dog bark .")[None]).tolist()
        [6]
    """
    is_verb = torch.zeros_like(texts, dtype=torch.bool)
    for word in _SINGULAR_VERBS | _PLURAL_VERBS:
        is_verb |= texts == _ID[word]
    return torch.where(is_verb.any(1), is_verb.int().argmax(1), -1)


def prompts_before_the_verb(texts: torch.Tensor) -> list[torch.Tensor]:
    """Each text cut just before its verb: the prompts a model must continue with the verb's right form.

    Example:
        >>> [decode(p) for p in prompts_before_the_verb(encode("<bos> near the dogs the cat purrs .")[None])]
        ['<bos> near the dogs the cat']
    """
    return [row[:int(v)] for row, v in zip(texts, verb_position(texts), strict=True)]


class Verdict(NamedTuple):
    """What :func:`check_sentences` finds in one text: its phrase structure, and whether it is right."""

    structure: str
    well_formed: bool
    agrees: bool


def _read(words: list[str]) -> Verdict:
    """Read one text's words after ``<bos>`` up to and including the first ``.``: phrase by phrase."""
    parts, numbers, i, verb_plural = [], {}, 0, None
    while i < len(words) and words[i] != ".":
        word = words[i]
        if word in PREPOSITIONS or word in ("the", "a"):
            kind = "P" if word in PREPOSITIONS else "S"
            i += kind == "P"
            j = i + 1  # a noun phrase: determiner, up to one size, up to one colour, in that order, a noun
            if i >= len(words) or words[i] not in ("the", "a"):
                return Verdict(" ".join(parts + ["?"]), False, False)
            if j < len(words) and words[j] in ("small", "big"):
                j += 1
            if j < len(words) and words[j] in ("black", "white"):
                j += 1
            noun = words[j] if j < len(words) else ""
            if noun not in NOUNS and noun not in NOUNS.values() or (words[i] == "a" and noun not in NOUNS):
                return Verdict(" ".join(parts + ["?"]), False, False)
            parts.append(kind)
            if kind == "S":
                numbers["S"] = noun in NOUNS.values()
            i = j + 1
        elif word in _SINGULAR_VERBS | _PLURAL_VERBS:
            parts.append("V")
            verb_plural = word in _PLURAL_VERBS
            i += 1
        elif word == "softly":
            parts.append("A")
            i += 1
        else:  # a noun without its determiner, a stray word
            return Verdict(" ".join(parts + ["?"]), False, False)
    structure = " ".join(parts)
    well_formed = i < len(words) and structure in STRUCTURES
    return Verdict(structure, well_formed, well_formed and numbers.get("S") == verb_plural)


def check_sentences(texts) -> list[Verdict]:
    """Check what a model wrote: is each text a sentence of the grammar, and does its verb agree with its subject?

    Built step by step in ``notebooks/15_generation.ipynb``. A text is read from after ``<bos>`` to its first
    ``.``, phrase by phrase: noun phrases (a determiner, at most one size and one colour adjective in that
    order, a noun, and "a" only before a singular noun), prepositions, the verb, "softly". It is
    **well-formed** when its phrase structure is one of the grammar's (:data:`~attention_lib.training.grammar.
    STRUCTURES`) and it ends with ``.``; it **agrees** when it is well-formed and its verb has its subject's
    number.

    Args:
        texts: ``(N, L)`` token ids, a list of 1-D tensors, or a list of strings; ``<bos>`` first.

    Returns:
        One :class:`Verdict` per text.

    Example:
        >>> [tuple(v) for v in check_sentences(["<bos> near the dogs the cat purrs .",
        ...                                     "<bos> near the dogs the cat purr .",
        ...                                     "<bos> the cat purrs the ."])]
        [('P S V', True, True), ('P S V', True, False), ('S V ?', False, False)]
    """
    rows = [t if isinstance(t, str) else decode(t) for t in texts]
    verdicts = []
    for row in rows:
        words = row.split()
        if not words or words[0] != "<bos>":
            verdicts.append(Verdict("?", False, False))
            continue
        verdicts.append(_read(words[1:]))
    return verdicts


def rates(verdicts: Sequence[Verdict]) -> dict[str, float]:
    """The shares ``{"well-formed": ..., "agreeing": ...}`` of a list of verdicts.

    Example:
        >>> rates(check_sentences(["<bos> the cat purrs .", "<bos> the cat purr ."]))
        {'well-formed': 1.0, 'agreeing': 0.5}
    """
    n = max(1, len(verdicts))
    return {"well-formed": sum(v.well_formed for v in verdicts) / n, "agreeing": sum(v.agrees for v in verdicts) / n}


def subject_position(texts: torch.Tensor) -> torch.Tensor:
    """``(N,)``: where each text's subject noun is, the first noun that no preposition claims (``-1``: none).

    Example:
        >>> subject_position(encode("<bos> near the dogs the small cat purrs .")[None]).tolist()
        [6]
    """
    found = []
    for row in texts.tolist():
        claimed, at = False, -1
        for i, word in enumerate(VOCAB[t] for t in row):
            if word in PREPOSITIONS:
                claimed = True
            elif word in NOUNS or word in NOUNS.values():
                if not claimed:
                    at = i
                    break
                claimed = False
        found.append(at)
    return torch.tensor(found, dtype=torch.long)
