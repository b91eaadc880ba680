"""Measuring what an agreement model does: its accuracy, and where its verb looks, per sentence structure.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. A claim such as "this head finds the subject"
is only as good as its measurement: :func:`probe_agreement` measures it on fresh sentences of any structures,
including structures a model never trained on and structures the task itself never makes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...validation import check_index
from ..grammar import AGREEMENT, NOUNS, AgreementTask


@dataclass(frozen=True)
class StructureProbe:
    """The measurements of one model on sentences of one structure (all shares in 0..1).

    Attributes:
        structure: e.g. ``"P S V"``.
        example: one of the sentences, with its verb left open.
        accuracy: the share of verbs given the right form.
        on_subject: the share of sentences where the verb's strongest key, in the probed head, is the subject.
        on_first_noun: the same for the first noun of the sentence (the subject only if it comes first).
        weight_on_subject: the mean weight the verb puts on the subject, in the probed head.
        first_noun_rule: how often "copy the number of the first noun" is right.
        nearest_noun_rule: how often "copy the number of the nearest noun before the verb" is right.
        follows_first_noun: how often the model's answer is the first noun's number (right or not).
    """

    structure: str
    example: str
    accuracy: float
    on_subject: float
    on_first_noun: float
    weight_on_subject: float
    first_noun_rule: float
    nearest_noun_rule: float
    follows_first_noun: float = float("nan")


def subject_shares(model, task: AgreementTask = AGREEMENT, *, n: int = 500, seed: int = 0) -> torch.Tensor:
    """``(layers, H)``: for each head, the share of the task's held-out sentences whose verb looks hardest at the
    subject (its verb row's strongest key is the subject).

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> subject_shares(load_trained("agreement").model).shape
        torch.Size([2, 2])
    """
    x, _ = task.sample(n, torch.Generator().manual_seed(seed), "heldout")
    parse = task.parse(x)
    with torch.no_grad():
        maps = model(x).attention  # one (N, H, L, L) per layer
    rows = torch.arange(n)
    return torch.stack([(w[rows, :, parse.verb].argmax(-1) == parse.subject[:, None]).float().mean(0)
                        for w in maps])  # (layers, H)


def subject_head(model, task: AgreementTask = AGREEMENT, *, n: int = 500, seed: int = 0) -> tuple[int, int]:
    """``(layer, head)`` whose verb row looks hardest at the subject most often, on the task's held-out sentences
    (the largest of :func:`subject_shares`).

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> subject_head(load_trained("agreement").model)
        (1, 0)
    """
    shares = subject_shares(model, task, n=n, seed=seed)
    best = int(shares.argmax())
    return best // shares.shape[1], best % shares.shape[1]


def probe_agreement(model, structures: Sequence[str], *, layer: int, head: int, n: int = 1000, seed: int = 12,
                    adjectives: float | None = None, task: AgreementTask = AGREEMENT) -> list[StructureProbe]:
    """Measure ``model`` on ``n`` fresh sentences of each structure: accuracy, and where one head's verb looks.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``.

    Args:
        model: a :class:`~attention_lib.encoder.TinyTransformer` trained on an agreement task.
        structures: the structures to probe, e.g. ``["P S V", "P P P P S V"]`` (any that fit in ``max_len``).
        layer, head: the head whose verb row is measured.
        n: sentences per structure.
        seed: their seed; a structure gets the same sentences whatever other structures are listed.
        adjectives: the chance of each adjective slot (default: as the task draws them; ``0`` for none).
        task: the agreement task whose vocabulary the model reads.

    Returns:
        One :class:`StructureProbe` per structure, in order.

    Raises:
        ValueError: for a structure that does not fit, or a layer or head out of range.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> row = probe_agreement(load_trained("agreement").model, ["P S V"], layer=1, head=0, n=200)[0]
        >>> row.structure, row.accuracy > 0.9, row.on_subject > 0.9
        ('P S V', True, True)
    """
    config = model.config
    for name, value, size in (("layer", layer, config["num_layers"]), ("head", head, config["num_heads"])):
        check_index(value, name, size)
    results = []
    for structure in structures:
        kwargs = {} if adjectives is None else {"adjectives": adjectives}
        # One generator per structure, seeded by the seed and the structure: a structure's sentences do not depend
        # on which other structures are listed, and two structures do not share their random draws.
        g = torch.Generator().manual_seed(seed + zlib.crc32(structure.encode()))
        x, y = task.sentences([structure], n, g, **kwargs)
        results.append(StructureProbe(structure, " ".join(task.decode(x[0])),
                                      **_measure(model, x, y, layer, head, task)[0]))
    return results


def _number(task: AgreementTask) -> torch.Tensor:
    """``(V,)``: 1 for a plural noun, 0 for a singular one, -1 for every other token."""
    plural = {task.vocab.index(w): int(w in NOUNS.values()) for pair in NOUNS.items() for w in pair}
    return torch.tensor([plural.get(i, -1) for i in range(len(task.vocab))])


def _measure(model, x: torch.Tensor, y: torch.Tensor, layer: int, head: int, task: AgreementTask
             ) -> tuple[dict, torch.Tensor]:
    """The shares of :class:`StructureProbe` on the sentences ``x (n, L)`` with targets ``y (n, L)``, and whether
    the verb's strongest key is an attractor, a noun whose number is not the subject's (``(n,)`` bool)."""
    number = _number(task)
    parse = task.parse(x)
    n = x.shape[0]
    rows = torch.arange(n)
    answer = y[rows, parse.verb]  # (n,)
    with torch.no_grad():
        out = model(x)
    said = out.logits[rows, parse.verb].argmax(-1)  # the model's answer: 0 singular, 1 plural
    verb_row = out.attention[layer][rows, head, parse.verb]  # (n, L): where the verb looks
    strongest = verb_row.argmax(-1)
    is_noun = (number[x] >= 0) & (torch.arange(x.shape[1]) < parse.verb[:, None])  # nouns before the verb
    nearest = torch.where(is_noun, torch.arange(x.shape[1]), -1).max(1).values
    strongest_number = number[x[rows, strongest]]
    on_attractor = (strongest_number >= 0) & (strongest_number != number[x[rows, parse.subject]])
    return {"accuracy": float((said == answer).float().mean()),
            "on_subject": float((strongest == parse.subject).float().mean()),
            "on_first_noun": float((strongest == parse.first_noun).float().mean()),
            "weight_on_subject": float(verb_row[rows, parse.subject].mean()),
            "first_noun_rule": float((number[x[rows, parse.first_noun]] == answer).float().mean()),
            "nearest_noun_rule": float((number[x[rows, nearest]] == answer).float().mean()),
            "follows_first_noun": float((number[x[rows, parse.first_noun]] == said).float().mean())}, on_attractor


@dataclass(frozen=True)
class AttractionProbe:
    """One model on sentences of one structure with a given number of attractors (all shares in 0..1).

    An **attractor** is a distractor noun whose number disagrees with the subject's ("the key to the *cabinets*
    are", Linzen, Dupoux & Goldberg, 2016, after Bock & Miller, 1991).

    Attributes:
        structure: e.g. ``"P P P S V"``.
        attractors: how many of its distractors disagree with the subject.
        accuracy: the share of verbs given the right form.
        on_subject: the share of sentences where the verb's strongest key, in the probed head, is the subject.
        on_attractor: the share where it is an attractor (a noun of the other number).
        weight_on_subject: the mean weight the verb puts on the subject, in the probed head.
    """

    structure: str
    attractors: int
    accuracy: float
    on_subject: float
    on_attractor: float
    weight_on_subject: float


def probe_attraction(model, structures: Sequence[str], *, layer: int, head: int, n: int = 500, seed: int = 30,
                     adjectives: float | None = None, task: AgreementTask = AGREEMENT) -> list[AttractionProbe]:
    """Measure ``model`` by the number of attractors: for each structure, ``n`` fresh sentences with each number.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. For a structure with ``p`` distractors,
    sentences with exactly ``0, 1, ..., p`` attractors (which distractors disagree is drawn at random).

    Args:
        model: a :class:`~attention_lib.encoder.TinyTransformer` trained on an agreement task.
        structures: the structures to probe (any that fit in ``max_len``).
        layer, head: the head whose verb row is measured.
        n: sentences per structure and number of attractors.
        seed: their seed; each (structure, number) gets its own sentences, whatever else is listed.
        adjectives: the chance of each adjective slot (default: as the task draws them; ``0`` for none).
        task: the agreement task whose vocabulary the model reads.

    Returns:
        One :class:`AttractionProbe` per structure and number of attractors, in order.

    Raises:
        ValueError: for a structure that does not fit, or a layer or head out of range.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> rows = probe_attraction(load_trained("agreement").model, ["S P V"], layer=1, head=0, n=100)
        >>> [(r.structure, r.attractors) for r in rows], rows[0].accuracy > 0.9
        ([('S P V', 0), ('S P V', 1)], True)
    """
    config = model.config
    for name, value, size in (("layer", layer, config["num_layers"]), ("head", head, config["num_heads"])):
        check_index(value, name, size)
    kwargs = {} if adjectives is None else {"adjectives": adjectives}
    results = []
    for structure in structures:
        for m in range(structure.split().count("P") + 1):
            g = torch.Generator().manual_seed(seed + zlib.crc32(f"{structure}/{m}".encode()))
            x, y = task.sentences([structure], n, g, attractors=m, **kwargs)
            shares, on_attractor = _measure(model, x, y, layer, head, task)
            results.append(AttractionProbe(structure, m, shares["accuracy"], shares["on_subject"],
                                           float(on_attractor.float().mean()), shares["weight_on_subject"]))
    return results


def format_probes(probes: Sequence[StructureProbe], *, example: bool = False) -> str:
    """The probes as a table, one line per structure (and, if asked, an example sentence under each).

    Columns: the accuracy; how often the verb's strongest key is the subject, or the first noun; the mean
    weight on the subject.

    Example:
        >>> print(format_probes([StructureProbe("P S V", "near the dogs the cat purr(s)", 1.0, 0.98, 0.0, 0.9,
        ...                                     0.5, 1.0)]))
        structure     accuracy  looks at subject  looks at first noun  weight on subject
        P S V            100 %              98 %                  0 %               0.90
    """
    def pct(share: float) -> str:
        return f"{round(100 * share):d} %"

    lines = [f"{'structure':12s}  accuracy  looks at subject  looks at first noun  weight on subject"]
    for p in probes:
        lines.append(f"{p.structure:12s}  {pct(p.accuracy):>8s}  {pct(p.on_subject):>16s}  "
                     f"{pct(p.on_first_noun):>19s}  {p.weight_on_subject:17.2f}")
        if example:
            lines.append(f"    e.g. {p.example}")
    return "\n".join(lines)
