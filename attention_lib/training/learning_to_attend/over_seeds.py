"""Lesson 12's interventions and their controls on every seed of the recipe: what the prose may claim.

Built for ``notebooks/12_learning_to_attend.ipynb`` and its deep dive. One trained model is one draw of the recipe;
a sentence about what *the* agreement model does is a sentence about the recipe, so it is measured here on the seeds
:data:`SEEDS` of both recipes (two blocks, and one), with :func:`measure_controls`, and stored by
``python3 course.py remake seeds-12`` (a few minutes) in ``over_seeds_measured.py``, which the lesson reads with
:func:`load_seed_studies` (a :class:`~attention_lib.training.seed_study.SeedStudy` per recipe).

Each figure is a share in 0..1, on held-out structures with three distractors, all three attractors (``"... 3"``)
or two of them and one noun that agrees with the subject (``"... 2"``):

- ``accuracy``, ``singular``, ``plural``: right answers, and on the sentences with a singular / plural subject;
- ``forced onto subject``: the head's verb row forced onto the subject (a ceiling: it puts the subject's number in);
- ``forced onto agreeing noun`` (2): forced onto the noun that agrees with the subject *but is not it*: the control
  position; ``forced onto attractor`` (2): forced onto an attractor;
- ``removed``: the verb row's weight on the attractors taken away; ``placebo``: the same weight taken from words that
  carry no number (prepositions, adjectives, *the*); ``zeroed``: the verb row set to zero;
- ``patched``: the head's output at the verb from the agreeing counterpart (sufficiency: an upper bound);
  ``donor same`` / ``donor opposite``: from an unrelated counterpart whose subject has the same / the other number;
- ``reverse``: of the errors (wrong here, right on the counterpart), the share the counterpart makes when given this
  head's output from the sentence (noising: how much of the error runs through the head); ``reverse other``: the
  same with the other head of that layer; ``reverse both``: with every head of the layer at once.
- ``removed matched``: as much weight taken from the attractors as the placebo can take from the number-free words
  (``placebo weight``, less than ``attractor weight``): the removal and its placebo moving the same weight.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ...interventions import _hooked, edit_head, force_onto, remove_keys, remove_weight, zero_rows
from ...patching import from_donors, patch_head, pick_donors, record_head
from ..grammar import AGREEMENT, PREPOSITIONS, AgreementTask
from ..seed_study import SeedStudy, run_study
from .attraction import HELDOUT_THREE
from .causes import _sentences, attractor_keys
from .controls import agreeing_counterpart
from .probes import _number, subject_head
from .recipe import evaluate, train

#: The seeds of each recipe the study trains: 12 (each trains in seconds).
SEEDS = tuple(range(12))
#: The recipes: ``num_layers`` of :func:`~attention_lib.training.learning_to_attend.recipe.train` on ``agreement``.
RECIPES = {"two blocks": None, "one block": 1}
#: Seeds the study never saw, trained for their held-out accuracy only: the check of the accuracy band.
CHECK_SEEDS = (12, 13, 14, 15)
#: The accuracy band's headroom beyond the twelve seeds' range, on each side.
HEADROOM = 0.04
STORED = Path(__file__).with_name("over_seeds_measured.py")
#: The columns of the lesson's seed tables, ``{table: {short name: figure}}``.
TABLES = {
    "forcing": {"layer": "layer", "head": "head", "held-out": "held-out accuracy", "right": "accuracy 3",
                "subject": "forced onto subject 3", "right 2": "accuracy 2", "subject 2": "forced onto subject 2",
                "agreeing 2": "forced onto agreeing noun 2", "attractor 2": "forced onto attractor 2"},
    "patching": {"right": "accuracy 3", "patched": "patched 3", "donor same": "donor same 3",
                 "donor other": "donor opposite 3"},
    "removal": {"weight": "attractor weight 3", "right": "accuracy 3", "removed": "removed 3",
                "placebo w": "placebo weight 3", "placebo": "placebo 3", "matched": "removed matched 3",
                "reverse": "reverse 3", "other head": "reverse other 3", "both": "reverse both 3"}}


def _number_free(task: AgreementTask, x: torch.Tensor) -> torch.Tensor:
    """``(N, L)`` bool: words that carry no number (prepositions, adjectives, *the*, *softly*), the placebo's keys."""
    free = [w for w in task.vocab if w in PREPOSITIONS or w in ("the", "small", "big", "black", "white", "softly")]
    return torch.isin(x, torch.tensor([task.vocab.index(w) for w in free]))


