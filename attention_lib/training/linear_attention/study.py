"""What the softmax buys, over seeds: lesson 19's four variants on lessons 13's and 15's tasks, and the sweep that
says why copying fails.

Two stored studies, written by ``python3 course.py remake study-19`` (about 25 minutes on one core):

- :data:`STORED` (:func:`load`), seeds :data:`STUDY_SEEDS`: for each variant of :data:`~.recipe.VARIANTS`, lesson
  13's induction task (the accuracy on the repeated part, also for short and long repeats) and lesson 15's grammar
  (the verb's agreement on training and held-out structures and by how far back the subject is). Bands are fitted on
  :data:`FIT_SEEDS` and checked on the others (:func:`bands_report`).
- :data:`SWEEP_STORED` (:func:`load_sweep`), seeds :data:`SWEEP_SEEDS`: the controlled sweep. The same model trained
  on repeats of 2 to 16 tokens, with a state of ``Dk x 32`` numbers per head for ``Dk`` in :data:`KEY_DIMS` (linear
  attention and the gated delta rule) beside the softmax model (whose cache grows with the text): the accuracy on
  the repeated part for each repeat length of :data:`REPEATS`. What changes between two rows is the state's size
  alone; the softmax row is the control, what the same model and recipe reach with attention over every token.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..induction_heads.recipe import evaluate_induction
from ..seed_study import SeedStudy, load_study, run_study
from .recipe import VARIANTS, agreement, copying_accuracy, train_copying, train_writer

#: The seeds of the main study; its bands are fitted on :data:`FIT_SEEDS` and checked on the rest.
STUDY_SEEDS = tuple(range(5))
FIT_SEEDS = (0, 1, 2)
#: The headroom each band gets on each side of what its fitted seeds span (5 points of a share).
MARGIN = 0.05
STORED = Path(__file__).with_name("study_measured.py")
#: The sweep: its seeds, the fixed-state layers' key sizes (each head's state is ``Dk x 32``), the repeat lengths
#: it is scored at (trained on 2 to 16), and its steps (more than lesson 13's 400, so that a short repeat is learnt
#: and a failure at a long one is the state's, not the training's).
SWEEP_SEEDS = (0, 1, 2)
KEY_DIMS = (8, 64)
REPEATS = (2, 4, 8, 12, 16)
SWEEP_STEPS = 600
SWEEP_STORED = Path(__file__).with_name("sweep_measured.py")

COPYING = "copying: accuracy on the repeated part"
SHORT, LONG = "copying: repeats of 6-8 tokens", "copying: repeats of 14-16 tokens"
AGREEMENT, HELD_OUT = "grammar: agreement", "grammar: agreement, held-out structures"
FAR = "grammar: agreement, subject 8+ back"
#: Every figure of a variant, in the order the tables show them.
FIGURES = (COPYING, SHORT, LONG, AGREEMENT, HELD_OUT, "grammar: agreement, subject 1-3 back",
           "grammar: agreement, subject 4-7 back", FAR)


def name(variant: str, figure: str) -> str:
    """The study's name of ``figure`` for ``variant``: ``"linear: copying: accuracy on the repeated part"``."""
    return f"{variant}: {figure}"


