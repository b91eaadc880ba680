"""The course's map: the core path, the tracks after it, and each lesson's reading time, as markdown.

``course.py colab`` writes it into the README (between the ``tracks`` markers) and into lesson 00's cell tagged
``course-map``, from the notebooks that exist: a lesson of a track that has no notebook yet is named as coming and
not linked, and links itself once its notebook lands and ``course.py colab`` runs again. An optional deep dive
(``tools/reading_time.py`` says which notebooks are) is listed after its lesson.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import reading_time  # noqa: E402

#: The core path: read in order.
CORE = ("00", "01", "02", "03", "04", "05", "06", "07", "08", "09")
#: The tracks after the core: (name, what it is about, its lessons in reading order). A number with no notebook
#: yet is named from COMING.
TRACKS = (
    ("Interpretability", "Train tiny transformers and find out, by intervention, what their heads do.",
     ("11", "12", "13")),
    ("Systems", "Attention that fits in memory and runs fast: in blocks, as one GPU kernel, over many processes.",
     ("10", "14", "16", "19", "20")),
    ("Serving", "Write text one token at a time, and cache less to serve more.", ("11", "15", "17", "18")),
)
#: Lessons that a track names before their notebook exists.
COMING: dict[str, str] = {}
#: What a reader of one track needs from another, said once under the tracks.
NOTES = (
    "Lesson 11 (word order and cross-attention) opens two tracks: lessons 12 and 13 train models with its learned "
    "positions, and lesson 15 builds its rotary positions and its cache on the positions and offsets 11 "
    "introduces. The systems track can be read without 11 and 12.",
    "Lesson 15's model is trained on lesson 12's sentences, and lesson 16 trains lesson 12's model over processes: "
    "each says what it takes from there, so neither needs 12 read first.",
)


def notebooks() -> dict[str, list[tuple[Path, object]]]:
    """``{"12": [(path, nb), ...]}``: each lesson's notebook, then its deep dives."""
    found: dict[str, list[tuple[Path, object]]] = {}
    for path in reading_time.lessons():
        nb = nbformat.read(path, as_version=4)
        found.setdefault(path.name[:2], []).append((path, nb))
    for pairs in found.values():
        pairs.sort(key=lambda pair: (reading_time.is_deep_dive(*pair), pair[0].name))
    return found


def title(nb) -> str:
    """The title line without ``# `` (``"04 · The Scaler: why divide by √d_k?"``)."""
    return reading_time.title_cell(nb).source.split("\n")[0].lstrip("# ").strip()


def short_title(nb) -> str:
    """The title up to its colon (``"04 · The Scaler"``)."""
    return title(nb).split(":")[0]


def minutes(nb) -> str:
    said = reading_time.stated(nb)
    return f"{said} min" if said else ""


def _link(path: Path, nb, prefix: str) -> str:
    return f"[{short_title(nb)}]({prefix}{path.name})"


def _entry(number: str, found, prefix: str) -> str:
    if number not in found:
        return f"{number} · {COMING[number]} (coming)"
    (path, nb), *dives = found[number]
    text = _link(path, nb, prefix)
    for dive_path, dive in dives:
        text += f" (optional: [{title(dive).split(' · ', 1)[-1]}]({prefix}{dive_path.name}))"
    return text


def tracks(prefix: str = "") -> str:
    """The core path and the tracks, as markdown; links start with ``prefix`` (``"notebooks/"`` in the README)."""
    found = notebooks()
    first, last = found[CORE[0]][0], found[CORE[-1]][0]
    core = [reading_time.stated(nb) for number in CORE for _, nb in found[number][:1]]
    span = (f"{min(core)} to {max(core)} minutes each" if all(core) else "each stating how long it takes")
    lines = [f"**The core path, {CORE[0]} to {CORE[-1]}**, builds the recipe of attention from the idea to "
             f"multi-head attention, one step a lesson, {span}: read it in order, from {_link(*first, prefix)} "
             f"to {_link(*last, prefix)}. After it come three tracks, each a path of its own: read one, several or "
             "all, in any order, and skip the others.", ""]
    for name, about, numbers in TRACKS:
        steps = " → ".join(_entry(number, found, prefix) for number in numbers)
        lines.append(f"- **{name}**: {steps}. {about}")
    return "\n".join([*lines, "", *NOTES[:1], "", *NOTES[1:]])


def lesson_00_cell() -> str:
    """Lesson 00's course map: every lesson with its track and reading time, then the paths through them."""
    return f"{table()}\n\n{tracks()}"


def track_of(number: str) -> str:
    """``"core"``, or the tracks a lesson belongs to (``"interpretability, serving"``)."""
    if number in CORE:
        return "core"
    return ", ".join(name.lower() for name, _, numbers in TRACKS if number in numbers)


def table(prefix: str = "") -> str:
    """Every lesson with its track and reading time, as a markdown table (lesson 00's course map)."""
    rows = ["| # | lesson | track | reading time |", "|---|---|---|---|"]
    for number, pairs in sorted(notebooks().items()):
        for path, nb in pairs:
            track = "optional deep dive" if reading_time.is_deep_dive(path, nb) else track_of(number)
            rows.append(f"| {number} | [{title(nb).split(' · ', 1)[1]}]({prefix}{path.name}) | {track} | "
                        f"{minutes(nb)} |")
    return "\n".join(rows)
