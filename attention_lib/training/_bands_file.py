"""Measuring the bands and writing :mod:`attention_lib.training.bands_measured`: the band system's measurement
(:func:`main`, run as ``python -m attention_lib.training.bands``, ``python3 course.py remake bands-NN``) and the file
it leaves behind; with ``--held-out``, the runs of a lesson's held-out seeds, which its bands are checked on."""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import subprocess
import sys

import torch


def write_bands(runs: dict[str, list[tuple[int, float]]], lessons, kinds: dict, cpu_paths,
                measured_seeds) -> None:  # pragma: no cover - by main
    """Rewrite :mod:`attention_lib.training.bands_measured` with the bands of ``runs`` (``name: [(seed, value)]``)
    for ``lessons`` (``kinds``: :func:`~attention_lib.training.bands.all_kinds`), keeping every other band that a
    lesson still declares as it is in the file now."""
    from pathlib import Path

    try:
        kept = importlib.reload(importlib.import_module(f"{__package__}.bands_measured")).BANDS
    except ImportError:
        kept = {}
    bands = {name: band for name, band in kept.items() if name in kinds and name not in runs}
    for name, values in runs.items():
        _, kind, digits, seeds = kinds[name]
        chosen = [v for s, v in values if seeds == "all" or s == 0]
        bands[name] = (min(chosen), max(chosen), kind, digits, seeds)
    text = format_bands(bands, torch.__version__, cpu_paths, measured_seeds, torch.backends.cpu.get_cpu_capability())
    Path(__file__).with_name("bands_measured.py").write_text(text)
    print(f"wrote {len(bands)} bands")


def format_bands(bands: dict, torch_version: str, cpu_paths, seeds, native: str) -> str:
    """The source of :mod:`attention_lib.training.bands_measured` for ``bands``, in lines under 120 characters
    (``seeds``: one tuple for every lesson, or ``{lesson: seeds}``)."""
    paths = ", ".join(f"ATEN_CPU_CAPABILITY={p}" for p in cpu_paths if p)
    if isinstance(seeds, dict):
        said = "; ".join(f"lesson {lesson}: seeds {s[0]}-{s[-1]}" for lesson, s in sorted(seeds.items()))
    else:
        said = f"seeds {seeds[0]}-{seeds[-1]}"
    lines = [f"    {name!r}:\n        {bands[name]!r}," for name in sorted(bands)]
    return ('"""The measured bands of :mod:`attention_lib.training.bands`.\n\nWritten by `python -m '
            'attention_lib.training.bands`; do not edit by hand. Measured with torch\n'
            f'{torch_version}, one thread, {said},\non the CPU paths: native ({native}), {paths}.'
            '\n"""\n\n#: ``name: (low, high, kind, digits, seeds)``, see :class:`attention_lib.training.bands.Band`.\n'
            'BANDS = {\n' + "\n".join(lines) + "\n}\n")


def held_out(lesson: int) -> dict[str, dict[int, float]]:
    """Each band of ``lesson`` checked on the seeds it was not fitted on: ``{figure: {seed: value}}`` of the runs
    that fall outside the band the lesson claims (empty: every held-out run lies inside).

    The held-out runs are the lesson's ``band_figures.HELD_OUT`` seeds, read from the seed study its
    ``HELD_OUT_STUDY`` names (a file :func:`~attention_lib.training.seed_study.load_study` reads); a lesson without
    them has nothing held out.

    Example:
        >>> held_out(13), held_out(12)
        ({}, {})
    """
    from .bands import Band, lessons
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


def margin_seed_spread(name: str, band=None) -> float:
    """The spread of ``name`` over its lesson's fitted runs and one run of each ``MARGIN_SEEDS`` seed (read from
    the study its ``MARGIN_STUDY`` names): ``max - min``; 0 for a lesson without margin seeds. A seed beyond the
    five fitted lands outside their range often (one draw in three, for five draws), so a band that claims the
    seeds' whole spread again on each side is what the held-out seeds are then checked against."""
    from .bands import Band, all_kinds, lessons
    from .bands_measured import BANDS

    kinds = all_kinds()
    module = importlib.import_module(lessons()[kinds[name][0]]) if name in kinds else None
    if not getattr(module, "MARGIN_SEEDS", ()) or (band is None and name not in BANDS):
        return 0.0
    band = band or Band(*BANDS[name])
    found = _margin_values(module.MARGIN_STUDY, name)
    missing = sorted(set(module.MARGIN_SEEDS) - set(found))
    if missing:
        raise ValueError(f"{module.MARGIN_STUDY} lacks the margin seeds {missing} of {name!r}; run the lesson's "
                         f"study again (python3 course.py remake study-NN or held-out-NN).")
    values = [band.low, band.high, *(found[seed] for seed in module.MARGIN_SEEDS)]
    spread = max(values) - min(values)
    return float(math.ceil(spread)) if band.kind == "step" else spread


