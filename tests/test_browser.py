"""Every lesson, run in JupyterLab in a real (headless) browser, the way a learner runs it.

nbval checks what the kernel prints; this test checks what the learner *sees*. For each numbered lesson
``notebooks/NN_*.ipynb`` it opens the notebook in JupyterLab, runs *Run → Run All Cells* from the menu bar,
waits for the kernel to go idle, and fails when any cell shows a traceback or an error, did not run, shows
"Error displaying widget" (or a widget that never loads), or when a markdown cell has a LaTeX error. For every
explorer (an ipywidgets control above a figure) it moves a control as a learner would and fails unless the
figure changes. A screenshot of each lesson goes to ``artifacts/screenshots/`` (``NN_name.png``, plus
``NN_name-explorer.png``, a small picture of the first explorer, for the README); set
``COURSE_SCREENSHOT_DIR`` to write them elsewhere.

What it needs: Chromium and the Python package ``playwright`` (Playwright's own browser download is not
used; the test drives the system's Chromium). Install both on Debian/Ubuntu with::

    bash tools/install_browser.sh

Without them the test FAILS and says so. A learner who only wants the rest of the suite can skip it with
``COURSE_SKIP_BROWSER=1 python course.py test``. ``COURSE_CHROMIUM=/path/to/chrome`` picks another browser.

The test works on a temporary copy of ``notebooks/`` (the committed notebooks are never opened, so they
cannot be saved or changed), starts one JupyterLab server (localhost, free port, random token, temporary
config, settings and workspace folders) and one Chromium (fresh profile, no internet) for the whole module,
and a fresh kernel per lesson. Run it alone with ``python -m pytest tests/test_browser.py -q``; it takes about
15-30 s per lesson on a 2-core machine.
"""

from __future__ import annotations

import os

import nbformat
import pytest
from browser.lab import (
    LabBrowser,
    LabServer,
    browser_problem,
    check_notebook,
    lesson_notebooks,
)

LESSONS = lesson_notebooks()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab server and one browser for the whole module: ``(server, browser)``."""
    if os.environ.get("COURSE_SKIP_BROWSER") == "1":
        pytest.skip("COURSE_SKIP_BROWSER=1: the browser test was skipped on purpose")
    problem = browser_problem()
    if problem:
        pytest.fail(f"The browser test cannot run: {problem}", pytrace=False)
    workdir = tmp_path_factory.mktemp("browser")
    with LabServer(workdir) as server, LabBrowser(workdir) as browser:
        yield server, browser


def write_notebook(server: LabServer, name: str, *sources: str) -> str:
    """Write a scratch notebook of code cells into the server's (temporary) root; returns its name."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, server.root / name)
    return name


def test_lessons_exist():
    assert LESSONS, "no numbered lessons notebooks/NN_*.ipynb were found"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_cleanly_in_jupyterlab(lab, lesson):
    server, browser = lab
    report = check_notebook(browser, server, lesson.name)
    print(report.summary())
    assert not report.problems, "\n" + report.summary()
    assert report.explorers_checked == report.explorers
    assert report.screenshots, "no screenshot was saved"
    assert all(path.is_file() for path in report.screenshots)


EXPLORER = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt

from attention_lib.widgets import make_explorer


def render(n, kind):
    fig, ax = plt.subplots(figsize=(3, 2))
    if kind == "line":
        ax.plot(range(n))
    else:
        ax.bar(range(n), range(n))
    return fig


controls = {"n": widgets.IntSlider(value=3, min=1, max=9), "kind": widgets.Dropdown(options=["line", "bar"])}
make_explorer(render, controls, title="a working explorer")
"""


def test_a_working_explorer_is_checked(lab):
    """The explorer check itself works: a make_explorer whose figure follows its controls passes."""
    server, browser = lab
    name = write_notebook(server, "scratch_good_explorer.ipynb", EXPLORER)
    report = check_notebook(browser, server, name, screenshot_dir=None)
    print(report.summary())
    assert report.problems == []
    assert (report.explorers, report.explorers_checked) == (1, 1)


BROKEN_WIDGET = """\
import ipywidgets as widgets
from traitlets import Unicode


class Broken(widgets.DOMWidget):
    # No JupyterLab extension provides this view: JupyterLab shows "Error displaying widget".
    _view_module = Unicode("course-no-such-widget-module").tag(sync=True)
    _view_module_version = Unicode("1.0.0").tag(sync=True)
    _view_name = Unicode("NoSuchView").tag(sync=True)


Broken()
"""

PRINTED_TRACEBACK = """\
import traceback

try:
    1 / 0
except ZeroDivisionError:
    traceback.print_exc()  # no error output, but the learner sees a traceback
"""

FROZEN_EXPLORER = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt

from attention_lib.widgets import make_explorer


def render(n):  # forgets to use n: the slider moves, the figure stays the same
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(range(3))
    return fig


make_explorer(render, {"n": widgets.IntSlider(value=3, min=1, max=9)})
"""

FAILING_EXPLORER = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt

from attention_lib.widgets import make_explorer


def render(n):  # fails for every value but the first: nbval never sees it, the learner does
    if n != 3:
        raise ValueError("n must be 3")
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(range(n))
    return fig


make_explorer(render, {"n": widgets.IntSlider(value=3, min=1, max=9)})
"""

@pytest.mark.parametrize(("sources", "expected"), [
    pytest.param([BROKEN_WIDGET], "widget error: Error displaying widget", id="broken-widget"),
    pytest.param(["x = 1", "raise ValueError('deliberate')", "y = 2"], "error output: ValueError: deliberate",
                 id="exception"),
    pytest.param([PRINTED_TRACEBACK], "traceback shown", id="printed-traceback"),
    pytest.param([FROZEN_EXPLORER], "explorer figure did not change", id="frozen-explorer"),
    pytest.param([FAILING_EXPLORER], "log console shows a traceback (an error outside any cell, e.g. in an explorer "
                 "callback): ValueError: n must be 3", id="explorer-raises"),
])
def test_a_broken_notebook_is_reported(lab, sources, expected):
    """The same checking routine reports each kind of breakage (so a green lesson run means something)."""
    server, browser = lab
    name = write_notebook(server, "scratch_broken.ipynb", *sources)
    report = check_notebook(browser, server, name, screenshot_dir=None)
    print(report.summary())
    assert any(expected in problem for problem in report.problems), report.summary()

