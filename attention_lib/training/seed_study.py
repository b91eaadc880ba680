"""What a recipe gives over its seeds: train it on many seeds (or read a stored study) and say what holds on each.

A trained model is one draw of its recipe. A claim about what *the* model does is a claim about the recipe, so a
lesson states it over the recipe's seeds: "on 10 of 10 seeds", "from 0 to 43 % across seeds 0-9", or as seed 0's.
A :class:`SeedStudy` holds ``{seed: {figure: value}}``; it is made by :func:`run_study` from a callable
``seed -> {figure: value}`` (the lesson's own recipe and measurements), or read by :func:`load_study` from a data file
that ``python3 course.py remake`` wrote with :func:`write_study` when training every seed takes longer than a lesson
may. It prints a table per seed with the min-max (:meth:`SeedStudy.table`), counts the seeds a statement holds on
(:meth:`SeedStudy.holds`), and checks a band fitted on some seeds against the seeds it was not fitted on
(:meth:`SeedStudy.held_out`), so that a band is trusted only after seeds it has not seen fall inside it.

Example:
    >>> study = run_study(lambda seed: {"accuracy": 0.9 + seed / 100, "steps": 100 + 10 * seed}, range(4))
    >>> print(study.table(fmt={"accuracy": "{:.0%}"}))
       seed  accuracy    steps
          0       90%      100
          1       91%      110
          2       92%      120
          3       93%      130
    min-max   90%-93%  100-130
    >>> study.holds("accuracy", lambda v: v >= 0.91)
    (3, 4)
    >>> study.holds_text("accuracy", lambda v: v >= 0.91)
    'on 3 of 4 seeds (not on seed 0)'
    >>> study.span_text("accuracy", "{:.0%}")
    'from 90% to 93% across seeds 0-3'
    >>> print(study.held_out("steps", fit=[0, 1], margin=5))
    steps: fitted on seeds 0-1 (100-110), widened by 5 to 95-115; held-out seeds 2-3: 2 of 2 OUTSIDE (2: 120, 3: 130)
"""

from __future__ import annotations

import ast
import json
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

Figures = dict[str, float]


def _seeds_text(seeds) -> str:
    """``"seeds 0-9"`` for a run of consecutive seeds, else ``"seeds 0, 2, 5"`` (``"seed 3"`` for one)."""
    seeds = sorted(seeds)
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))


def _format(fmt: str | dict[str, str], figure: str, value: float) -> str:
    spec = fmt.get(figure, "{:.3g}") if isinstance(fmt, dict) else fmt
    return spec.format(value)


class HeldOut(NamedTuple):
    """A band fitted on some seeds, checked on the others (see :meth:`SeedStudy.held_out`).

    Attributes:
        figure: the figure's name.
        low, high: the band: the fitted seeds' min-max widened by ``margin`` on each side.
        margin: the headroom added on each side.
        fit: the seeds the band was fitted on.
        misses: ``{seed: value}`` of the held-out seeds outside the band (empty: the band holds).
        held: the held-out seeds.
    """

    figure: str
    low: float
    high: float
    margin: float
    fit: tuple[int, ...]
    misses: dict[int, float]
    held: tuple[int, ...]

    @property
    def ok(self) -> bool:
        """Whether every held-out seed lies in the band."""
        return not self.misses

    def __str__(self) -> str:
        fitted = (f"{self.figure}: fitted on {_seeds_text(self.fit)} ({self.low + self.margin:g}-"
                  f"{self.high - self.margin:g}), widened by {self.margin:g} to {self.low:g}-{self.high:g}")
        if self.ok:
            return f"{fitted}; held-out {_seeds_text(self.held)}: all {len(self.held)} inside"
        misses = ", ".join(f"{s}: {v:g}" for s, v in sorted(self.misses.items()))
        return (f"{fitted}; held-out {_seeds_text(self.held)}: {len(self.misses)} of {len(self.held)} OUTSIDE "
                f"({misses})")


