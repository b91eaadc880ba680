"""Build the course website from the notebooks' stored outputs (``python3 course.py book``).

Nothing is executed: the site shows the outputs that strict nbval checks. The build

1. stages the site's source in ``book/_build/source``: the pages of ``book/`` and a prepared *copy* of every
   notebook in ``notebooks/`` (the committed notebooks are only read);
2. runs Sphinx (Jupyter Book 1: myst-nb, sphinx-book-theme) with ``book/`` as its configuration directory,
   writing the HTML to ``book/_build/html``;
3. puts the original notebooks in the site's ``_sources/`` (the page's download button gives the real one).

Each staged copy differs from its notebook in four ways, all for a static page:

* the "Open in Colab" badge cell is dropped (its picture would come from the web): every notebook page has a
  Colab launch button instead, built from the same ``[tool.course.colab]`` of ``pyproject.toml``;
* the Colab-only install cell is hidden (it does nothing outside Colab);
* an explorer (an ipywidgets view, which needs a kernel) becomes its stored static view: a one-line note that
  the explorer moves in a live notebook, its title and control values, and the figure it drew when the
  notebook was executed (read from the widget state saved in the notebook). The saved widget state itself is
  dropped, so no widget-manager script from a CDN is ever requested;
* a figure's caption (its text alternative, printed under it by ``attention_lib.plotting.alt``) is hidden from
  screen readers, which read the same text as the picture's ``alt`` (``book/conf.py``): said once, not twice.

Every build starts from an empty ``book/_build`` (it takes seconds): an incremental Sphinx build would leave
stale sidebars and previous/next links on the pages that did not change when a lesson is added.

    python3 course.py book             # build
    python3 course.py book --verbose   # with Sphinx's progress messages
"""

from __future__ import annotations

import copy
import html
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from colab_sync import BADGE_TAG, SETUP_TAG, colab_config, setup_source  # noqa: E402

from course import all_notebooks  # noqa: E402

#: A markdown cell that is nothing but an "Open in Colab" badge (tagged or not).
COLAB_BADGE = re.compile(r'\s*<a href="https://colab\.research\.google\.com/[^"]*"[^>]*>'
                         r"\s*<img [^>]*colab-badge\.svg[^>]*>\s*</a>\s*")

NOTEBOOKS = ROOT / "notebooks"
BOOK = ROOT / "book"
BUILD = BOOK / "_build"
SOURCE = BUILD / "source"
HTML = BUILD / "html"
DOCTREES = BUILD / "doctrees"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: The class of the note that replaces an explorer on the site (the tests look for it).
EXPLORER_NOTE_CLASS = "course-explorer-note"
#: What an explorer becomes on the site, before its title and controls.
EXPLORER_NOTE = "Its controls move in a live notebook: launch this page on Colab, or run it in JupyterLab"
#: The class of a figure's caption, printed under the figure by ``attention_lib.plotting.alt``.
CAPTION_CLASS = "course-figure-alt"
#: Book files that are configuration, not pages (Sphinx reads them from book/ itself).
NOT_PAGES = ("conf.py", "_toc.yml", "_static", "_templates", "_build", "__pycache__", ".ipynb_checkpoints")


def _children(model: dict) -> list[str]:
    """The ids of the widget models that ``model`` refers to (``"IPY_MODEL_<id>"`` values), in order."""
    found = []
    for value in model.get("state", {}).values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.startswith("IPY_MODEL_"):
                found.append(item.removeprefix("IPY_MODEL_"))
    return found


def _control_value(state: dict):
    """The value a control shows: ``value``, or the selected label of a drop-down or toggle buttons."""
    if "value" in state:
        return state["value"]
    labels, index = state.get("_options_labels"), state.get("index")
    if labels is not None and isinstance(index, int) and 0 <= index < len(labels):
        return labels[index]
    return None


def explorer_static_view(model_id: str, widget_state: dict) -> list[dict]:
    """The outputs that stand for one widget view on the site: a one-line note, then the stored figure(s).

    Args:
        model_id: the id in the output's ``application/vnd.jupyter.widget-view+json``.
        widget_state: the notebook's saved widget state (``{id: {"model_name": ..., "state": {...}}}``), or
            ``{}`` when the notebook saved none.

    Returns:
        A list of nbformat outputs: a ``display_data`` with the note (``text/html``), then the outputs stored
        in the explorer's ``Output`` widgets (its figure), in the order the explorer shows them.

    Example:
        >>> state = {
        ...     "box": {"model_name": "VBoxModel",
        ...             "state": {"children": ["IPY_MODEL_t", "IPY_MODEL_s", "IPY_MODEL_o"]}},
        ...     "t": {"model_name": "HTMLModel", "state": {"value": "<b>A title</b>"}},
        ...     "s": {"model_name": "IntSliderModel", "state": {"description": "n", "value": 3}},
        ...     "o": {"model_name": "OutputModel", "state": {"outputs": [
        ...         {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBO"}}]}},
        ... }
        >>> note, figure = explorer_static_view("box", state)
        >>> "A title" in note.data["text/html"], "n = 3" in note.data["text/html"], figure.data["image/png"]
        (True, True, 'iVBO')
    """
    titles, controls, outputs, seen = [], [], [], set()

    def visit(mid: str) -> None:
        if mid in seen or mid not in widget_state:
            return
        seen.add(mid)
        model = widget_state[mid]
        name, state = model.get("model_name", ""), model.get("state", {})
        if name in ("HTMLModel", "LabelModel") and state.get("value"):
            titles.append(state["value"])
        elif name == "OutputModel":
            outputs.extend(nbformat.from_dict(copy.deepcopy(o)) for o in state.get("outputs", []))
        elif "description" in state and _control_value(state) is not None:
            label = state["description"] or name.removesuffix("Model")
            controls.append(f"<code>{html.escape(f'{label} = {_control_value(state)}')}</code>")
        for child in _children(model):
            visit(child)

    visit(model_id)
    title = f"<strong>Explorer{': ' + ' '.join(titles) if titles else ''}</strong>"
    shown = f". Below, the figure it drew for {', '.join(controls)}" if controls else ""
    note = f'<p class="{EXPLORER_NOTE_CLASS}">{title} {EXPLORER_NOTE}{shown}.</p>'
    return [nbformat.v4.new_output("display_data", data={"text/html": note}), *outputs]


