"""Writing :mod:`attention_lib.training.bands_measured`: the file the band system's measurement
(:func:`attention_lib.training.bands.main`, ``python3 course.py remake bands-NN``) leaves behind."""

from __future__ import annotations

import importlib

import torch


def write_bands(runs: dict[str, list[tuple[int, float]]], lessons, kinds: dict, cpu_paths,
                measured_seeds) -> None:  # pragma: no cover - by main
    """Rewrite :mod:`attention_lib.training.bands_measured` with the bands of ``runs`` (``name: [(seed, value)]``)
    for ``lessons`` (``kinds``: :func:`~attention_lib.training.bands.all_kinds`), keeping the bands of the other
    lessons as they are in the file now."""
    from pathlib import Path

    try:
        kept = importlib.reload(importlib.import_module(f"{__package__}.bands_measured")).BANDS
    except ImportError:
        kept = {}
    bands = {name: band for name, band in kept.items() if name in kinds and kinds[name][0] not in lessons}
    for name, values in runs.items():
        _, kind, digits, seeds = kinds[name]
        chosen = [v for s, v in values if seeds == "all" or s == 0]
        bands[name] = (min(chosen), max(chosen), kind, digits, seeds)
    text = format_bands(bands, torch.__version__, cpu_paths, measured_seeds, torch.backends.cpu.get_cpu_capability())
    Path(__file__).with_name("bands_measured.py").write_text(text)
    print(f"wrote {len(bands)} bands")


def format_bands(bands: dict, torch_version: str, cpu_paths, seeds, native: str) -> str:
    """The source of :mod:`attention_lib.training.bands_measured` for ``bands``, in lines under 120 characters."""
    paths = ", ".join(f"ATEN_CPU_CAPABILITY={p}" for p in cpu_paths if p)
    lines = [f"    {name!r}:\n        {bands[name]!r}," for name in sorted(bands)]
    return ('"""The measured bands of :mod:`attention_lib.training.bands`.\n\nWritten by `python -m '
            'attention_lib.training.bands`; do not edit by hand. Measured with torch\n'
            f'{torch_version}, one thread, seeds {seeds[0]}-{seeds[-1]}, on the CPU paths: native ({native}),\n{paths}.'
            '\n"""\n\n#: ``name: (low, high, kind, digits, seeds)``, see :class:`attention_lib.training.bands.Band`.\n'
            'BANDS = {\n' + "\n".join(lines) + "\n}\n")
