"""What the verb-to-subject head causes: the agreement models measured when that head is changed.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. Where a head looks, averaged over sentences, is a
correlation: a head that misses the subject at the same rate with or without attractors gives a flat average, and
still causes every error whose miss lands on an attractor. So the lesson changes the head and measures the
answer, with :func:`attention_lib.interventions.edit_head`:

- :func:`intervene_by_attractors`: by the number of attractors, where the verb looks when the answer is right and
  when it is wrong, and the accuracy with the head's verb row forced onto the subject, stripped of its weight on
  the attractors (renormalised), or zeroed;
- :func:`by_attractor_position`: the accuracy by where the attractors stand, before the subject, between subject and
  verb, or after the verb.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...interventions import edit_head, force_onto, remove_keys, zero_rows
from ...validation import check_index
from ..grammar import AGREEMENT, AgreementTask
from .probes import _number


@dataclass(frozen=True)
class Intervened:
    """One model on ``n`` sentences with ``attractors`` attractors (shares in 0..1; ``nan`` where no sentence counts).

    Attributes:
        attractors, n: the number of attractors, and of sentences.
        accuracy: the share of verbs given the right form, the model untouched.
        on_subject_right, on_subject_wrong: among the right answers, and among the wrong ones, the share whose verb's
            strongest key, in the head, is the subject.
        on_attractor_wrong: among the wrong answers, the share whose verb's strongest key is an attractor.
        wrong: how many answers are wrong.
        weight_on_attractors: the mean weight the verb puts on the attractors, in total.
        forced, removed, zeroed: the accuracy with the head's verb row forced onto the subject, with its weight on
            the attractors removed (the rest renormalised), and set to zero.
        misled: the accuracy with the verb row forced onto an attractor (the first; ``nan`` without attractors).
        singular, plural: the accuracy on the sentences whose subject is singular, and plural.
    """

    attractors: int
    n: int
    accuracy: float
    on_subject_right: float
    on_subject_wrong: float
    on_attractor_wrong: float
    wrong: int
    weight_on_attractors: float
    forced: float
    removed: float
    zeroed: float
    misled: float
    singular: float
    plural: float


def _share(flags: torch.Tensor) -> float:
    return float(flags.float().mean()) if flags.numel() else float("nan")


def _sentences(task: AgreementTask, structures: Sequence[str], n: int, seed: int, label: str, **kwargs):
    g = torch.Generator().manual_seed(seed + zlib.crc32(f"{'/'.join(structures)}/{label}".encode()))
    return task.sentences(list(structures), n, g, **kwargs)


def attractor_keys(task: AgreementTask, x: torch.Tensor, subject: torch.Tensor) -> torch.Tensor:
    """``(N, L)`` bool: the attractors of each sentence, nouns whose number is not the subject's.

    Example:
        >>> x = AGREEMENT.encode("near the dogs the cat purr(s)")[None]
        >>> attractor_keys(AGREEMENT, x, AGREEMENT.parse(x).subject)[0, :6].tolist()
        [False, False, True, False, False, False]
    """
    number = _number(task)[x]  # (N, L): 1 plural noun, 0 singular noun, -1 any other token
    return (number >= 0) & (number != number.gather(1, subject[:, None]))


def intervene_by_attractors(model, structures: Sequence[str], *, layer: int, head: int, n: int = 200,
                            seed: int = 70, adjectives: float | None = None,
                            task: AgreementTask = AGREEMENT) -> list[Intervened]:
    """Where the head's verb looks when the answer is right and when wrong, and the answer with that row changed.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. For each number ``m`` of attractors, ``n``
    sentences per structure with at least ``m`` distractors, each of a structure drawn at random among them.

    Args:
        model: a :class:`~attention_lib.encoder.TinyTransformer` trained on an agreement task, in eval mode.
        structures: the structures to draw from.
        layer, head: the head whose verb row is read and changed.
        n, seed: sentences per structure and number of attractors, and their seed.
        adjectives: the chance of each adjective slot (default: as the task draws them).
        task: the agreement task whose vocabulary the model reads.

    Returns:
        One :class:`Intervened` per number of attractors, from 0.

    Raises:
        ValueError: for a layer or head out of range, or a structure that does not fit.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> rows = intervene_by_attractors(load_trained("agreement").model, ["P S P V"], layer=1, head=0, n=50)
        >>> [r.attractors for r in rows], rows[1].forced
        ([0, 1, 2], 1.0)
    """
    check_index(layer, "layer", model.config["num_layers"])
    check_index(head, "head", model.config["num_heads"])
    attention = model.blocks[layer].attention
    kwargs = {} if adjectives is None else {"adjectives": adjectives}
    return [_intervene(model, attention, layer, head, m, task,
                       *_sentences(task, fit, n * len(fit), seed, str(m), attractors=m, **kwargs))
            for m in range(max(s.split().count("P") for s in structures) + 1)
            for fit in [[s for s in structures if s.split().count("P") >= m]]]


def _intervene(model, attention, layer: int, head: int, m: int, task: AgreementTask, x: torch.Tensor,
               y: torch.Tensor) -> Intervened:
    """:class:`Intervened` for the sentences ``x (N, L)`` with targets ``y`` and ``m`` attractors each."""
    parse = task.parse(x)
    rows = torch.arange(x.shape[0])
    answer = y[rows, parse.verb]  # (N,): 0 singular, 1 plural
    attractors = attractor_keys(task, x, parse.subject)  # (N, L)

    def right_with(edit=None):
        with torch.no_grad():
            if edit is None:
                out = model(x)
            else:
                with edit_head(attention, head, edit):
                    out = model(x)
        return out.logits[rows, parse.verb].argmax(-1) == answer, out

    right, out = right_with()
    verb_row = out.attention[layer][rows, head, parse.verb]  # (N, L): where the verb looks
    strongest = verb_row.argmax(-1)
    forced = right_with(lambda w: force_onto(w, rows=parse.verb, keys=parse.subject))[0]
    removed = right_with(lambda w: remove_keys(w, rows=parse.verb, keys=attractors))[0]
    zeroed = right_with(lambda w: zero_rows(w, rows=parse.verb))[0]
    first_attractor = attractors.int().argmax(1)  # (N,): the first attractor (0 where there is none)
    misled = right_with(lambda w: force_onto(w, rows=parse.verb, keys=first_attractor))[0] if m else right[:0]
    on_subject = strongest == parse.subject
    return Intervened(m, len(x), _share(right), _share(on_subject[right]), _share(on_subject[~right]),
                      _share(attractors[rows, strongest][~right]), int((~right).sum()),
                      float((verb_row * attractors).sum(-1).mean()), _share(forced), _share(removed),
                      _share(zeroed), _share(misled), _share(right[answer == 0]), _share(right[answer == 1]))


def format_interventions(rows: dict[str, Sequence[Intervened]], columns: Sequence[str]) -> str:
    """A table of :func:`intervene_by_attractors` results: one line per model and field, one column per count.

    ``columns`` are :class:`Intervened` (or :class:`~.controls.Patched`) fields; shares print as percentages,
    weights with two decimals.

    Example:
        >>> row = Intervened(1, 10, 0.9, 0.8, 0.1, 0.9, 1, 0.05, 1.0, 1.0, 0.6, 0.2, 0.9, 0.9)
        >>> print(format_interventions({"a model": [row]}, ["accuracy", "forced"]))
        attractors:              1
        a model, accuracy     90 %
        a model, forced      100 %
    """
    labels = [f"{label}, {column.replace('_', ' ')}" for label in rows for column in columns]
    width = max(len(label) for label in labels)
    counts = sorted({r.attractors for row in rows.values() for r in row})
    lines = [f"{'attractors:':{width + 2}s}" + "".join(f"{m:>7d}" for m in counts)]
    for label, row in rows.items():
        by_count = {r.attractors: r for r in row}
        for column in columns:
            cells = []
            for m in counts:
                value = getattr(by_count[m], column) if m in by_count else None
                if value is None or value != value:  # absent, or nan (no sentence counts)
                    cells.append(f"{'-':>7s}")
                elif column.startswith("weight"):
                    cells.append(f"{value:7.2f}")
                else:
                    cells.append(f"{round(100 * value):5d} %")
            lines.append(f"{label + ', ' + column.replace('_', ' '):{width + 2}s}" + "".join(cells))
    return "\n".join(lines)


def by_attractor_position(model, structure: str, *, n: int = 2000, seed: int = 80, adjectives: float | None = None,
                          task: AgreementTask = AGREEMENT) -> dict[tuple[int, int, int], tuple[float, int]]:
    """The accuracy by where the attractors stand, on ``n`` sentences of ``structure`` (a coin toss per distractor).

    Built step by step in ``notebooks/12_learning_to_attend_deep_dive.ipynb``.

    Returns:
        ``{(before, between, after): (accuracy, sentences)}``: how many attractors stand before the subject, between
        subject and verb, and after the verb, for every combination the sentences hold.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> cells = by_attractor_position(load_trained("agreement").model, "P S V", n=100)
        >>> sorted(cells)
        [(0, 0, 0), (1, 0, 0)]
    """
    x, y = _sentences(task, [structure], n, seed, "position", **({} if adjectives is None else
                                                                  {"adjectives": adjectives}))
    parse = task.parse(x)
    rows = torch.arange(n)
    with torch.no_grad():
        right = model(x).logits[rows, parse.verb].argmax(-1) == y[rows, parse.verb]
    attractors = attractor_keys(task, x, parse.subject)
    at = torch.arange(x.shape[1])
    where = torch.stack([(attractors & (at < parse.subject[:, None])).sum(1),
                         (attractors & (at > parse.subject[:, None]) & (at < parse.verb[:, None])).sum(1),
                         (attractors & (at > parse.verb[:, None])).sum(1)], 1)  # (N, 3)
    cells = {}
    for key in sorted({tuple(r) for r in where.tolist()}):
        chosen = (where == torch.tensor(key)).all(1)
        cells[key] = (_share(right[chosen]), int(chosen.sum()))
    return cells


def format_positions(rows: dict[str, dict[tuple[int, int, int], tuple[float, int]]]) -> str:
    """A table of :func:`by_attractor_position` results: one line per model and structure, one cell per placement.

    A cell reads ``before/between/after: accuracy``, e.g. ``0/1/0: 92 %`` for one attractor between subject and verb.

    Example:
        >>> print(format_positions({"P S V": {(0, 0, 0): (1.0, 50), (1, 0, 0): (0.96, 50)}}))
        P S V   0/0/0: 100 %   1/0/0:  96 %
    """
    width = max(len(label) for label in rows)
    return "\n".join(f"{label:{width}s}" + "".join(f"   {b}/{m}/{a}: {round(100 * acc):3d} %"
                                                  for (b, m, a), (acc, _) in cells.items())
                     for label, cells in rows.items())
