"""Agreement attraction in the tiny transformer, by the number of attractors; and a training change against it.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. An **attractor** is a distractor noun whose number
disagrees with the subject's: in "the key to the cabinets are", *cabinets*. People make such errors when a noun
of the other number comes between subject and verb (Bock & Miller, 1991, "Broken agreement", *Cognitive
Psychology* 23), and Linzen, Dupoux & Goldberg (2016, "Assessing the ability of LSTMs to learn syntax-sensitive
dependencies", *TACL* 4) measured their LSTMs' agreement errors by the number of attractors.
:func:`by_attractors` does the same for our models: sentences with exactly ``0, 1, 2, ...`` attractors.

The training change, :data:`~attention_lib.training.grammar.ATTRACTORS`, trains on as many sentences with 0, 1, 2
and 3 attractors, instead of a coin toss for each distractor's number. :func:`run_study` compares it with the
recipe over the seeds :data:`SEEDS`, at the recipe's 300 steps and at 600; ``python3 course.py
remake attraction`` runs it (about half an hour on a 2-core CPU) and rewrites
:mod:`attention_lib.training.learning_to_attend.attraction_measured`, which the lesson reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..grammar import HELDOUT_STRUCTURES, STRUCTURES
from .probes import probe_attraction, subject_head
from .recipe import evaluate, train

#: Structures with three distractors: the training structures, and the held-out ones.
TRAINING_THREE = tuple(s for s in STRUCTURES if s.count("P") == 3 and s not in HELDOUT_STRUCTURES)
HELDOUT_THREE = tuple(s for s in HELDOUT_STRUCTURES if s.count("P") == 3)
#: Structures the generator never makes: four distractors, measured without adjectives (with them, too long).
BEYOND = ("P P P P S V", "P P S P P V", "S P P P P V", "P S P P V P", "P P S P V P")
#: The study: the recipe and the training change, at these numbers of steps, over these seeds.
STUDY_TASKS = ("agreement", "agreement_attractors")
STUDY_STEPS = (300, 600)
SEEDS = (0, 1, 2, 3, 4)


def by_attractors(model, structures: Sequence[str], *, layer: int | None = None, head: int | None = None,
                  n: int = 300, seed: int = 30, adjectives: float | None = None) -> dict[int, tuple[float, float]]:
    """Accuracy and where the verb looks, by the number of attractors, averaged over ``structures``.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. For each number ``m`` of attractors, every
    structure with at least ``m`` distractors contributes ``n`` sentences with exactly ``m`` (see
    :func:`~attention_lib.training.learning_to_attend.probes.probe_attraction`).

    Args:
        model: a :class:`~attention_lib.encoder.TinyTransformer` trained on an agreement task.
        structures: the structures to average over.
        layer, head: the head whose verb row is read (default: the model's verb-to-subject head,
            :func:`~attention_lib.training.learning_to_attend.probes.subject_head`).
        n, seed, adjectives: as for :func:`~attention_lib.training.learning_to_attend.probes.probe_attraction`.

    Returns:
        ``{m: (accuracy, on_subject)}``: the share of verbs given the right form, and the share of sentences whose
        verb's strongest key is the subject.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> rows = by_attractors(load_trained("agreement").model, ["S P V"], n=100)
        >>> sorted(rows), rows[0][0] > 0.9
        ([0, 1], True)
    """
    if layer is None or head is None:
        layer, head = subject_head(model)
    sums: dict[int, list[float]] = {}
    for probe in probe_attraction(model, structures, layer=layer, head=head, n=n, seed=seed, adjectives=adjectives):
        total = sums.setdefault(probe.attractors, [0.0, 0.0, 0])
        total[0] += probe.accuracy
        total[1] += probe.on_subject
        total[2] += 1
    return {m: (acc / count, subject / count) for m, (acc, subject, count) in sorted(sums.items())}


def format_attraction(rows: dict[str, dict[int, tuple[float, float]]]) -> str:
    """A table of :func:`by_attractors` results, one line per model: accuracy / verb on the subject, by attractors.

    Example:
        >>> print(format_attraction({"a model": {0: (1.0, 0.9), 1: (0.75, 0.5)}}))
        attractors:               0            1
        a model          100 %/ 90 %   75 %/ 50 %
    """
    width = max(len(label) for label in rows)
    counts = sorted({m for row in rows.values() for m in row})
    lines = [f"{'attractors:':{width + 2}s}" + "".join(f"{m:>13d}" for m in counts)]
    for label, row in rows.items():
        cells = "".join(f"  {round(100 * row[m][0]):3d} %/{round(100 * row[m][1]):3d} %" if m in row else " " * 13
                        for m in counts)
        lines.append(f"{label:{width + 2}s}" + cells)
    return "\n".join(lines)


def measure(model) -> dict:
    """What the study records of one model: its held-out accuracy, and :func:`by_attractors` on the held-out
    structures with three distractors and on the structures beyond the generator (no adjectives)."""
    layer, head = subject_head(model)
    return {"held-out accuracy": evaluate(model, "agreement")["sequence_accuracy"],
            "held-out": by_attractors(model, HELDOUT_THREE, layer=layer, head=head),
            "beyond": by_attractors(model, BEYOND, layer=layer, head=head, adjectives=0)}


def run_study(seeds: Sequence[int] = SEEDS, steps: Sequence[int] = STUDY_STEPS, tasks: Sequence[str] = STUDY_TASKS,
              *, verbose: bool = False) -> dict:
    """Train every task for every number of steps and every seed, and :func:`measure` each model.

    Returns:
        ``{(task, steps): {seed: measure(model)}}``.
    """
    import torch

    torch.use_deterministic_algorithms(True)
    study = {}
    for task in tasks:
        for count in steps:
            for seed in seeds:
                study.setdefault((task, count), {})[seed] = measure(train(task, seed=seed, steps=count).model)
                if verbose:
                    print(f"{task}, {count} steps, seed {seed}: {study[(task, count)][seed]}", flush=True)
    return study


def spread(study: dict, task: str, steps: int, part: str, which: int) -> dict[int, tuple[float, float, float]]:
    """``{m: (mean, lowest, highest)}`` over the seeds of ``study[(task, steps)]``, for ``part`` (``"held-out"`` or
    ``"beyond"``) and ``which`` (0: accuracy, 1: the verb's strongest key on the subject).

    Example:
        >>> study = {("agreement", 300): {0: {"beyond": {4: (0.4, 0.3)}}, 1: {"beyond": {4: (0.6, 0.5)}}}}
        >>> spread(study, "agreement", 300, "beyond", 0)
        {4: (0.5, 0.4, 0.6)}
    """
    runs = list(study[(task, steps)].values())
    return {m: (sum(v) / len(v), min(v), max(v)) for m in runs[0][part]
            for v in [[run[part][m][which] for run in runs]]}


def load_study() -> dict:
    """The stored study (:mod:`~attention_lib.training.learning_to_attend.attraction_measured`), as
    :func:`run_study` returns it.

    Built step by step in ``notebooks/12_learning_to_attend_deep_dive.ipynb``.

    Example:
        >>> sorted(load_study())[0]
        ('agreement', 300)
    """
    from .attraction_measured import STUDY

    return STUDY


def main() -> None:  # pragma: no cover - run by hand: about half an hour on a 2-core CPU
    import pprint
    from pathlib import Path

    import torch

    study = run_study(verbose=True)
    here = "attention_lib.training.learning_to_attend.attraction"
    text = (f'"""The attraction study of :mod:`{here}`.\n\nWritten by `python -m {here}` with torch '
            f'{torch.__version__}; do not edit by hand.\n"""\n\n'
            f"#: ``{{(task, steps): {{seed: measure(model)}}}}``, as :func:`run_study` of that module returns it.\n"
            "STUDY = "
            f'{pprint.pformat(study, width=116, sort_dicts=False)}\n')
    Path(__file__).with_name("attraction_measured.py").write_text(text)


if __name__ == "__main__":  # pragma: no cover
    main()
