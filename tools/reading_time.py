"""How long each lesson takes to read, computed from its content, and the line that states it (``course.py
reading-time``).

    python3 course.py reading-time               the table: every lesson's minutes, by part, and its stated line
    python3 course.py reading-time --write       write the line into every lesson's title cell (or only the
                                                 notebooks named: ``--write notebooks/12_learning_to_attend.ipynb``)
    python3 course.py reading-time --check       exit status 1 when a lesson's line is missing or stale

A lesson is every notebook ``notebooks/NN_*.ipynb``, an optional deep dive of a lesson included; a solution states
no time of its own: it is read as part of its exercise, whose time the lesson counts. The line goes into the
lesson's title cell (the first markdown cell that starts with ``# ``, after the Colab badge), as the paragraph
right under the title, and replaces an older one:

    *Reading time: about 35 minutes (prose 10, code 13, figures 4, exercises 8).*

The minutes come from what a learner meets, at the rates below. The one timing of a learner we have is a
reviewer's, who read lesson 12 (7,937 words of prose, 73 code cells, three exercises) in 2 to 2.5 hours; these
rates give 122 minutes for that version of it, at the short end of the reviewer's range: they do not overstate.

- **Prose**: the words of the markdown cells (link targets, HTML tags, tables and this line left out) at
  :data:`PROSE_WPM` words a minute: reading to learn, Carver's "learning" rate (R. P. Carver, *Reading rate:
  theory, research and practical implications*, Journal of Reading 36(2), 84-95, 1992, whose five "gears" run from
  scanning at 600 words a minute to memorising at 138: 200 words a minute for college
  readers, below the 238 of silent reading of English non-fiction in M. Brysbaert, *How many words do we read per
  minute?*, Journal of Memory and Language 109, 2019).
- **Code**: each code cell is run and its output found (:data:`CELL_SECONDS`), its code read at
  :data:`CODE_TPM` tokens a minute (half the prose rate: code is read back and forth, not once from left to
  right; a judgement, checked against the timing above), its comments at the prose rate, and each line it prints
  glanced at (:data:`OUTPUT_SECONDS_PER_LINE`; figures are counted below, an explorer's view is not printed text).
- **Figures**: each figure (stored image or markdown image) and each markdown table is looked at for
  :data:`FIGURE_MINUTES`: its title, its axes, the number the prose points to; an explorer (a cell that calls
  ``..._explorer(``) is played with for :data:`EXPLORER_MINUTES`.
- **Exercises**: each heading ``## Exercise ...`` (any level) is :data:`EXERCISE_MINUTES`: read the task, write a
  few lines, run the checker, read a hint once, compare with the solution.

The total is rounded to 5 minutes ("about"), each part to the minute. A lesson's stated total is fresh while it is
within :func:`tolerance` of what its content gives now (5 minutes, or a tenth of the total for a long lesson), so a
sentence added or removed leaves it standing and a section does not; ``tests/test_reading_time.py`` checks that,
and the length rule: a core lesson (00-09) at most :data:`CORE_LIMIT` minutes, any lesson at most :data:`LIMIT`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

PROSE_WPM = 200  #: words of prose a minute (Carver 1992, reading to learn)
CODE_TPM = 100  #: tokens of code a minute (half the prose rate)
CELL_SECONDS = 10  #: to run a code cell and find its output
OUTPUT_SECONDS_PER_LINE = 2  #: to glance at a printed line
FIGURE_MINUTES = 1.0  #: a figure or a table
EXPLORER_MINUTES = 2.0  #: an explorer, played with
EXERCISE_MINUTES = 8.0  #: an exercise, done and checked
CORE_LIMIT, LIMIT = 45, 90  #: the longest a core lesson (00-09) and any lesson may take, in minutes
CORE = range(0, 10)  #: the numbers of the core lessons

LINE = re.compile(r"^\*Reading time: about (\d+) minutes \(([^)]*)\)\.\*[ \t]*$", re.M)
#: Any line that starts a reading time, the standard one or an older, hand-written one.
OLD_LINE = re.compile(r"^\*{1,2}Reading time\b", re.M)
_FENCE = re.compile(r"```.*?```", re.S)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$", re.M)
_EXERCISE = re.compile(r"^#{1,6} Exercise\b", re.M)
_EXPLORER = re.compile(r"\b\w+_explorer\(")


@dataclass(frozen=True)
class Minutes:
    """A lesson's reading time, by part, in minutes (unrounded)."""

    prose: float
    code: float
    figures: float
    exercises: float

    @property
    def total(self) -> float:
        return self.prose + self.code + self.figures + self.exercises

    def line(self) -> str:
        """The line a lesson states, e.g. ``*Reading time: about 35 minutes (prose 10, code 13, ...).*``.

        Example:
            >>> Minutes(prose=9.6, code=13.2, figures=4, exercises=8).line()
            '*Reading time: about 35 minutes (prose 10, code 13, figures 4, exercises 8).*'
        """
        total = max(5, 5 * round(self.total / 5))
        parts = ", ".join(f"{name} {round(getattr(self, name))}" for name in ("prose", "code", "figures", "exercises"))
        return f"*Reading time: about {total} minutes ({parts}).*"


