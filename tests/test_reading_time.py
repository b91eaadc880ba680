"""Every lesson states how long it takes, the statement is fresh, and no lesson is too long.

The minutes are computed from a lesson's content by ``tools/reading_time.py`` (its docstring gives each rate and
where it comes from); ``python3 course.py reading-time --write`` states them in each lesson's title cell.
"""

import doctest
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import reading_time  # noqa: E402
from notebook_rules import ROOT, read  # noqa: E402

LESSONS = reading_time.lessons()
IDS = [p.stem for p in LESSONS]
#: Lessons known to be longer than their limit, each with what it is: an entry here is a defect to fix, and the test
#: fails (strict xfail) once the lesson is short enough, so that the entry goes.
KNOWN_TOO_LONG: dict[str, str] = {}


def test_there_are_lessons():
    assert (ROOT / "notebooks" / "00_welcome.ipynb") in LESSONS
    assert not any("solutions" in p.parts for p in LESSONS), "a solution is read as part of its exercise"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_the_lesson_states_a_fresh_reading_time(path):
    """The title cell says how long the lesson takes, within the tolerance of what its content gives now."""
    nb = read(path)
    minutes, said = reading_time.measure(nb), reading_time.stated(nb)
    fix = f"run `python3 course.py reading-time --write notebooks/{path.name}`"
    assert said is not None, f"{path.name} states no reading time in its title cell: {fix}"
    assert abs(said - minutes.total) <= reading_time.tolerance(minutes.total), (
        f"{path.name} states {said} minutes, its content now gives {minutes.total:.0f}: {fix}")
    assert reading_time.title_cell(nb).source.split("\n")[2] == reading_time.LINE.search(
        reading_time.title_cell(nb).source).group(0), "the line is the paragraph right under the title"
    assert reading_time.mentions(nb) == 1, f"{path.name} states a reading time by hand besides the line: remove it"


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(
    strict=True, reason=KNOWN_TOO_LONG[p.stem])) if p.stem in KNOWN_TOO_LONG else p for p in LESSONS], ids=IDS)
def test_the_lesson_is_not_too_long(path):
    """Core lessons (00-09) at most 45 minutes, any lesson at most 90: research beyond a lesson's goals goes to an
    optional deep dive."""
    nb = read(path)
    total, limit = reading_time.measure(nb).total, reading_time.limit(path, nb)
    assert total <= limit, f"{path.name} takes {total:.0f} minutes, over its limit of {limit}"


def _lesson(*cells):
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("badge " * 50, metadata={"tags": ["colab-badge"]}), *cells])


def test_each_part_counts_as_the_rates_say():
    """A hand-made lesson, timed by hand from the stated rates."""
    image = nbformat.v4.new_output("display_data", {"image/png": "iVBOR", "text/plain": "<Figure>"})
    printed = nbformat.v4.new_output("stream", text="one\ntwo\nthree\n")
    code = nbformat.v4.new_code_cell("x = torch . ones ( 3 )  # three ones, for the lesson", outputs=[printed, image])
    setup = nbformat.v4.new_code_cell("import sys " * 40, metadata={"tags": ["colab-setup"]})
    nb = _lesson(nbformat.v4.new_markdown_cell("# 99 · A title\n\n" + "word " * 396),
                 setup, code, nbformat.v4.new_code_cell("attention_lib.widgets.masking_explorer()"),
                 nbformat.v4.new_markdown_cell("| a | b |\n|---|---|\n| 1 | 2 |\n\n## Exercise: one"))
    minutes = reading_time.measure(nb)
    assert minutes.prose == pytest.approx((5 + 396 + 3) / 200)  # "# 99 · A title", the words, "## Exercise: one"
    tokens, comment_words, lines = 8, 5, 3  # and the explorer's cell: one token
    assert minutes.code == pytest.approx(2 * 10 / 60 + (tokens + 1) / 100 + comment_words / 200 + lines * 2 / 60)
    assert minutes.figures == pytest.approx(1 + 2 + 1)  # the figure, the explorer, the table
    assert minutes.exercises == 8
    assert minutes.line() == "*Reading time: about 15 minutes (prose 2, code 1, figures 4, exercises 8).*"


def test_writing_the_line_replaces_an_older_one_and_counts_nothing():
    nb = _lesson(nbformat.v4.new_markdown_cell("# 99 · A title\n\nWhere we are."))
    before = reading_time.measure(nb)
    cell = reading_time.title_cell(nb)
    cell.source = reading_time.with_line(cell.source, "*Reading time: about 90 minutes (prose 90, code 0, "
                                                      "figures 0, exercises 0).*")
    assert reading_time.stated(nb) == 90
    cell.source = reading_time.with_line(cell.source, before.line())
    assert cell.source == f"# 99 · A title\n\n{before.line()}\n\nWhere we are."
    assert reading_time.measure(nb) == before, "the line itself is not reading time"
    assert reading_time.with_line(cell.source, before.line()) == cell.source
    cell.source = "# 99 · A title\n\n**Reading time:** about 90 minutes, by hand.\n\nWhere we are."
    cell.source = reading_time.with_line(cell.source, before.line())
    assert cell.source == f"# 99 · A title\n\n{before.line()}\n\nWhere we are."
    assert reading_time.mentions(nb) == 1
    cell.source += "\n\n**Reading time:** 90 minutes. A sentence that goes on in the same paragraph,\nas here."
    assert reading_time.mentions(nb) == 2, "a hand-written time inside a paragraph is left for a person, and found"


def test_a_small_edit_keeps_the_statement_a_new_section_does_not(tmp_path):
    """Stale means a real change: a sentence more stays within the tolerance, a new section of 1,000 words does
    not."""
    path = tmp_path / "04_scaler.ipynb"
    nb = read(ROOT / "notebooks" / "04_scaler.ipynb")
    cell = reading_time.title_cell(nb)
    cell.source = reading_time.with_line(cell.source, reading_time.measure(nb).line())
    nbformat.write(nb, path)
    assert not [p for p in reading_time.problems(path) if "states" in p]
    nb.cells.append(nbformat.v4.new_markdown_cell("One more sentence of twelve words, as an edit of prose adds. "))
    nbformat.write(nb, path)
    assert not [p for p in reading_time.problems(path) if "states" in p]
    nb.cells.append(nbformat.v4.new_markdown_cell("## A new section\n\n" + "word " * 1000))
    nbformat.write(nb, path)
    assert [p for p in reading_time.problems(path) if "its content now gives" in p]


def test_core_lessons_and_deep_dives():
    """00-09 are the core (45 minutes); a deep dive of any lesson, like every lesson after 09, may take 90."""
    titled = _lesson(nbformat.v4.new_markdown_cell("# 08 · Masking"))
    dive = _lesson(nbformat.v4.new_markdown_cell("# 08 · Masking, a deep dive: fully-masked rows"))
    assert reading_time.limit(Path("08_masking.ipynb"), titled) == 45
    assert reading_time.limit(Path("08_masking_rows.ipynb"), dive) == 90
    assert reading_time.limit(Path("08_masking_deep_dive.ipynb"), titled) == 90
    assert reading_time.limit(Path("12_learning_to_attend.ipynb"), titled) == 90


def test_a_lesson_without_a_title_cell_is_refused():
    with pytest.raises(ValueError, match="no title cell"):
        reading_time.title_cell(_lesson(nbformat.v4.new_markdown_cell("Where we are.")))


def test_reading_time_examples():
    """The ``>>>`` examples in tools/reading_time.py run (tools/ is not collected for doctests)."""
    result = doctest.testmod(reading_time, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 3
    assert result.failed == 0
