"""Write every notebook's "Open in Colab" badge and Colab setup cell from pyproject.toml (``course.py colab``).

The repository slug and git ref live only in ``[tool.course.colab]`` of ``pyproject.toml``. Each notebook gets:

1. a first markdown cell (tagged ``colab-badge``) holding the badge that opens this very notebook on Colab;
2. right after the lesson's title and goals (the markdown cell that says "By the end", else the title), and
   before any other code, a code cell (tagged ``colab-setup``) that, only on Colab, installs ``attention_lib``
   from the same repository and ref, and does nothing anywhere else (no output, no network);
3. notebook metadata asking Colab for a GPU runtime.

It also writes the README's table of badges (with each lesson's reading time, as the lesson states it), its
``git clone`` lines and its core path and tracks, and lesson 00's course map (the cell tagged ``course-map``), from
``tools/course_map.py``.

With ``--check`` nothing is written and the exit code says whether every notebook is up to date.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course import all_notebooks  # noqa: E402
from tools import course_map  # noqa: E402

BADGE_TAG, SETUP_TAG = "colab-badge", "colab-setup"
#: What a lesson's goals cell says ("By the end of this notebook you will be able to: ..."; tests/test_notebooks.py
#: checks that every lesson has it).
GOALS = "By the end"
README_START, README_END = "<!-- colab-badges:start -->", "<!-- colab-badges:end -->"
#: The README's ``git clone`` lines (the quick start), written from the same slug.
CLONE_START, CLONE_END = "<!-- clone:start -->", "<!-- clone:end -->"
#: The README's core path and tracks; lesson 00's course map is the cell tagged MAP_TAG.
TRACKS_START, TRACKS_END = "<!-- tracks:start -->", "<!-- tracks:end -->"
MAP_TAG = "course-map"


def colab_config() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]["colab"]
    return {"repository": config["repository"], "ref": config["ref"]}


def badge_source(relpath: str, config: dict[str, str]) -> str:
    url = f"https://colab.research.google.com/github/{config['repository']}/blob/{config['ref']}/{relpath}"
    return (f'<a href="{url}" target="_parent"><img src="https://colab.research.google.com/assets/'
            f'colab-badge.svg" alt="Open In Colab"/></a>')


def setup_source(config: dict[str, str]) -> str:
    spec = f"attention-lib @ git+https://github.com/{config['repository']}@{config['ref']}"
    return (
        "# Colab only: install attention_lib at the same version as this notebook (elsewhere: does nothing).\n"
        "# Written by `python3 course.py colab`; torch, matplotlib and ipywidgets are left as Colab has them.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{spec}"], check=True)'
    )


def colab_metadata() -> dict:
    return {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}


def _tagged(cell, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def setup_position(cells) -> int:
    """Where the setup cell goes among ``cells`` (a notebook's cells without its badge and setup cells): right
    after the title and goals, and before the first code cell.

    Example:
        >>> cells = [nbformat.v4.new_markdown_cell("# 03 · A title"), nbformat.v4.new_markdown_cell("By the end ..."),
        ...          nbformat.v4.new_markdown_cell("## Setup"), nbformat.v4.new_code_cell("import torch")]
        >>> setup_position(cells), setup_position(cells[:1] + cells[2:]), setup_position(cells[3:])
        (2, 1, 0)
    """
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    markdown = [(i, c.source) for i, c in enumerate(cells) if c.cell_type == "markdown"]
    goals = next((i for i, source in markdown if GOALS in source), None)
    if goals is None:
        goals = next((i for i, source in markdown if source.startswith("# ")), -1)
    return min(goals + 1, first_code)


def sync(nb, relpath: str, config: dict[str, str], course_map_cell: str | None = None) -> None:
    """Put the badge first and the setup cell after the title and goals (replacing old ones), the Colab
    metadata in place, and the course map into a cell tagged MAP_TAG (``course_map_cell``, else made anew)."""
    for cell in nb.cells:
        if _tagged(cell, MAP_TAG):
            cell.source = course_map_cell if course_map_cell is not None else course_map.lesson_00_cell()
    cells = [c for c in nb.cells if not (_tagged(c, BADGE_TAG) or _tagged(c, SETUP_TAG))]
    old = {tag: next((c for c in nb.cells if _tagged(c, tag)), None) for tag in (BADGE_TAG, SETUP_TAG)}
    badge = nbformat.v4.new_markdown_cell(badge_source(relpath, config), metadata={"tags": [BADGE_TAG]})
    setup = nbformat.v4.new_code_cell(setup_source(config), metadata={"tags": [SETUP_TAG]})
    for new, tag in ((badge, BADGE_TAG), (setup, SETUP_TAG)):
        if old[tag] is not None:
            new["id"] = old[tag]["id"]
    if old[SETUP_TAG] is not None and old[SETUP_TAG].source == setup.source:
        setup = old[SETUP_TAG]  # keep its execution count and (empty) outputs
    at = setup_position(cells)
    nb.cells = [badge, *cells[:at], setup, *cells[at:]]
    nb.metadata.update(colab_metadata())


def readme_block(config: dict[str, str]) -> str:
    """The README's table of lessons, each with its reading time and badge (between the README_START/END
    markers)."""
    rows = ["| lesson | reading time | open it |", "|---|---|---|"]
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        relpath = path.relative_to(ROOT).as_posix()
        rows.append(f"| [{course_map.title(nb)}]({relpath}) | {course_map.minutes(nb)} | "
                    f"{badge_source(relpath, config)} |")
    return "\n".join([README_START, *rows, README_END])


def tracks_block() -> str:
    """The README's core path and tracks (between the TRACKS_START/END markers)."""
    return "\n".join([TRACKS_START, course_map.tracks(prefix="notebooks/"), TRACKS_END])


def clone_block(config: dict[str, str]) -> str:
    """The README's ``git clone`` lines for this repository (between the CLONE_START/END markers)."""
    name = config["repository"].split("/")[-1]
    lines = ["```bash", f"git clone https://github.com/{config['repository']}.git", f"cd {name}", "```"]
    return "\n".join([CLONE_START, *lines, CLONE_END])


def sync_readme(config: dict[str, str], check: bool) -> bool:
    """Rewrite the README's badge table and clone lines; return True when they were out of date."""
    readme = ROOT / "README.md"
    text = new = readme.read_text()
    for start_marker, end_marker, block in ((README_START, README_END, readme_block(config)),
                                            (CLONE_START, CLONE_END, clone_block(config)),
                                            (TRACKS_START, TRACKS_END, tracks_block())):
        if start_marker in new:
            start, end = new.index(start_marker), new.index(end_marker) + len(end_marker)
            new = new[:start] + block + new[end:]
    if new != text and not check:
        readme.write_text(new)
    return new != text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    config = colab_config()
    stale = []
    map_cell = course_map.lesson_00_cell()
    for path in all_notebooks():
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        sync(nb, path.relative_to(ROOT).as_posix(), config, map_cell)
        if nbformat.writes(nb) != before:
            stale.append(path.relative_to(ROOT))
            if not check:
                nbformat.write(nb, path)
    if sync_readme(config, check):
        stale.append(Path("README.md"))
    verb = "out of date" if check else "updated"
    for path in stale:
        print(f"{verb}: {path}")
    if check and stale:
        print("run `python3 course.py colab` (then `python3 course.py execute` for new setup cells)")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