def _right(model, x, rows, verb, answer, *interventions) -> torch.Tensor:
    """``(N,)`` bool: the verb's answer right, with the interventions (context managers) in force."""
    with torch.no_grad():
        if not interventions:
            return model(x).logits[rows, verb].argmax(-1) == answer
        with interventions[0]:
            return _right(model, x, rows, verb, answer, *interventions[1:])


def _share(flags: torch.Tensor) -> float:
    return float(flags.float().mean()) if flags.numel() else math.nan


def measure_controls(model, *, n: int = 300, seed: int = 70, task: AgreementTask = AGREEMENT) -> dict[str, float]:
    """The figures of the module's docstring for one model, its verb-to-subject head found by
    :func:`~attention_lib.training.learning_to_attend.probes.subject_head` (``layer``, ``head``).

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> figures = measure_controls(load_trained("agreement").model, n=20)
        >>> figures["layer"], figures["head"], figures["forced onto subject 3"] >= 0.9
        (1, 0, True)
    """
    layer, head = subject_head(model, task)
    attention = model.blocks[layer].attention
    figures = {"layer": layer, "head": head, "held-out accuracy": evaluate(model, "agreement")["sequence_accuracy"]}
    x, y = _sentences(task, HELDOUT_THREE, n * len(HELDOUT_THREE), seed, "3", attractors=3)
    parse = task.parse(x)
    rows, verb = torch.arange(len(x)), parse.verb
    answer = y[rows, verb]
    clean, nouns, _ = agreeing_counterpart(task, x)
    right = _right(model, x, rows, verb, answer)
    with torch.no_grad():
        row = model(x).attention[layer][rows, head, verb]  # (N, L): where the verb looks
    weight = (row * nouns).sum(-1)  # (N,): on the attractors
    free = _number_free(task, x)
    matched = torch.minimum(weight, (row * free).sum(-1)).clamp(max=0.999)  # what both can lose: the placebo's amount

    def edited(edit) -> float:
        return _share(_right(model, x, rows, verb, answer, edit_head(attention, head, edit)))

    with torch.no_grad(), record_head(attention, head) as from_clean:
        clean_right = model(clean).logits[rows, verb].argmax(-1) == answer
    errors = ~right & clean_right
    other = 1 - head if model.config["num_heads"] == 2 else None

    def reverse(h: int) -> float:
        with torch.no_grad(), record_head(attention, h) as source:
            model(x)
        noised = _right(model, clean, rows, verb, answer, patch_head(attention, h, source[0], rows=verb))
        return _share(~noised[errors])

    def reverse_all() -> float:  # every head of the layer at once: its whole attention output at the verb
        with torch.no_grad(), _hooked(attention, list(range(model.config["num_heads"])), lambda w: w,
                                      lambda outputs: kept.append(outputs) or outputs):
            model(x)
        swap = lambda outputs: torch.where((torch.arange(outputs.shape[2]) == verb[:, None])[:, None, :, None],
                                           kept[0], outputs)  # noqa: E731
        with _hooked(attention, list(range(model.config["num_heads"])), lambda w: w, swap):
            noised = _right(model, clean, rows, verb, answer)
        return _share(~noised[errors])

    kept: list[torch.Tensor] = []
    figures |= {
        "accuracy 3": _share(right), "singular 3": _share(right[answer == 0]), "plural 3": _share(right[answer == 1]),
        "on subject 3": _share(row.argmax(-1) == parse.subject), "attractor weight 3": float(weight.mean()),
        "placebo weight 3": float(matched.mean()),
        "forced onto subject 3": edited(lambda w: force_onto(w, rows=verb, keys=parse.subject)),
        "removed 3": edited(lambda w: remove_keys(w, rows=verb, keys=nouns)),
        "placebo 3": edited(lambda w: remove_weight(w, rows=verb, keys=free, amount=weight.clamp(max=0.999))),
        "removed matched 3": edited(lambda w: remove_weight(w, rows=verb, keys=nouns, amount=matched)),
        "zeroed 3": edited(lambda w: zero_rows(w, rows=verb)),
        "patched 3": _share(_right(model, x, rows, verb, answer,
                                   patch_head(attention, head, from_clean[0], rows=verb))),
        "errors 3": int(errors.sum()), "reverse 3": reverse(head),
        "reverse other 3": reverse(other) if other is not None else math.nan, "reverse both 3": reverse_all()}
    for name, same in (("donor same 3", True), ("donor opposite 3", False)):
        donated = from_donors(from_clean[0], pick_donors(answer, same=same, seed=seed), verb)
        figures[name] = _share(_right(model, x, rows, verb, answer, patch_head(attention, head, donated, rows=verb)))
    x, y = _sentences(task, HELDOUT_THREE, n * len(HELDOUT_THREE), seed, "2", attractors=2)
    parse = task.parse(x)
    answer = y[rows, parse.verb]
    attractors = attractor_keys(task, x, parse.subject)
    agreeing = (_number(task)[x] >= 0) & ~attractors  # (N, L): nouns of the subject's number, the subject too
    agreeing[rows, parse.subject] = False
    for name, keys in (("forced onto subject 2", parse.subject),
                       ("forced onto agreeing noun 2", agreeing.int().argmax(1)),
                       ("forced onto attractor 2", attractors.int().argmax(1))):
        figures[name] = _share(_right(model, x, rows, parse.verb, answer, edit_head(
            attention, head, lambda w, keys=keys: force_onto(w, rows=parse.verb, keys=keys))))
    figures["accuracy 2"] = _share(_right(model, x, rows, parse.verb, answer))
    return figures


