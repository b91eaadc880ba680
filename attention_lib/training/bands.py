"""What training gives, as a band: each trained figure of a lesson, measured over seeds and CPU paths.

Shared by the lessons that train (12, 13 and 15): built step by step in
``notebooks/12_learning_to_attend.ipynb`` and ``notebooks/13_induction_heads.ipynb``. A model
trained for a few hundred steps is not bit-identical from one CPU to another: vectorised kernels differ in their
last bits, and training amplifies the difference (a held-out accuracy of 94.2 % on one machine is 94.1 % on
another). So a lesson prints each trained figure in a cell whose output is not compared, then checks it against
the band this recipe gives, with :func:`within_band`, in a cell that is: the statement it prints holds on any
machine whose run lies in the band, and fails the lesson's regression test when a run leaves it.

Each band rests on the range of one figure over the recipe's seeds :data:`SEEDS`, each on every CPU path of
:data:`CPU_PATHS` (``ATEN_CPU_CAPABILITY`` set before Python starts), on one thread as the lessons run. The min-max
of a few runs is not yet a claim another machine will meet, so the band a lesson claims is that range widened by a
stated margin (:meth:`Band.margin`: one unit as shown, or half the measured spread, whichever is larger; more for
the figures of :data:`WIDER`, with the reason), and the statement says the measured range, the margin and the
number of runs.
``python3 course.py remake bands-NN`` (:func:`main`) measures them again and rewrites ``bands_measured``, from the
lesson's ``training/<slug>/band_figures.py`` (found by :func:`lessons`): its ``LESSON``, a ``KINDS`` table (filled by
:func:`declare`), ``figures(seed) -> {name: value}``, and optionally its own ``SEEDS`` and the ``HELD_OUT`` seeds
its bands are then checked on (:func:`held_out`).
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import NamedTuple

import torch

from ._bands_file import WIDENED_FOR, WIDER, margin_seed_spread


def lessons() -> dict[int, str]:
    """Each lesson's figures: ``{lesson: module}``, every ``training/<slug>/band_figures.py`` by its ``LESSON``.

    A lesson that trains joins the band system by writing that module (lesson 15:
    ``attention_lib/training/generation/band_figures.py``).

    Example:
        >>> lessons()[13]
        'attention_lib.training.induction_heads.band_figures'
    """
    found = {}
    for path in sorted(Path(__file__).parent.glob("*/band_figures.py")):
        name = f"{__package__}.{path.parent.name}.band_figures"
        found[importlib.import_module(name).LESSON] = name
    return found

#: The CPU paths every band is measured on: ``ATEN_CPU_CAPABILITY``'s value (``None``: the machine's own).
CPU_PATHS = (None, "avx2", "default")
#: The seeds of the recipe a band is measured over (the lessons train with seed 0), unless the lesson's
#: ``band_figures.py`` names its own ``SEEDS`` (see :func:`lesson_seeds`).
SEEDS = (0, 1, 2, 3, 4)


def lesson_seeds(lesson: int) -> tuple[int, ...]:
    """The seeds ``lesson``'s bands are fitted on: its ``band_figures.SEEDS``, else :data:`SEEDS`.

    Example:
        >>> lesson_seeds(13), lesson_seeds(12)
        ((0, 1, 2, 3, 4), (0, 1, 2, 3, 4))
    """
    return tuple(getattr(importlib.import_module(lessons()[lesson]), "SEEDS", SEEDS))


def _seeds_of(name: str) -> tuple[int, ...]:
    kinds = all_kinds()
    return lesson_seeds(kinds[name][0]) if name in kinds else SEEDS


class Band(NamedTuple):
    """The range of one trained figure over the measured runs (:data:`WIDER` and :data:`WIDENED_FOR`: the reasons
    some bands claim more, kept in ``_bands_file``).

    Attributes:
        low, high: the smallest and the largest value measured.
        kind: ``"share"`` (a fraction, shown in whole percent), ``"step"`` (a training step) or ``"number"``.
        digits: for a number, the decimals it is shown with.
        seeds: ``"all"``: over every seed of :data:`SEEDS`; ``"0"``: over the CPU paths of seed 0 only (a figure
            that compares a run with the shipped model of seed 0, which other seeds need not match).
    """

    low: float
    high: float
    kind: str = "share"
    digits: int = 2
    seeds: str = "all"

    def shown(self) -> tuple[str, str, str]:
        """``(low, high, unit)`` rounded outwards, as the statement shows them."""
        if self.kind == "share":
            return f"{math.floor(100 * self.low + 1e-9):d}", f"{math.ceil(100 * self.high - 1e-9):d}", " %"
        if self.kind == "step":
            return f"{math.floor(self.low):d}", f"{math.ceil(self.high):d}", ""
        scale = 10 ** self.digits
        return (f"{math.floor(self.low * scale + 1e-9) / scale:.{self.digits}f}",
                f"{math.ceil(self.high * scale - 1e-9) / scale:.{self.digits}f}", "")

    def holds(self, value: float) -> bool:
        """Whether ``value`` lies in the band as shown (rounded outwards)."""
        low, high, _ = self.shown()
        scale = 100.0 if self.kind == "share" else 1.0
        return float(low) <= value * scale <= float(high)

    def margin(self, name: str = "") -> float:
        """How far the band claims beyond what was measured, on each side: one unit as shown or half the measured
        spread, whichever is larger; at least the :data:`WIDER` margin; and for a lesson that names ``MARGIN_SEEDS``,
        at least the whole spread of its fitted and margin seeds (:func:`margin_seed_spread`)."""
        unit = {"share": 0.01, "step": 5}.get(self.kind, 10.0 ** -self.digits)
        half = (self.high - self.low) / 2
        margin = max(unit, math.ceil(half) if self.kind == "step" else half)
        for suffix, (wider, _why) in WIDER.items():
            if name.endswith(suffix):
                margin = max(margin, wider)
        kinds = all_kinds()
        module = importlib.import_module(lessons()[kinds[name][0]]) if name in kinds else None
        return max(margin, margin_seed_spread(module, name, self))

    def widened(self, name: str = "") -> Band:
        """The band a lesson claims: the measured range plus :meth:`margin` on each side, kept inside what the
        figure can be (a share in 0..1, a number measured non-negative stays non-negative)."""
        margin = self.margin(name)
        low, high = self.low - margin, self.high + margin
        if self.kind == "share":
            low, high = max(low, 0.0), min(high, 1.0)
        elif self.low >= 0 and not name.split(": ")[-1].startswith("steps from"):  # a lag is signed
            low = max(low, 0.0)
        return self._replace(low=low, high=high)

    def runs(self, name: str = "") -> int:
        """How many runs the measured range rests on: each seed of the figure ``name``'s lesson (or seed 0 only) on
        each CPU path."""
        return len(CPU_PATHS) * (1 if self.seeds == "0" else len(_seeds_of(name)))


def declare(kinds: dict, name: str, kind: str = "share", digits: int = 2, seeds: str = "all") -> str:
    """Add the figure ``name`` to a lesson's ``kinds`` table, as ``(kind, digits, seeds)`` (see :class:`Band`).

    Returns:
        ``name``, so that a lesson keeps it as a constant.

    Example:
        >>> kinds = {}
        >>> declare(kinds, "reversal: held-out sequence accuracy"), kinds
        ('reversal: held-out sequence accuracy', {'reversal: held-out sequence accuracy': ('share', 2, 'all')})
    """
    kinds[name] = (kind, digits, seeds)
    return name


def all_kinds() -> dict[str, tuple[int, str, int, str]]:
    """Every figure of every lesson that :func:`lessons` finds: ``name: (lesson, kind, digits, seeds)``.

    Example:
        >>> all_kinds()["reversal: held-out sequence accuracy"]
        (12, 'share', 2, 'all')
    """
    return {name: (lesson, *kind) for lesson, module in lessons().items()
            for name, kind in importlib.import_module(module).KINDS.items()}


def largest_map_difference(mine, shipped, inputs: torch.Tensor, **kwargs) -> float:
    """The largest difference between two models' attention weights on ``inputs``, over every layer."""
    with torch.no_grad():
        pairs = zip(mine(inputs, **kwargs).attentions, shipped(inputs, **kwargs).attentions, strict=True)
        return max(float((a - b).abs().max()) for a, b in pairs)