@functools.cache
def _margin_study(path):
    from .seed_study import load_study

    return load_study(path)


def _margin_values(path, name: str) -> dict[int, float]:
    return _margin_study(str(path)).values(name)


def _measure_one(lesson: int, seed: int, only: str = "") -> dict[str, float]:
    """Run ``lesson``'s trainings with ``seed`` in this process (its CPU path is set by its environment); ``only``:
    just the figures whose names start with it, for a lesson whose ``figures`` takes ``only=``."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # as the lessons run
    from .bands import lessons

    module = importlib.import_module(lessons()[lesson])
    return module.figures(seed, only=only) if only else module.figures(seed)


def _run_one(lesson: int, seed: int, env: dict, only: str = "") -> dict[str, float]:
    """One run in a fresh Python with the environment ``env`` (its CPU path)."""
    out = subprocess.run([sys.executable, "-m", "attention_lib.training.bands", "--one", str(lesson), str(seed),
                          *(["--only", only] if only else [])], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.splitlines()[-1])


def _measure_held_out(lesson: int) -> None:  # pragma: no cover - by main
    """Run ``lesson``'s held-out seeds on this machine's own path; write the study its ``HELD_OUT_STUDY`` names."""
    from .bands import lessons
    from .seed_study import SeedStudy, write_study

    module = importlib.import_module(lessons()[lesson])
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    runs = {}
    for seed in module.HELD_OUT:
        runs[seed] = _run_one(lesson, seed, env)
        print(f"lesson {lesson}, held-out seed {seed}: {runs[seed]}", flush=True)
    write_study(SeedStudy(runs), module.HELD_OUT_STUDY, f"Lesson {lesson}'s band figures on its held-out seeds, one "
                f"run each on this machine's own CPU path (torch {torch.__version__}, one thread).\n\nWritten by "
                f"`python -m attention_lib.training.bands --held-out --lesson {lesson}`.")


def main(argv=None) -> None:  # pragma: no cover - run by hand, minutes: every lesson, seed and CPU path
    """Measure the bands again: each lesson's figures for each seed, in a fresh Python per CPU path and seed."""
    import argparse

    from .bands import CPU_PATHS, all_kinds, lesson_seeds, lessons

    parser = argparse.ArgumentParser(description="Measure the bands of the trained figures of the lessons that train.")
    parser.add_argument("--lesson", type=int, nargs="+", default=sorted(lessons()), help="the lessons to measure")
    parser.add_argument("--one", nargs=2, type=int, metavar=("LESSON", "SEED"), help="measure one run, print JSON")
    parser.add_argument("--held-out", action="store_true", help="measure the lessons' held-out seeds, native path")
    parser.add_argument("--only", default="", help="measure only the figures whose names start with this")
    args = parser.parse_args(argv)
    missing = sorted(set(args.lesson) - set(lessons()))
    if missing:
        parser.error(f"lessons {missing} have no band figures: write attention_lib/training/<slug>/band_figures.py "
                     f"with LESSON, KINDS and figures(seed) (see this module's docstring); found {sorted(lessons())}.")
    if args.one:
        print(json.dumps(_measure_one(*args.one, only=args.only)))
        return
    if args.held_out:
        for lesson in args.lesson:
            _measure_held_out(lesson)
        return
    runs: dict[str, list[tuple[int, float]]] = {}
    for lesson in args.lesson:
        for path in CPU_PATHS:
            env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
            env |= {"ATEN_CPU_CAPABILITY": path} if path else {}
            for seed in lesson_seeds(lesson):
                found = _run_one(lesson, seed, env, args.only)
                for name, value in found.items():
                    runs.setdefault(name, []).append((seed, value))
                print(f"lesson {lesson}, CPU path {path or 'native'}, seed {seed}: {found}", flush=True)
    write_bands(runs, args.lesson, all_kinds(), CPU_PATHS, {lesson: lesson_seeds(lesson) for lesson in lessons()})