def study_recipe(recipe: str, seeds=SEEDS, *, n: int = 300, progress: bool = False) -> SeedStudy:
    """Train ``agreement`` with ``recipe``'s number of blocks on each seed and :func:`measure_controls` the model."""
    torch.use_deterministic_algorithms(True)
    return run_study(lambda seed: measure_controls(train("agreement", seed=seed, num_layers=RECIPES[recipe]).model,
                                                   n=n), seeds, progress=progress)


def renamed(study: SeedStudy, columns: dict[str, str]) -> SeedStudy:
    """The figures ``columns`` names, each under its short name (``{short: figure}``), for a table that fits a page.

    Example:
        >>> study = SeedStudy({0: {"forced onto subject 3": 1.0, "layer": 1}})
        >>> renamed(study, {"subject": "forced onto subject 3"}).to_dict()
        {0: {'subject': 1.0}}
    """
    return SeedStudy({seed: {short: run[figure] for short, figure in columns.items()}
                      for seed, run in study.to_dict().items()})


def differences(study: SeedStudy, **pairs: tuple[str, str]) -> SeedStudy:
    """Per seed, figure ``a`` minus figure ``b`` for each ``name=(a, b)``: a claim that compares two interventions
    on one model, checked seed by seed.

    Example:
        >>> study = SeedStudy({0: {"a": 0.9, "b": 0.5}, 1: {"a": 0.7, "b": 0.6}})
        >>> differences(study, gain=("a", "b")).holds_text("gain", lambda v: v > 0)
        'on 2 of 2 seeds'
    """
    return SeedStudy({seed: {name: run[a] - run[b] for name, (a, b) in pairs.items()}
                      for seed, run in study.to_dict().items()})


def seed_table(study: SeedStudy, table: str, *, per_seed: bool = True) -> str:
    """One of :data:`TABLES` for ``study``: a row per seed and the min-max, or (``per_seed=False``) the min-max only.

    Example:
        >>> print(seed_table(load_seed_studies()["one block"], "patching", per_seed=False))
           seed    right   patched  donor same  donor other
        min-max  23%-36%  63%-100%    62%-100%        0%-6%
    """
    columns = TABLES[table]
    fmt = {name: "{:.0%}" for name in columns if name not in ("layer", "head", "weight", "placebo w")}
    text = renamed(study, columns).table(fmt={**fmt, "weight": "{:.2f}", "placebo w": "{:.2f}"})
    lines = text.splitlines()
    return text if per_seed else "\n".join((lines[0], lines[-1]))


