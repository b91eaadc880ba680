"""Checks on the stored notebooks that strict nbval cannot make by itself (used by test_notebooks.py)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from course import all_notebooks  # noqa: F401  (the one list of notebooks, re-exported for the tests)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def unexecuted_cells(nb) -> list[int]:
    """Indices (among code cells) of non-empty code cells with no execution count.

    nbval silently skips comparing such cells, so a notebook saved with cleared outputs would pass
    strict nbval while checking nothing.
    """
    return [i for i, c in enumerate(_code_cells(nb)) if c.get("execution_count") is None]


def out_of_order(nb) -> bool:
    """True when the execution counts are not 1, 2, 3, ... in cell order (cells run by hand)."""
    counts = [c.get("execution_count") for c in _code_cells(nb)]
    return counts != list(range(1, len(counts) + 1))


def stored_errors(nb) -> list[int]:
    """Indices of code cells whose stored outputs contain an error or a traceback."""
    bad = []
    for i, cell in enumerate(_code_cells(nb)):
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) if out.get("output_type") == "stream" else ""
            if out.get("output_type") == "error" or "Traceback (most recent call last)" in text:
                bad.append(i)
    return bad


def unstable_outputs(nb) -> list[str]:
    """Outputs that would differ between runs: object addresses, or a compared cell ending with ';'."""
    problems = []
    for i, cell in enumerate(_code_cells(nb)):
        ignored = cell.source.lstrip().startswith("# NBVAL_IGNORE_OUTPUT")
        if cell.source.rstrip().endswith(";"):
            problems.append(f"code cell {i} ends with ';' (use plt.show() or assign the figure)")
        if ignored:
            continue
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            if re.search(r"\bat 0x[0-9a-fA-F]{6,}", text):
                problems.append(f"code cell {i} prints an object address")
    return problems


def read(path: Path):
    return nbformat.read(path, as_version=4)


def _image_outputs(nb):
    """``(where, output)`` for every output of ``nb`` that holds an image: in a cell, or saved in an explorer's
    widget state (the figure an explorer drew when the notebook was executed)."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if any(mime.startswith("image/") for mime in out.get("data", {})):
                yield f"cell {i}", out
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for model in state.values():
        if model.get("model_name") == "OutputModel":
            for out in model.get("state", {}).get("outputs", []):
                if any(mime.startswith("image/") for mime in out.get("data", {})):
                    yield "an explorer's saved figure", out


def figures_without_alt(nb) -> list[str]:
    """Where ``nb`` stores a figure without a text alternative (``output.metadata[mime]["alt"]``, written by
    ``attention_lib.plotting`` when the notebook is executed), or with a file name as its text.

    Cells are counted from 0, as nbformat counts them (the website and nbval count the same way).
    """
    missing = []
    for where, out in _image_outputs(nb):
        for mime in (m for m in out.get("data", {}) if m.startswith("image/")):
            alt = str((out.get("metadata", {}).get(mime) or {}).get("alt", "")).strip()
            if not alt or re.search(r"\.(png|jpe?g|gif|svg|webp)$", alt, flags=re.IGNORECASE):
                missing.append(where)
    return missing
