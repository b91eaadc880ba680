"""Sphinx configuration of the course website (Jupyter Book 1: myst-nb, sphinx-book-theme, an external TOC).

Built by ``python course.py book`` (``tools/build_book.py``), which copies ``notebooks/`` and the pages of this
folder into a staging folder (the source directory) and runs Sphinx with this folder as its configuration
directory. Nothing is executed: every output on the site is the one stored in the notebook, the one strict
nbval checks. The repository and git ref of the "Colab" launch buttons come from ``[tool.course.colab]`` in
``pyproject.toml``, the same single source as the notebooks' badges.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))

from colab_sync import colab_config  # noqa: E402  (the one reader of [tool.course.colab])

COLAB = colab_config()

project = "Attention, Step by Step"
author = "The Attention, Step by Step authors"
copyright = "the Attention, Step by Step authors, MIT licence"
html_title = project

extensions = [
    "myst_nb",
    "sphinx_external_toc",
    "sphinx_book_theme",
    "sphinx_copybutton",
    "sphinx_togglebutton",
    "sphinx_design",
    # MathJax 3 served from the site itself (_static/mathjax), never from a CDN.
    "sphinx-mathjax-offline",
    # .nojekyll, so that GitHub Pages serves _static/ as it is.
    "sphinx.ext.githubpages",
]

# The table of contents: lessons and solutions found by glob, so a new notebook appears without an edit here.
external_toc_path = str(HERE / "_toc.yml")
external_toc_exclude_missing = False
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# Show the stored outputs; never run a notebook.
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
# No require.js or widget-manager script from a CDN (explorers are replaced by their static view when staged).
nb_ipywidgets_js = {}
# myst-nb's renderer with each figure's text alternative as its picture's alt (tools/book_images.py, registered in
# pyproject.toml's myst_nb.renderers entry points).
nb_render_plugin = "course"
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.domains"]

html_theme = "sphinx_book_theme"
_owner, _name = COLAB["repository"].split("/")
html_baseurl = f"https://{_owner}.github.io/{_name}/"  # where .github/workflows/pages.yml publishes the site
html_static_path = [str(HERE / "_static")]
# The theme's templates, patched where an accessibility audit (axe-core, tests/test_book.py) found a problem.
templates_path = [str(HERE / "_templates")]
html_css_files = ["course.css"]
html_favicon = str(HERE / "_static" / "favicon.svg")  # without one, browsers ask for /favicon.ico and get a 404
html_sourcelink_suffix = ""
html_last_updated_fmt = None
# The theme's light/dark mode: follow the reader's system until they pick one (an empty default logs an error).
html_context = {"default_mode": "auto"}
html_theme_options = {
    "repository_url": f"https://github.com/{COLAB['repository']}",
    "repository_branch": COLAB["ref"],
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "launch_buttons": {"colab_url": "https://colab.research.google.com", "notebook_interface": "jupyterlab"},
    "navigation_with_keys": False,
    "search_bar_text": "Search the course...",
}


def setup(app):
    return {"parallel_read_safe": True}
