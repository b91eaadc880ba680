"""Numbers in a lesson's prose are outputs: every quantitative claim of a markdown cell is printed by the notebook.

A claim is a number with a unit (``%``, ``x`` or ``×``, ``ms``, ``µs``, ``KiB``/``MiB``/``GiB``, ``MB``/``GB``):
"right in 91 % of the sentences", "1.09x as long", "2.0 GiB". Each must appear in an output of the same notebook (the
same unit, the same value at the prose's precision: "94 %" matches a printed "94.1%"), or stand in a paragraph that
cites a source listed in ``docs/citations.yml`` (a paper, a documentation page, an issue), the one list of sources the
lessons quote numbers from. There is no list of exceptions: a number that drifts when a notebook is re-executed
fails here, not in front of a reader. Ranges count both ends ("47-60 %", "47 % to 60 %").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))
CITATIONS = ROOT / "docs" / "citations.yml"

_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_UNIT = r"%|[x×](?![\w\d]| ?\d)|ms\b|µs\b|us\b|KiB\b|MiB\b|GiB\b|KB\b|MB\b|GB\b"
#: A number with its unit, or a range of two numbers sharing one ("47-60 %", "47 to 60 %").
CLAIM = re.compile(rf"(?<![\w.])(?:({_NUMBER})\s*(?:-|–|to)\s*)?({_NUMBER})\s?({_UNIT})")
_UNITS = {"×": "x", "us": "µs"}


def _unit(unit: str) -> str:
    return _UNITS.get(unit, unit)


def claims(text: str) -> list[tuple[str, str]]:
    """``(number, unit)`` for each quantitative claim of ``text`` (both ends of a range).

    >>> claims("right in 47-60 % of them, 1.09x as long, 2,000 sentences, an 8 x 8 map, 2.0 GiB")
    [('47', '%'), ('60', '%'), ('1.09', 'x'), ('2.0', 'GiB')]
    """
    found = []
    for low, number, unit in CLAIM.findall(text):
        found += [(low, _unit(unit))] if low else []
        found.append((number, _unit(unit)))
    return found


def _value(number: str) -> float:
    return float(number.replace(",", ""))


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def printed(number: str, unit: str, outputs: list[tuple[float, str]]) -> bool:
    """Is ``number unit`` among the printed ``(value, unit)`` pairs, at the prose's precision?

    >>> printed("94", "%", [(94.1, "%")]), printed("94.2", "%", [(94.1, "%")]), printed("94", "x", [(94.0, "%")])
    (True, False, False)
    """
    value, digits = _value(number), _decimals(number)
    return any(u == unit and round(v, digits) == round(value, digits) for v, u in outputs)


def _outputs(cells) -> list[tuple[float, str]]:
    text = []
    for cell in cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                text.append("".join(out["text"]))
            for kind in ("text/plain", "text/markdown", "text/html"):
                if kind in out.get("data", {}):
                    text.append("".join(out["data"][kind]))
    return [(_value(n), u) for t in text for n, u in claims(t)]


def _paragraphs(source: str) -> list[str]:
    """A cell's paragraphs and list items: the units a citation covers."""
    return [p for block in re.split(r"\n\s*\n", source) for p in re.split(r"\n(?=\s*(?:[-*]|\d+\.)\s)", block)]


def _mentions() -> list[str]:
    entries = yaml.safe_load(CITATIONS.read_text(encoding="utf-8"))
    return [m for entry in entries for m in entry["mentions"]]


def unsupported(path: Path) -> list[str]:
    """``"cell N: 'number unit' in: paragraph"`` for each claim of ``path``'s prose that no output or citation backs."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    outputs, mentions, found = _outputs(cells), _mentions(), []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for paragraph in _paragraphs("".join(cell["source"])):
            prose = re.sub(r"`[^`]*`|\]\([^)]*\)|https?://\S+", " ", paragraph)  # code, link targets and addresses
            cited = any(m in paragraph for m in mentions)
            for number, unit in claims(prose):
                if not cited and not printed(number, unit, outputs):
                    found.append(f"cell {index}: '{number} {unit}' in: {' '.join(paragraph.split())[:160]}")
    return found


def test_the_citation_list_names_its_sources():
    entries = yaml.safe_load(CITATIONS.read_text(encoding="utf-8"))
    assert entries, "docs/citations.yml lists the sources the lessons quote numbers from"
    for entry in entries:
        assert {"id", "source", "mentions"} <= set(entry), entry
        assert entry["source"].startswith(("https://", "doi:")), entry["id"]
        assert entry["mentions"], entry["id"]
        assert all(isinstance(m, str) and len(m) >= 6 for m in entry["mentions"]), entry["id"]


def test_the_finder_finds_what_it_should():
    assert claims("2 blocks: 67 % and 62 %; one block 46 % to 70 %") == [("67", "%"), ("62", "%"), ("46", "%"),
                                                                           ("70", "%")]
    assert claims("exp2 takes 0.23× as long, 14 ms each, a 16 MiB block") == [("0.23", "x"), ("14", "ms"),
                                                                              ("16", "MiB")]
    assert claims("an 8 x 8 heatmap, 2x4 heads, index 0x1f, 0.2 × 1.0, the 300 steps") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_number_in_the_prose_is_an_output_or_cited(path):
    found = unsupported(path)
    assert not found, f"{path.name}: {len(found)} numbers in the prose that no output prints and no listed " \
                      f"source backs:\n" + "\n".join(found)