def _tagged(cell, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def prose_words(markdown: str) -> int:
    """The words a learner reads in a markdown cell: no fenced code, tables, HTML tags, link targets or
    reading-time line.

    Example:
        >>> prose_words("*Reading time: about 5 minutes (prose 1).*\\n\\nSee [lesson 03](03_x.ipynb), `Q @ K`.")
        6
    """
    text = LINE.sub("", _FENCE.sub("", markdown))
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)  # an image is a figure
    text = re.sub(r"\]\([^)]*\)", "]", text)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("|")]
    return len(" ".join(lines).split())


def _printed_lines(cell) -> int:
    lines = 0
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if any(mime.startswith("image/") or "widget" in mime for mime in data):
            continue
        lines += len("".join(out.get("text", "")).splitlines()) + len("".join(data.get("text/plain", "")).splitlines())
    return lines


def _images(cell) -> int:
    return sum(1 for out in cell.get("outputs", []) if any(m.startswith("image/") for m in out.get("data", {})))


def measure(nb) -> Minutes:
    """The reading time of a notebook ``nb`` (read by nbformat), by part; the Colab badge and setup cells are not
    counted."""
    prose = code = figures = exercises = 0.0
    for cell in nb.cells:
        if _tagged(cell, "colab-badge") or _tagged(cell, "colab-setup"):
            continue
        if cell.cell_type == "markdown":
            prose += prose_words(cell.source) / PROSE_WPM
            fenced = " ".join(_FENCE.findall(cell.source))
            code += len(fenced.split()) / CODE_TPM
            figures += FIGURE_MINUTES * (len(_TABLE_RULE.findall(_FENCE.sub("", cell.source)))
                                         + cell.source.count("!["))
            exercises += EXERCISE_MINUTES * len(_EXERCISE.findall(cell.source))
        elif cell.cell_type == "code" and cell.source.strip():
            comments = " ".join(line.split("#", 1)[1] for line in cell.source.splitlines() if "#" in line)
            tokens = re.sub(r"#.*", "", cell.source).split()
            code += (CELL_SECONDS / 60 + len(tokens) / CODE_TPM + len(comments.split()) / PROSE_WPM
                     + _printed_lines(cell) * OUTPUT_SECONDS_PER_LINE / 60)
            figures += FIGURE_MINUTES * _images(cell) + EXPLORER_MINUTES * len(_EXPLORER.findall(cell.source))
    return Minutes(prose, code, figures, exercises)


def lessons(folder: Path = NOTEBOOKS) -> list[Path]:
    """Every notebook that states a reading time: the lessons and their deep dives, not the solutions."""
    return sorted(folder.glob("[0-9][0-9]*.ipynb"))


def title_cell(nb):
    """The lesson's title cell: the first markdown cell that starts with ``# ``."""
    cell = next((c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("# ")), None)
    if cell is None:
        raise ValueError("the notebook has no title cell (a markdown cell starting with '# '): add one first")
    return cell