def hide_caption_from_screen_readers(output: dict) -> dict:
    """``output`` with its figure caption (if it is one) marked ``aria-hidden``: the picture's ``alt`` says it.

    Example:
        >>> caption = f'<p class="{CAPTION_CLASS}"><em>Figure:</em> Two bars.</p>'
        >>> out = nbformat.v4.new_output("display_data", data={"text/html": caption, "text/plain": "Two bars."})
        >>> hide_caption_from_screen_readers(out).data["text/html"]
        '<p class="course-figure-alt" aria-hidden="true"><em>Figure:</em> Two bars.</p>'
    """
    tag = f'<p class="{CAPTION_CLASS}">'
    markup = output.get("data", {}).get("text/html")
    if isinstance(markup, list):
        markup = "".join(markup)
    if isinstance(markup, str) and markup.startswith(tag):
        output["data"]["text/html"] = markup.replace(tag, f'<p class="{CAPTION_CLASS}" aria-hidden="true">', 1)
    return output


def prepare_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` ready for a static page (see the module docstring); ``nb`` itself is not changed.

    Example:
        >>> nb = nbformat.v4.new_notebook(cells=[
        ...     nbformat.v4.new_markdown_cell("badge", metadata={"tags": [BADGE_TAG]}),
        ...     nbformat.v4.new_code_cell("# Colab only", metadata={"tags": [SETUP_TAG]}),
        ...     nbformat.v4.new_code_cell("make_explorer(...)", outputs=[nbformat.v4.new_output(
        ...         "execute_result", data={WIDGET_VIEW: {"model_id": "x"}, "text/plain": "VBox()"})]),
        ... ])
        >>> site = prepare_notebook(nb)
        >>> [c.cell_type for c in site.cells], site.cells[0].metadata.tags
        (['code', 'code'], ['colab-setup', 'remove-cell'])
        >>> EXPLORER_NOTE_CLASS in site.cells[1].outputs[0].data["text/html"], len(nb.cells)
        (True, 3)
    """
    nb = copy.deepcopy(nb)
    colab_setup = setup_source(colab_config())
    widget_state = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    cells = []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if BADGE_TAG in tags or (cell.cell_type == "markdown" and COLAB_BADGE.fullmatch(cell.source)):
            continue
        if (SETUP_TAG in tags or cell.source == colab_setup) and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
        if cell.cell_type == "code":
            outputs = []
            for output in cell.outputs:
                view = output.get("data", {}).get(WIDGET_VIEW)
                if view is None:
                    outputs.append(output)
                else:
                    outputs.extend(explorer_static_view(view.get("model_id", ""), widget_state))
            cell.outputs = [hide_caption_from_screen_readers(o) for o in outputs]
        cells.append(cell)
    nb.cells = cells
    return nb


def stage(source: Path = SOURCE) -> list[Path]:
    """Write the site's source folder anew: the pages of ``book/`` and a prepared copy of every notebook.

    Returns the staged notebooks.
    """
    if source.exists():
        shutil.rmtree(source)
    for page in BOOK.rglob("*"):
        relative = page.relative_to(BOOK)
        if page.is_file() and not any(part in NOT_PAGES for part in relative.parts):
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, source / relative)
    staged = []
    for path in all_notebooks():
        target = source / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(prepare_notebook(nbformat.read(path, as_version=4)), target)
        staged.append(target)
    return staged


def build(*, quiet: bool = True) -> Path:
    """Stage and build the site from scratch; returns the path of its ``index.html``.

    Raises ``RuntimeError`` when Sphinx fails or warns (a broken cross-reference, a missing page, ...).
    """
    import importlib.util

    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme", "sphinx_external_toc")
               if importlib.util.find_spec(m) is None]
    if missing or importlib.util.find_spec("sphinx-mathjax-offline") is None:
        raise RuntimeError(f"the website's tools are not installed ({', '.join(missing) or 'sphinx-mathjax-offline'})"
                           ": pip install -e '.[book]' (python3 course.py book installs them into .venv)")
    if BUILD.exists():
        shutil.rmtree(BUILD)
    stage()
    # -W: a warning (a broken cross-reference, a missing page, a bad toc entry) fails the build.
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(BOOK), "-d", str(DOCTREES), "-W",
               "--keep-going", *(["-q"] if quiet else []), str(SOURCE), str(HTML)]
    result = subprocess.run(command, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"sphinx-build failed (exit code {result.returncode}); see the messages above")
    for path in all_notebooks():  # the download button gives the notebook itself, not the staged copy
        target = HTML / "_sources" / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return HTML / "index.html"


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    start = time.perf_counter()
    try:
        index = build(quiet="--verbose" not in argv)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    pages = len(list(HTML.glob("notebooks/**/*.html"))) + 1
    print(f"Built the course website in {time.perf_counter() - start:.0f} s: {pages} pages (the landing page, "
          f"{pages - 1} notebooks) in {HTML.relative_to(ROOT)}/")
    print(f"Open {index.as_uri()}")
    print(f"or serve it: python -m http.server --directory {HTML.relative_to(ROOT)} 8000  (then http://localhost:8000)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