def _runs(band: Band, name: str = "") -> str:
    paths = f"{len(CPU_PATHS)} CPU paths"
    seeds = _seeds_of(name)
    return f"seed 0 on {paths}" if band.seeds == "0" else f"seeds {seeds[0]}-{seeds[-1]} on {paths}"


def within_band(name: str, value: float) -> str:
    """A statement that ``value`` lies in the band measured for the trained figure ``name`` (or that it does not).

    Built step by step in ``notebooks/12_learning_to_attend.ipynb`` and ``notebooks/13_induction_heads.ipynb``: a
    lesson prints the exact figure in a cell that is not compared, then this statement in one that is.

    Args:
        name: the figure, a key of :data:`~attention_lib.training.bands_measured.BANDS`.
        value: what this run gives (a share as a fraction, a step, or a number).

    Returns:
        ``"within the 84-95 % this recipe gives (seeds 0-4 on 3 CPU paths, 15 runs: measured 86-94 %, plus a margin
        of 4 points each side)"``: the band claimed is the measured range widened by :meth:`Band.margin`, and the
        statement says both and how many runs the range rests on; or the same sentence starting with ``"OUTSIDE"``
        and ending with the value, which fails the lesson's comparison.

    Raises:
        ValueError: for a figure no band was measured for.

    Example:
        >>> said = within_band("reversal: held-out sequence accuracy", 1.0)
        >>> print(said.replace(" (", "\\n("))
        within the 99-100 % this recipe gives
        (seeds 0-4 on 3 CPU paths, 15 runs: measured 100 %, plus a margin of 1 point each side)
    """
    from .bands_measured import BANDS

    if name not in BANDS:
        raise ValueError(f"no band was measured for {name!r}; the figures with a band are {sorted(BANDS)}. Add it "
                         f"to its lesson's band_figures.py and run `python3 course.py remake bands-NN`.")
    measured = Band(*BANDS[name])
    band = measured.widened(name)
    low, high, unit = band.shown()
    said = (f"at {low}{unit}, as every run of this recipe gives" if low == high
            else f"within the {_span(low, high)}{unit} this recipe gives")
    why = f"{_runs(measured, name)}, {measured.runs(name)} runs: {_measured(measured)}, {_margin(measured, name)}"
    why += _held_out_said(name)
    if band.holds(value):
        return f"{said} ({why})"
    return (f"OUTSIDE the band: this run gives {value!r}, but the runs of this recipe give {_span(low, high)}{unit} "
            f"({why})")