def seed_claims(study: SeedStudy) -> list[str]:
    """The lesson's comparisons, seed by seed: each intervention against its control, as a range over the seeds."""
    d = differences(study, control=("forced onto agreeing noun 2", "forced onto subject 2"),
                    donor=("donor same 3", "patched 3"), placebo=("placebo 3", "accuracy 3"),
                    matched=("removed matched 3", "placebo 3"), plural=("plural 3", "singular 3"))
    return ["forced onto the agreeing noun, minus onto the subject: " + d.span_text("control", "{:+.0%}"),
            "patched from an unrelated donor, minus from the counterpart: " + d.span_text("donor", "{:+.0%}"),
            "placebo, minus untouched: " + d.span_text("placebo", "{:+.0%}"),
            "the same weight off the attractors, minus the placebo: " + d.span_text("matched", "{:+.0%}"),
            "more often right after a plural subject than a singular one: " + d.holds_text("plural", lambda v: v > 0)]


def accuracy_band():
    """The two-block recipe's held-out accuracy band: the twelve seeds' range widened by :data:`HEADROOM`, checked
    on :data:`CHECK_SEEDS` (a :class:`~attention_lib.training.seed_study.HeldOut`)."""
    from .over_seeds_measured import CHECKED

    runs = {seed: {"held-out accuracy": run["held-out accuracy"]} for seed, run in
            load_seed_studies()["two blocks"].to_dict().items()}
    study = SeedStudy({**runs, **{seed: {"held-out accuracy": value} for seed, value in CHECKED.items()}})
    return study.held_out("held-out accuracy", fit=SEEDS, margin=HEADROOM)


def within_seed_band(value: float) -> str:
    """Whether a run's held-out accuracy lies in :func:`accuracy_band`, said with the band's seeds and headroom.

    Example:
        >>> within_seed_band(0.5)[:7]
        'OUTSIDE'
    """
    band = accuracy_band()
    low, high = band.low, band.high
    inside = low <= value <= high
    return (f"{'within' if inside else 'OUTSIDE'} the {low:.0%}-{high:.0%} of the recipe's seeds 0-11 plus "
            f"{round(100 * HEADROOM)} points each side; {band}")


def load_seed_studies() -> dict[str, SeedStudy]:
    """The stored studies, ``{recipe: SeedStudy}``, as :func:`main` wrote them (``course.py remake seeds-12``).

    Example:
        >>> studies = load_seed_studies()
        >>> sorted(studies), studies["two blocks"].seeds == list(SEEDS)
        (['one block', 'two blocks'], True)
    """
    from .over_seeds_measured import STUDIES

    return {recipe: SeedStudy(runs) for recipe, runs in STUDIES.items()}


def _written(studies: dict[str, dict[int, dict[str, float]]], checked: dict[int, float]) -> str:
    """The text of ``over_seeds_measured.py``: one wrapped dict per seed, shares to four decimals."""
    lines = ["STUDIES = {"]
    for recipe, runs in studies.items():
        lines.append(f"    {recipe!r}: {{")
        for seed, run in runs.items():
            items = [f"{k!r}: {round(v, 4) if isinstance(v, float) else v!r}," for k, v in run.items()]
            line = f"        {seed}: {{"
            for item in items:  # whole items per line, never a key split
                if len(line) + len(item) > 114:
                    lines.append(line.rstrip())
                    line = " " * 12
                line += item + " "
            lines.append(line.rstrip() + "},")
        lines.append("    },")
    here = "attention_lib.training.learning_to_attend.over_seeds"
    return (f'"""Lesson 12\'s seed study, written by `python -m {here}`\n(torch {torch.__version__}); do not edit by '
            f'hand.\n"""\n\n#: ``{{recipe: {{seed: {{figure: value}}}}}}``.\n' + "\n".join(lines) + "\n}\n"
            f"#: The two-block recipe's held-out accuracy on seeds the study never saw (``CHECK_SEEDS``).\n"
            f"CHECKED = {checked!r}\n")


def main() -> None:  # pragma: no cover - run by `python3 course.py remake seeds-12`: a few minutes on 2 cores
    studies = {recipe: study_recipe(recipe, progress=True).to_dict() for recipe in RECIPES}
    checked = {seed: round(evaluate(train("agreement", seed=seed).model, "agreement")["sequence_accuracy"], 4)
               for seed in CHECK_SEEDS}
    STORED.write_text(_written(studies, checked))


if __name__ == "__main__":  # pragma: no cover
    main()
