"""Subject-verb agreement: sentences whose verb must find its subject, wherever the grammar puts it.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``, with the course's cats and dogs. The model
reads a sentence whose verb is left open, ``purr(s)``, and chooses *purrs* (singular subject) or *purr*
(plural subject). A sentence is made of phrases, and its **structure** names them in order:

- ``S``: the subject, a noun phrase: a determiner, up to two adjectives, a noun ("the small black cat");
- ``P``: a prepositional phrase, a distractor noun with its own number ("near the dogs");
- ``V``: the verb; ``A``: the adverb "softly".

So "near the dogs the cat purr(s) softly" has the structure ``P S V A``. Up to three ``P`` come before the verb,
before or after the subject; then the verb may be followed by an ``A``, or, when at most two ``P`` came before it,
by an ``A`` or one more ``P`` (26 structures in all, :data:`STRUCTURES`). :data:`AGREEMENT` keeps whole structures
out of training (:data:`HELDOUT_STRUCTURES`): its held-out split is made only of them, so a model measured
there meets sentence shapes it never saw. :data:`SUBJECT_FIRST` makes only the structures whose subject
comes first, as in "the cat near the dogs purr(s)", the data on which a model can take a shortcut.
:data:`ATTRACTORS` is :data:`AGREEMENT` trained on more sentences whose distractors disagree with the subject.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..validation import is_int
from .task import IGNORE, Task

NOUNS = {"cat": "cats", "dog": "dogs"}  # singular -> plural: the course's animals
PREPOSITIONS = ("near", "with", "behind")
SIZES, COLOURS = ("small", "big"), ("black", "white")  # adjectives, in the order English puts them
#: The verb slots and their (singular, plural) forms.
VERB_FORMS = {"purr(s)": ("purrs", "purr"), "bark(s)": ("barks", "bark"), "sit(s)": ("sits", "sit")}
VOCAB = ("<pad>", "the", "a", *[w for pair in NOUNS.items() for w in pair], *SIZES, *COLOURS, *PREPOSITIONS,
         *VERB_FORMS, "softly")
_ID = {w: i for i, w in enumerate(VOCAB)}
#: The chance that each adjective slot (size, colour) of a noun phrase is filled.
ADJECTIVE_RATE = 0.4

_BEFORE_VERB = tuple(" ".join(["P"] * i + ["S"] + ["P"] * (k - i)) for k in range(4) for i in range(k + 1))
#: Every structure the generator makes: up to three P before the verb, around the subject (S P P, P S P, ...);
#: then nothing, A or (after at most two P) another P.
STRUCTURES = tuple(f"{before} V{after}" for before in _BEFORE_VERB
                   for after in (("", " A", " P") if before.count("P") < 3 else ("", " A")))
#: The structures :data:`AGREEMENT` never trains on: it is measured on them.
HELDOUT_STRUCTURES = ("P S V P", "P S P V A", "P P S V P", "S P P V A", "P S P P V", "P P P S V A")


class Parse(NamedTuple):
    """What :meth:`AgreementTask.parse` finds in each sentence: structure, and where its words are.

    ``structure`` is a list of strings such as ``"P S V"``; the rest are ``(N,)`` positions (``-1`` if absent).
    """

    structure: list[str]
    subject: torch.Tensor
    verb: torch.Tensor
    first_noun: torch.Tensor


class AgreementTask(Task):
    """Choose the verb's form from its subject: sentences of the given structures (see the module docstring).

    Args:
        name: the task's name.
        structures: the structures the task makes, e.g. ``("S V", "P S V")``.
        heldout_structures: those of ``structures`` kept out of training; its held-out split is made of them.
            With none, examples are held out by a hash of their ids instead (about 1 in 8).
        recipe, examples: as for :class:`~attention_lib.training.task.Task`.
        attractors: how the training sentences' distractors take their number (see :meth:`sentences`): ``None``
            (the default), each a coin toss; ``"uniform"``, as many sentences with 0, 1, 2 or 3 attractors.
            The held-out split always tosses the coin, so that models trained either way are measured alike.

    Example:
        >>> ids = AGREEMENT.encode("near the dogs the small cat purr(s)")
        >>> AGREEMENT.parse(ids[None]).structure, int(AGREEMENT.parse(ids[None]).subject[0])
        (['P S V'], 5)
    """

    def __init__(self, name: str, structures: Sequence[str], heldout_structures: Sequence[str] = (), *,
                 recipe: dict, examples: Sequence[str] = (), attractors: int | str | None = None):
        super().__init__(name, VOCAB, ("singular", "plural"), 22, 0, recipe, examples)
        self.structures, self.heldout_structures = tuple(structures), tuple(heldout_structures)
        self.attractors = attractors
        self.training_structures = tuple(s for s in self.structures if s not in self.heldout_structures)
        for structure in self.structures:
            if self.longest(structure) > self.max_len:
                raise ValueError(f"structure {structure!r} can be {self.longest(structure)} tokens long, but the "
                                 f"task reads at most {self.max_len}.")

    @staticmethod
    def longest(structure: str) -> int:
        """The most tokens a sentence of ``structure`` can have (every adjective there)."""
        return sum({"S": 4, "P": 5, "V": 1, "A": 1}[part] for part in structure.split())

    # -- drawing sentences ------------------------------------------------------------------------------------
    def sentences(self, structures: Sequence[str], n: int, g: torch.Generator, *, adjectives: float = ADJECTIVE_RATE,
                  attractors: int | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` sentences, each of a structure drawn from ``structures`` (any, even ones the task never makes).

        Args:
            structures: structures such as ``"P P P S V"``; each must fit in ``max_len`` tokens.
            n: how many sentences.
            g: the random generator.
            adjectives: the chance that each adjective slot is filled (0: no adjectives).
            attractors: how many distractors disagree with the subject in number (the **attractors** of
                Linzen et al., 2016): ``None``, each distractor's number is a coin toss (the task's default);
                an int ``m``, exactly ``m`` of them, chosen at random (every structure needs ``m`` ``P``);
                ``"uniform"``, ``m`` drawn uniformly from ``0..`` the number of ``P``, for each sentence.

        Returns:
            ``(inputs (n, max_len), targets (n, max_len))``: the verb's target is 0 (singular) or 1 (plural).

        Raises:
            ValueError: for an unknown part, a structure that may not fit, or more attractors than distractors.
        """
        if not (attractors is None or attractors == "uniform" or is_int(attractors)):
            raise ValueError(f"attractors must be None, a number of distractors or 'uniform', but got {attractors!r}.")
        for structure in structures:
            parts = structure.split()
            if set(parts) - {"S", "P", "V", "A"} or parts.count("S") != 1 or parts.count("V") != 1:
                raise ValueError(f"a structure is made of S, P, V and A with one S and one V, e.g. 'P S V', "
                                 f"but got {structure!r}.")
            longest = sum({"S": 2, "P": 3, "V": 1, "A": 1}[p] + (2 * (p in "SP") if adjectives else 0) for p in parts)
            if longest > self.max_len:
                raise ValueError(f"structure {structure!r} can be {longest} tokens long, but the model reads at "
                                 f"most {self.max_len}; use fewer phrases or adjectives=0.")
            if is_int(attractors) and not 0 <= attractors <= parts.count("P"):
                raise ValueError(f"structure {structure!r} has {parts.count('P')} distractors (P), so it cannot have "
                                 f"attractors={attractors}; ask for 0 to {parts.count('P')}.")
        which = torch.randint(len(structures), (n,), generator=g)
        inputs = torch.full((n, self.max_len), self.pad)
        targets = torch.full((n, self.max_len), IGNORE)
        for k, structure in enumerate(structures):
            rows = (which == k).nonzero().squeeze(1)
            if len(rows):
                inputs[rows], targets[rows] = self._of_structure(structure, len(rows), g, adjectives, attractors)
        return inputs, targets

    def _of_structure(self, structure: str, n: int, g: torch.Generator, adjectives: float, attractors=None):
        """``n`` sentences of one structure, at once: word slots, some left empty, then closed up to the left."""

        def draw(words) -> torch.Tensor:  # (n,) random words among ``words``
            return torch.tensor([_ID[w] for w in words])[torch.randint(len(words), (n,), generator=g)]

        def noun_phrase(plural: torch.Tensor):  # determiner, size, colour, noun: 4 slots
            noun = torch.where(plural, draw(list(NOUNS.values())), draw(list(NOUNS)))
            det = torch.where(plural | (torch.rand(n, generator=g) < 0.5), _ID["the"], _ID["a"])  # "a cat" only
            filled = [torch.rand(n, generator=g) < adjectives for _ in range(2)]
            return [det, draw(SIZES), draw(COLOURS), noun], [always, *filled, always]

        always = torch.ones(n, dtype=torch.bool)
        plural = torch.rand(n, generator=g) < 0.5  # the subject's number: the answer
        disagree = None  # (n, P): which distractors disagree with the subject (None: a coin toss for each)
        if attractors is not None:
            p = structure.split().count("P")
            m = (torch.randint(p + 1, (n,), generator=g) if attractors == "uniform"
                 else torch.full((n,), int(attractors)))  # (n,): how many disagree
            rank = torch.rand(n, p, generator=g).argsort(1).argsort(1)  # (n, P): a random order of the distractors
            disagree = rank < m[:, None]  # the first m of that order disagree
        slots, present, verb_slot, distractor = [], [], None, 0
        for part in structure.split():
            if part == "S":
                words, shown = noun_phrase(plural)
            elif part == "P":
                number = (torch.rand(n, generator=g) < 0.5 if disagree is None  # a distractor: its own number
                          else plural ^ disagree[:, distractor])
                distractor += 1
                words, shown = noun_phrase(number)
                words, shown = [draw(PREPOSITIONS), *words], [always, *shown]
            elif part == "V":
                verb_slot = len(slots)
                words, shown = [draw(list(VERB_FORMS))], [always]
            else:
                words, shown = [torch.full((n,), _ID["softly"])], [always]
            slots += words
            present += shown
        slots, present = torch.stack(slots, 1), torch.stack(present, 1)  # (n, slots)
        order = torch.argsort((~present).int(), dim=1, stable=True)  # the words present first, in their order
        ids = slots.gather(1, order).masked_fill(~present.gather(1, order), self.pad)
        ids = torch.cat([ids, torch.full((n, max(0, self.max_len - ids.shape[1])), self.pad)], 1)[:, :self.max_len]
        targets = torch.full((n, self.max_len), IGNORE)
        verb_at = present[:, :verb_slot].sum(1)  # the words present before the verb
        targets[torch.arange(n), verb_at] = plural.long()  # only the verb is scored: 0 = singular, 1 = plural
        return ids, targets

    def draw(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return self.sentences(self.structures, n, g)

    def sample(self, n: int, g: torch.Generator, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Held out by structure: training draws only training structures, held out only held-out ones."""
        if not self.heldout_structures:
            return super().sample(n, g, split)
        if split == "train":
            return self.sentences(self.training_structures, n, g, attractors=self.attractors)
        return self.sentences(self.heldout_structures, n, g)

    def is_heldout(self, ids: torch.Tensor) -> torch.Tensor:
        """``(N,)`` bool: a held-out structure (or, for a task without any, the hash of the ids)."""
        if not self.heldout_structures:
            return super().is_heldout(ids)
        return torch.tensor([s in self.heldout_structures for s in self.parse(ids).structure], dtype=torch.bool)

    # -- reading sentences ------------------------------------------------------------------------------------
    def parse(self, ids: torch.Tensor) -> Parse:
        """Find each sentence's structure, subject, verb and first noun in ``ids (N, L)``.

        The subject is the noun that no preposition claims: after a preposition, the next noun is its object.
        This works on any sentence of the vocabulary, also on structures the generator never makes.

        Example:
            >>> p = AGREEMENT.parse(AGREEMENT.encode("the cat near the dogs purr(s) softly")[None])
            >>> p.structure, p.subject.tolist(), p.verb.tolist(), p.first_noun.tolist()
            (['S P V A'], [1], [5], [1])
        """
        structures, subject, verb, first = [], [], [], []
        for row in ids.tolist():
            parts, claimed, s, v, f = [], False, -1, -1, -1
            for i, token in enumerate(self.vocab[t] for t in row):
                if token in PREPOSITIONS:
                    parts.append("P")
                    claimed = True
                elif token in ("the", "a") and not claimed:
                    parts.append("S")
                elif token in NOUNS or token in NOUNS.values():
                    f = i if f < 0 else f
                    if not claimed and s < 0:
                        s = i
                        if not parts or parts[-1] != "S":
                            parts.append("S")
                    claimed = False
                elif token in VERB_FORMS:
                    v = i if v < 0 else v
                    parts.append("V")
                elif token == "softly":
                    parts.append("A")
            structures.append(" ".join(parts))
            subject.append(s)
            verb.append(v)
            first.append(f)
        return Parse(structures, torch.tensor(subject), torch.tensor(verb), torch.tensor(first))

    def answer_words(self, tokens: Sequence[str], best: Sequence[int]) -> list[str]:
        """The verb's filled-in form at the verb, ``""`` elsewhere."""
        return [VERB_FORMS[t][b] if t in VERB_FORMS else "" for t, b in zip(tokens, best, strict=True)]

    def answer_text(self, tokens: Sequence[str], answers: Sequence[str]) -> str:
        """The sentence with its verb filled in."""
        return " ".join(a or t for t, a in zip(tokens, answers, strict=True))


_RECIPE = {"embed_dim": 32, "num_heads": 2, "num_layers": 2, "mlp_dim": 64, "steps": 300, "batch_size": 128,
           "lr": 6e-3}
#: Agreement with the subject anywhere; whole structures held out to test on.
AGREEMENT = AgreementTask("agreement", STRUCTURES, HELDOUT_STRUCTURES, recipe=_RECIPE, examples=(
    "near the dogs the cat purr(s)", "the small black cat purr(s)", "behind a cat the dogs bark(s)",
    "with the cats a white dog near the cats sit(s) softly", "the dogs near a cat bark(s) softly"))
#: Agreement with the subject anywhere, trained on as many sentences with 0, 1, 2 or 3 attractors (distractors whose
#: number disagrees with the subject's) instead of a coin toss for each distractor: lesson 12's training change.
ATTRACTORS = AgreementTask("agreement_attractors", STRUCTURES, HELDOUT_STRUCTURES, recipe=_RECIPE,
                           examples=AGREEMENT.examples, attractors="uniform")
#: Agreement where the subject always comes first: the shortcut "look at the first noun" always works, and is
#: learned in fewer steps.
SUBJECT_FIRST = AgreementTask("agreement_subject_first", [s for s in STRUCTURES if s.startswith("S")],
                              recipe=_RECIPE | {"steps": 100}, examples=AGREEMENT.examples)