def _held_out_said(name: str) -> str:
    """``"; held-out seeds 10-14 lie inside"`` for a figure of a lesson with held-out seeds (a test checks it)."""
    kinds = all_kinds()
    module = importlib.import_module(lessons()[kinds[name][0]]) if name in kinds else None
    seeds = getattr(module, "HELD_OUT", ())
    after = next((v for suffix, v in WIDENED_FOR.items() if name.endswith(suffix)), ())
    widened = f", seed {', '.join(map(str, after))} only since the band was widened for it" if after else ""
    return f"; held-out seeds {seeds[0]}-{seeds[-1]} lie inside{widened}" if seeds else ""


def _measured(band: Band) -> str:
    low, high, unit = band.shown()
    return f"measured {low}{unit}" if low == high else f"measured {_span(low, high)}{unit}"


def _margin(band: Band, name: str) -> str:
    margin = band.margin(name)
    if band.kind == "share":
        points = round(100 * margin)
        said = f"{points} point{'s' if points != 1 else ''}"
    elif band.kind == "step":
        said = f"{margin:g} steps"
    else:
        said = f"{margin:.{band.digits}f}"
    return f"plus a margin of {said} each side"


def _span(low: str, high: str) -> str:
    """``"84-95"``, or ``"-6 to 12"`` when the low end is negative."""
    return f"{low} to {high}" if low.startswith("-") else f"{low}-{high}"


def band_text(name: str) -> str:
    """The band of ``name`` as prose quotes it, e.g. ``"84-95 %"`` (or ``"100 %"``).

    Example:
        >>> band_text("reversal: held-out sequence accuracy")
        '99-100 %'
    """
    from .bands_measured import BANDS

    low, high, unit = Band(*BANDS[name]).widened(name).shown()
    return f"{low}{unit}" if low == high else f"{_span(low, high)}{unit}"


def held_out(lesson: int) -> dict[str, dict[int, float]]:
    """Each band of ``lesson`` checked on the seeds it was not fitted on: ``{figure: {seed: value}}`` of the runs
    that fall outside the band the lesson claims (empty: every held-out run lies inside).

    The runs of the lesson's ``band_figures.HELD_OUT`` seeds are read from the study its ``HELD_OUT_STUDY`` names.

    Example:
        >>> held_out(13), held_out(12)
        ({}, {})
    """
    from .bands_measured import BANDS
    from .seed_study import load_study

    module = importlib.import_module(lessons()[lesson])
    if not getattr(module, "HELD_OUT", ()):
        return {}
    study = load_study(module.HELD_OUT_STUDY).subset(module.HELD_OUT)
    misses = {}
    for name in module.KINDS:
        band = module.band(name)[1] if hasattr(module, "band") else Band(*BANDS[name]).widened(name)
        outside = {seed: v for seed, v in study.values(name).items() if not band.holds(v)}
        if outside:
            misses[name] = outside
    return misses


def main(argv=None) -> None:  # pragma: no cover - run by hand, minutes: every lesson, seed and CPU path
    """Measure the bands again (see :func:`attention_lib.training._bands_file.main`)."""
    from ._bands_file import main as measure

    measure(argv, lessons(), all_kinds(), {lesson: lesson_seeds(lesson) for lesson in lessons()}, CPU_PATHS)


if __name__ == "__main__":  # pragma: no cover
    main()