def seed_figures(seed: int) -> dict[str, float]:
    """Every figure of :data:`FIGURES` for every variant, trained with ``seed`` (8 trainings)."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    found = {}
    for variant in VARIANTS:
        model = train_copying(variant, seed=seed).model
        found[name(variant, COPYING)] = evaluate_induction(model)["repeated accuracy"]
        found[name(variant, SHORT)] = evaluate_induction(model, min_repeat=6, max_repeat=8)["repeated accuracy"]
        found[name(variant, LONG)] = evaluate_induction(model, min_repeat=14, max_repeat=16)["repeated accuracy"]
        measured = agreement(train_writer(variant, seed=seed).model)
        found[name(variant, AGREEMENT)] = measured["agreement"]
        found[name(variant, HELD_OUT)] = measured["agreement held out"]
        for distance in ("1-3", "4-7", "8+"):
            found[name(variant, f"grammar: agreement, subject {distance} back")] = measured[
                f"agreement, subject {distance} back"]
    return found


def sweep_name(variant: str, repeat: int, key_dim: int | None = None) -> str:
    """``"gated delta, state 8 x 32: repeat of 12"``, or ``"softmax: repeat of 12"`` (no fixed state)."""
    state = "" if key_dim is None else f", state {key_dim} x 32"
    return f"{variant}{state}: repeat of {repeat}"


def sweep_figures(seed: int) -> dict[str, float]:
    """The sweep for ``seed``: the softmax model, then linear attention and the gated delta rule with each key size
    of :data:`KEY_DIMS`, each trained on repeats of 2 to 16 tokens and scored at each length of :data:`REPEATS`."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    found = {}
    for variant, key_dims in (("softmax", (None,)), ("linear", KEY_DIMS), ("gated delta", KEY_DIMS)):
        for key_dim in key_dims:
            model = train_copying(variant, seed=seed, steps=SWEEP_STEPS, key_dim=key_dim, min_repeat=2,
                                  max_repeat=16).model
            for repeat in REPEATS:
                found[sweep_name(variant, repeat, key_dim)] = copying_accuracy(model, repeat)
    return found


def load() -> SeedStudy:
    """The stored study of the four variants (:data:`STORED`)."""
    return load_study(STORED)


def load_sweep() -> SeedStudy:
    """The stored sweep (:data:`SWEEP_STORED`)."""
    return load_study(SWEEP_STORED)


def table(study: SeedStudy, figure: str) -> str:
    """One figure of every variant, a column each, a row per seed and the min-max (shares as percentages).

    Example:
        >>> print(table(load(), COPYING).splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
        seed  softmax  linear  gated delta  hybrid
    """
    columns = {variant: name(variant, figure) for variant in VARIANTS}
    renamed = SeedStudy({seed: {v: f[n] for v, n in columns.items()} for seed, f in study.runs.items()})
    return renamed.table(fmt="{:.1%}")


#: What lesson 19 says of every seed: (what it says, the figure, the test each seed's value must pass).
CLAIMS = [
    ("softmax copies: above 90 % on the repeated part", name("softmax", COPYING), lambda v: v > 0.9),
    ("linear attention does not: below 50 %", name("linear", COPYING), lambda v: v < 0.5),
    ("nor does the gated delta rule: below 50 %", name("gated delta", COPYING), lambda v: v < 0.5),
    ("the hybrid does: above 90 %", name("hybrid", COPYING), lambda v: v > 0.9),
    *[(f"{variant}: agreement at least 99 %, the subject 8+ words back", name(variant, FAR), lambda v: v >= 0.99)
      for variant in VARIANTS],
    *[(f"{variant}: agreement at least 99 % on held-out structures", name(variant, HELD_OUT), lambda v: v >= 0.99)
      for variant in VARIANTS],
]


def claims_report(study: SeedStudy | None = None) -> str:
    """Each statement of :data:`CLAIMS`, the seeds it holds on, and the range of its figure: one line each.

    Example:
        >>> print(claims_report().splitlines()[0])  # doctest: +ELLIPSIS
        softmax copies: above 90 % on the repeated part ... on 5 of 5 seeds (...)
    """
    study = load() if study is None else study
    lines = []
    for said, figure, test in CLAIMS:
        low, high = study.span(figure)
        lines.append(f"{said:64s} {study.holds_text(figure, test)} ({low:.1%} to {high:.1%})")
    return "\n".join(lines)


def bands_report(study: SeedStudy | None = None, figure: str = COPYING, *, fit=FIT_SEEDS,
                 margin: float = MARGIN) -> str:
    """For each variant, ``figure``'s band fitted on ``fit`` (widened by ``margin``) and the held-out seeds against
    it (:meth:`~attention_lib.training.seed_study.SeedStudy.held_out`): one line each.

    Example:
        >>> print(bands_report().splitlines()[0])  # doctest: +ELLIPSIS
        softmax: copying: accuracy on the repeated part: fitted on seeds 0-2 (...
    """
    study = load() if study is None else study
    return "\n".join(str(_rounded(study.held_out(name(variant, figure), fit=fit, margin=margin)))
                     for variant in VARIANTS)