def stated(nb) -> int | None:
    """The total a notebook states in its title cell, in minutes, or None when it states none."""
    match = LINE.search(title_cell(nb).source)
    return int(match.group(1)) if match else None


def with_line(source: str, line: str) -> str:
    """``source`` (a title cell) with ``line`` as the paragraph right under the title, replacing an older one (a
    paragraph of one line that starts with ``*Reading time`` or ``**Reading time``).

    Example:
        >>> with_line("# 03 · Title\\n\\n**Reading time:** 9 min.\\n\\nWhere we are.", "*Reading time: 5.*")
        '# 03 · Title\\n\\n*Reading time: 5.*\\n\\nWhere we are.'
    """
    title, _, rest = source.partition("\n")
    kept = [text for text in rest.strip("\n").split("\n\n")
            if text.strip() and not (OLD_LINE.match(text.strip()) and "\n" not in text.strip())]
    return "\n\n".join([title, line, *kept])


def mentions(nb) -> int:
    """How many times the markdown of ``nb`` starts a reading time (``*Reading time`` or ``**Reading time``): one
    line, written by :func:`with_line`, and no hand-written other."""
    return sum(len(OLD_LINE.findall(c.source)) for c in nb.cells if c.cell_type == "markdown")


def is_deep_dive(path: Path, nb) -> bool:
    """An optional deep dive of a lesson: a notebook that calls itself one (``deep_dive`` in its file name, or
    "deep dive" in its title)."""
    return "deep_dive" in path.stem or "deep dive" in title_cell(nb).source.split("\n")[0].lower()


def is_core(path: Path, nb) -> bool:
    """A core lesson: numbered 00 to 09, and not an optional deep dive."""
    return int(path.name[:2]) in CORE and not is_deep_dive(path, nb)


def limit(path: Path, nb) -> int:
    return CORE_LIMIT if is_core(path, nb) else LIMIT


def tolerance(minutes: float) -> float:
    """How far a stated total may be from what the content gives now: 5 minutes, or a tenth of a long lesson."""
    return max(5.0, 0.1 * minutes)


def problems(path: Path) -> list[str]:
    """What is wrong with a lesson's reading time: missing, stale beyond :func:`tolerance`, or over its limit."""
    nb = nbformat.read(path, as_version=4)
    minutes, said = measure(nb), stated(nb)
    found = []
    if said is None:
        found.append(f"{path.name}: states no reading time in its title cell")
    elif abs(said - minutes.total) > tolerance(minutes.total):
        found.append(f"{path.name}: states {said} minutes, its content now gives {minutes.total:.0f} "
                     f"(more than {tolerance(minutes.total):.0f} apart)")
    if minutes.total > limit(path, nb):
        kind = "a core lesson" if is_core(path, nb) else "a lesson"
        found.append(f"{path.name}: {minutes.total:.0f} minutes, over the {limit(path, nb)} of {kind}")
    return found


def main(argv: list[str]) -> int:
    write, check = "--write" in argv, "--check" in argv
    named = [Path(arg).resolve() for arg in argv if not arg.startswith("--")]
    paths = named or lessons()
    print(f"{'lesson':34} {'prose':>5} {'code':>5} {'figs':>5} {'exer':>5} {'total':>6} {'limit':>5}  stated")
    failed = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        minutes = measure(nb)
        if write:
            cell = title_cell(nb)
            new = with_line(cell.source, minutes.line())
            if new != cell.source:
                cell.source = new
                nbformat.write(nb, path)
        said = stated(nb)
        print(f"{path.stem[:34]:34} {minutes.prose:5.1f} {minutes.code:5.1f} {minutes.figures:5.1f} "
              f"{minutes.exercises:5.1f} {minutes.total:6.1f} {limit(path, nb):5}  {said if said else '-'}")
        failed += problems(path)
    for problem in failed:
        print(problem)
    if failed and not write:
        print("run `python3 course.py reading-time --write` to state the times, then `python3 course.py colab`")
    return 1 if check and failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
