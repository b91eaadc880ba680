"""The README and lesson 00 name the core path and the tracks after it, link the lessons that exist, name those to
come without a link, and show each lesson's reading time (``tools/course_map.py``, written by ``course.py colab``).
"""

import sys
from pathlib import Path

import nbformat
from notebook_rules import ROOT, read

sys.path.insert(0, str(ROOT / "tools"))
import colab_sync  # noqa: E402

from tools import course_map, reading_time  # noqa: E402

LESSON_00 = ROOT / "notebooks" / "00_welcome.ipynb"


def test_every_lesson_after_the_core_is_on_a_track():
    numbers = {path.name[:2] for path in reading_time.lessons()}
    on_tracks = {number for _, _, track in course_map.TRACKS for number in track}
    assert set(course_map.CORE) <= numbers, "every lesson of the core path has a notebook"
    missing = sorted(numbers - set(course_map.CORE) - on_tracks)
    assert missing == [], f"lessons {missing} are on no track: add them to TRACKS in tools/course_map.py"
    assert on_tracks - numbers <= set(course_map.COMING), "a lesson still to come needs its name in COMING"


def test_a_lesson_to_come_is_named_and_links_itself_once_it_lands(monkeypatch):
    monkeypatch.setitem(course_map.COMING, "19", "Linear attention")  # whatever COMING holds when the test runs
    assert course_map._entry("19", {}, "notebooks/") == "19 · Linear attention (coming)"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 19 · Linear attention: a running state")])
    dive = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 19 · A deep dive: the state runs out")])
    found = {"19": [(Path("19_linear.ipynb"), nb), (Path("19_linear_deep_dive.ipynb"), dive)]}
    assert course_map._entry("19", found, "notebooks/") == (
        "[19 · Linear attention](notebooks/19_linear.ipynb) (optional: "
        "[A deep dive: the state runs out](notebooks/19_linear_deep_dive.ipynb))")


def test_the_readme_and_lesson_00_show_the_map_as_the_lessons_make_it():
    """What `course.py colab` writes is in place (the slow test_colab.py check compares every notebook too)."""
    readme = (ROOT / "README.md").read_text()
    assert colab_sync.tracks_block() in readme
    assert colab_sync.readme_block(colab_sync.colab_config()) in readme
    cells = [c for c in read(LESSON_00).cells if colab_sync.MAP_TAG in c.metadata.get("tags", [])]
    assert [c.source for c in cells] == [course_map.lesson_00_cell()]


def test_the_map_names_the_core_path_every_track_and_every_lesson():
    text = course_map.lesson_00_cell()
    assert "**The core path, 00 to 09**" in text
    for name, _, _track in course_map.TRACKS:
        assert f"**{name}**" in text
    for path in reading_time.lessons():
        nb = read(path)
        assert f"]({path.name})" in text, f"lesson 00's map does not link {path.name}"
        if reading_time.stated(nb):
            assert f"| {reading_time.stated(nb)} min |" in text
    assert "(coming)" not in course_map.table(), "the table holds only lessons that exist"