class SeedStudy:
    """Figures of one recipe, seed by seed: ``{seed: {figure: value}}``.

    Args:
        runs: each seed's figures (a value is a number; a bool counts as 0 or 1).

    Raises:
        ValueError: when there is no seed, or the seeds do not all give the same figures.

    Example:
        >>> study = SeedStudy({0: {"loss": 1.5}, 1: {"loss": 1.7}})
        >>> study.seeds, study.figures, study.span("loss")
        ([0, 1], ['loss'], (1.5, 1.7))
    """

    def __init__(self, runs: dict[int, Figures]):
        if not runs:
            raise ValueError("a seed study needs at least one seed, got none; pass {seed: {figure: value}}.")
        names = [sorted(figures) for figures in runs.values()]
        if any(n != names[0] for n in names):
            odd = {seed: sorted(f) for seed, f in runs.items() if sorted(f) != names[0]}
            raise ValueError(f"every seed must give the same figures; seed {next(iter(runs))} gives {names[0]}, "
                             f"but {odd}. Return the same names from the recipe for every seed.")
        self.runs = {int(seed): dict(figures) for seed, figures in sorted(runs.items())}

    @property
    def seeds(self) -> list[int]:
        """The seeds, in order."""
        return list(self.runs)

    @property
    def figures(self) -> list[str]:
        """The figures' names, in the order the first seed gives them."""
        return list(next(iter(self.runs.values())))

    def values(self, figure: str) -> dict[int, float]:
        """``{seed: value}`` of ``figure``.

        Raises:
            ValueError: for a figure the study does not hold.
        """
        if figure not in self.figures:
            raise ValueError(f"the study has no figure {figure!r}; it has {self.figures}.")
        return {seed: float(figures[figure]) for seed, figures in self.runs.items()}

    def span(self, figure: str) -> tuple[float, float]:
        """``(min, max)`` of ``figure`` over the seeds."""
        values = self.values(figure).values()
        return min(values), max(values)

    def holds(self, figure: str, test: Callable[[float], bool]) -> tuple[int, int]:
        """``(k, n)``: ``test(value)`` holds on ``k`` of the ``n`` seeds."""
        values = self.values(figure)
        return sum(bool(test(v)) for v in values.values()), len(values)

    def holds_text(self, figure: str, test: Callable[[float], bool]) -> str:
        """``"on 10 of 10 seeds"``, or ``"on 8 of 10 seeds (not on seeds 3, 7)"``: how a lesson says it."""
        values = self.values(figure)
        failed = [seed for seed, v in values.items() if not test(v)]
        k, n = len(values) - len(failed), len(values)
        return f"on {k} of {n} seeds" + (f" (not on {_seeds_text(failed)})" if failed else "")

    def span_text(self, figure: str, fmt: str = "{:.3g}") -> str:
        """``"from 0% to 43% across seeds 0-9"`` (``fmt`` formats one value), or ``"... on every seed"`` when equal."""
        low, high = (fmt.format(v) for v in self.span(figure))
        if low == high:
            return f"{low} on every one of {_seeds_text(self.seeds)}"
        return f"from {low} to {high} across {_seeds_text(self.seeds)}"

    def table(self, figures: Iterable[str] | None = None, fmt: str | dict[str, str] = "{:.3g}") -> str:
        """A printable table: one row per seed, one column per figure, and a last row with each min-max.

        Args:
            figures: the columns (default: every figure).
            fmt: a format for every value, or ``{figure: format}`` (the others: ``"{:.3g}"``).
        """
        figures = list(figures or self.figures)
        rows = [["seed", *figures]]
        rows += [[str(seed), *(_format(fmt, f, self.runs[seed][f]) for f in figures)] for seed in self.seeds]
        spans = [self.span(f) for f in figures]
        rows.append(["min-max", *(_span(_format(fmt, f, lo), _format(fmt, f, hi))
                                  for f, (lo, hi) in zip(figures, spans, strict=True))])
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)

    def subset(self, seeds: Iterable[int]) -> SeedStudy:
        """The study of ``seeds`` only."""
        seeds = list(seeds)
        unknown = sorted(set(seeds) - set(self.runs))
        if unknown:
            raise ValueError(f"seeds {unknown} are not in the study; it has {self.seeds}.")
        return SeedStudy({seed: self.runs[seed] for seed in seeds})

    def held_out(self, figure: str, fit: Iterable[int], margin: float = 0.0) -> HeldOut:
        """Fit a band on the seeds ``fit`` (their min-max, widened by ``margin`` each side) and check the others.

        Args:
            figure: the figure.
            fit: the seeds the band is fitted on; every other seed of the study is held out.
            margin: the headroom on each side, in the figure's own unit (a share: 0.05 is 5 points).

        Returns:
            a :class:`HeldOut`: the band, and the held-out seeds outside it (``.ok``: none).

        Raises:
            ValueError: when ``fit`` is empty, names a seed the study lacks, or leaves no seed held out.
        """
        fit = tuple(sorted(fit))
        held = tuple(s for s in self.seeds if s not in fit)
        if not fit or not held:
            raise ValueError(f"fit the band on some seeds and hold out the rest; got fit={list(fit)} of "
                             f"{self.seeds}, leaving {list(held)} held out.")
        low, high = self.subset(fit).span(figure)
        low, high = low - margin, high + margin
        values = self.values(figure)
        misses = {s: values[s] for s in held if not low - 1e-12 <= values[s] <= high + 1e-12}
        return HeldOut(figure, low, high, margin, fit, misses, held)

    def to_dict(self) -> dict[int, Figures]:
        """``{seed: {figure: value}}``, a copy."""
        return {seed: dict(figures) for seed, figures in self.runs.items()}


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low}-{high}"