def _rounded(held):
    """A :class:`~attention_lib.training.seed_study.HeldOut` with its numbers to 3 decimals, as a lesson prints it."""
    return held._replace(low=round(held.low, 3), high=round(held.high, 3),
                         misses={s: round(v, 3) for s, v in held.misses.items()})


def sweep_curves(sweep: SeedStudy | None = None) -> dict[str, list[list[float]]]:
    """``{label: [accuracy at each of REPEATS, for each seed]}``: the softmax model, then each fixed state."""
    sweep = load_sweep() if sweep is None else sweep
    rows = {"softmax (its cache grows)": ("softmax", None)}
    rows |= {f"{v}, state {d} x 32": (v, d) for v in ("linear", "gated delta") for d in KEY_DIMS}
    return {label: [[sweep.runs[seed][sweep_name(v, r, d)] for r in REPEATS] for seed in sweep.seeds]
            for label, (v, d) in rows.items()}


def sweep_table(sweep: SeedStudy | None = None) -> str:
    """The sweep as a table: a row per model, a column per repeat length, the mean over seeds (and their range).

    Example:
        >>> print(sweep_table().splitlines()[0])  # doctest: +ELLIPSIS
        repeat of ...
    """
    curves = sweep_curves(sweep)
    width = max(map(len, curves))
    head = "repeat of".ljust(width) + "".join(f"{r:>18}" for r in REPEATS)
    lines = [head]
    for label, seeds in curves.items():
        cells = []
        for column in zip(*seeds, strict=True):
            mean = sum(column) / len(column)
            cells.append(f"{mean:.0%} ({min(column):.0%}-{max(column):.0%})".rjust(18))
        lines.append(label.ljust(width) + "".join(cells))
    return "\n".join(lines)


def plot_bands(figure: str = COPYING, study: SeedStudy | None = None, *, fit=FIT_SEEDS, margin: float = MARGIN):
    """Each variant's seeds of ``figure`` over its band fitted on ``fit`` (:func:`~attention_lib.plotting.
    linear_attention.plot_seed_bands`)."""
    from ...plotting.linear_attention import plot_seed_bands

    study = load() if study is None else study
    values = {variant: study.values(name(variant, figure)) for variant in VARIANTS}
    return plot_seed_bands(values, fit=fit, margin=margin, title=figure, ylabel=figure.split(": ")[-1])


def plot_sweep(sweep: SeedStudy | None = None):
    """The sweep (:func:`~attention_lib.plotting.linear_attention.plot_state_sweep`): copying against the repeated
    part's length, for each state size and the softmax model."""
    from ...plotting.linear_attention import plot_state_sweep

    sweep = load_sweep() if sweep is None else sweep
    seeds = _seeds_text(sweep.seeds)
    return plot_state_sweep(REPEATS, sweep_curves(sweep), title=f"Copying against the state's size ({seeds})")


def _seeds_text(seeds) -> str:
    return f"seeds {seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}"


def main(argv=None) -> None:  # pragma: no cover - run by hand (``python3 course.py remake study-19``)
    import argparse

    parser = argparse.ArgumentParser(description="Train lesson 19's variants on each seed and store what they give.")
    parser.add_argument("part", nargs="?", choices=("study", "sweep", "both"), default="both")
    parser.add_argument("--seeds", type=int, nargs="+", help="the seeds to run (default: the part's own)")
    args = parser.parse_args(argv)
    where = f"one run each on this machine's own CPU path (torch {torch.__version__}, one thread)"
    if args.part in ("study", "both"):
        note = (f"Lesson 19's four variants on lessons 13's and 15's tasks, {where}.\n\n"
                f"Written by `python3 course.py remake study-19`.")
        run_study(seed_figures, args.seeds or STUDY_SEEDS, progress=True, save_to=STORED, note=note)
    if args.part in ("sweep", "both"):
        note = (f"Lesson 19's sweep: copying against the state's size, beside the softmax model, {where}.\n\n"
                f"Written by `python3 course.py remake study-19`.")
        run_study(sweep_figures, args.seeds or SWEEP_SEEDS, progress=True, save_to=SWEEP_STORED, note=note)


if __name__ == "__main__":  # pragma: no cover
    main()