def run_study(figures: Callable[[int], Figures], seeds: Iterable[int], *, progress: bool = False,
              save_to: str | Path | None = None, note: str = "") -> SeedStudy:
    """Train a recipe on each seed and collect what it gives.

    Args:
        figures: ``seed -> {figure: value}``: trains the lesson's recipe with this seed and measures it.
        seeds: the seeds (10 or more where a model trains in seconds).
        progress: print each seed's figures as they come (for a long study run by hand).
        save_to, note: write the study so far to this file after each seed (:func:`write_study`, with ``note``).

    Returns:
        a :class:`SeedStudy`.

    Example:
        >>> run_study(lambda seed: {"twice": 2 * seed}, [1, 2]).values("twice")
        {1: 2.0, 2: 4.0}
    """
    runs = {}
    for seed in seeds:
        runs[seed] = dict(figures(seed))
        if progress:  # pragma: no cover - by hand
            print(f"seed {seed}: {runs[seed]}", flush=True)
        if save_to is not None:  # pragma: no cover - by hand: a long study keeps what it has
            write_study(SeedStudy(runs), save_to, note)
    return SeedStudy(runs)


def write_study(study: SeedStudy, path: str | Path, note: str = "") -> None:
    """Write ``study`` to ``path``: JSON for ``.json``, else a Python data file with ``STUDY = {...}``.

    ``note`` (how it was made: the command, torch's version, the CPU path) goes into the docstring or a ``"note"``.
    """
    path = Path(path)
    data = study.to_dict()
    if path.suffix == ".json":
        path.write_text(json.dumps({"note": note, "study": data}, indent=1) + "\n")
        return
    body = "{\n" + "".join(f" {seed!r}: {figures!r},\n" for seed, figures in data.items()) + "}"  # a seed a line
    said = "\n\n".join(textwrap.fill(part, 116) for part in (note or "A seed study.").split("\n\n"))
    path.write_text(f'"""{said}\n\nWritten by attention_lib.training.seed_study.write_study; do not edit by hand.'
                    f'\n"""\n'
                    f"# ruff: noqa: E501 - a data file: one line per seed\n\n"
                    f"#: ``{{seed: {{figure: value}}}}``, read by ``load_study``.\nSTUDY = {body}\n")


def load_study(path: str | Path) -> SeedStudy:
    """Read a study that :func:`write_study` wrote (``.json``, or a ``.py`` data file, read without running it).

    Raises:
        ValueError: when the file holds no study.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "study.py"
        >>> write_study(SeedStudy({0: {"loss": 1.5}, 1: {"loss": 1.75}}), path, "A toy study.")
        >>> load_study(path).span("loss")
        (1.5, 1.75)
    """
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
        data = data.get("study", data)
    else:
        data = None
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "STUDY" for t in node.targets):
                data = ast.literal_eval(node.value)
        if data is None:
            raise ValueError(f"{path} holds no `STUDY = {{seed: {{figure: value}}}}`; write it with write_study.")
    return SeedStudy({int(seed): figures for seed, figures in data.items()})


def study_main(figures: Callable[[int], Figures], seeds, stored, note: str, argv=None) -> None:  # pragma: no cover
    """A lesson's ``remake study-NN``: train ``seeds`` (or ``--seeds``), writing ``stored`` (or ``--to``) per seed."""
    import argparse
    parser = argparse.ArgumentParser(description="Train the recipe on each seed and store what it gives.")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(seeds), help="the seeds to run")
    parser.add_argument("--to", default=str(stored), help="the file to write (default: the stored study)")
    run_study(figures, (args := parser.parse_args(argv)).seeds, progress=True, save_to=args.to, note=note)
