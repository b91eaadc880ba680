"""Every lesson, run in JupyterLab in a real (headless) browser, the way a learner runs it.

nbval checks what the kernel prints; this test checks what the learner *sees*. For each numbered lesson
``notebooks/NN_*.ipynb`` (those that exist when pytest collects) it opens the notebook in JupyterLab, checks that
it opens unmodified (JupyterLab rewrote nothing as the kernel started, so its tab shows no dot), clears the
outputs and runs *Run → Run All Cells* from the menu bar, waits for the kernel to go idle, and fails when
a cell shows a traceback or an error output or did not run, a widget shows "Error displaying widget" (or never
loads), a markdown cell has a LaTeX error or a picture that does not load, or JupyterLab's log console holds
a traceback. Every explorer (ipywidgets controls above a figure) is operated with the keyboard only, as a
learner without a mouse would: Tab to each control, then the arrow keys (sliders, drop-downs) or the space bar
(checkboxes); the figure must change each time. Every link between notebooks is followed to its section: the
target notebook must exist and carry the fragment as an element id in JupyterLab (whose heading ids keep
capitals, unlike the website's). Each check is shown to fail on a deliberately broken scratch notebook.

Screenshots go to ``artifacts/screenshots/`` (``COURSE_SCREENSHOT_DIR`` to change): ``NN_name.png`` (the
page at the first problem, else at the first explorer or figure) and, for a lesson with an explorer,
``NN_name-explorer.png``, a small picture cropped to that explorer, meant for the README. To make just one::

    python -m pytest tests/test_browser.py -k 04_scaler

What it needs: Chromium and the Python package ``playwright`` (in the ``[dev]`` extras). When the tests selected
to run use the ``chromium`` fixture (``tests/conftest.py``) and no Chromium is found, the run installs one before
its first test: Debian's through apt as root or with passwordless sudo, else Playwright's own download
(``tools/chromium.py`` finds either). Without a browser the test FAILS once
(``test_the_browser_is_available`` says how to get one; the other browser tests then skip); it never passes
without having run. A learner who only wants the rest of the suite can opt out with ``COURSE_SKIP_BROWSER=1``, e.g.
``COURSE_SKIP_BROWSER=1 python3 course.py test``. ``COURSE_CHROMIUM=/path/to/chrome`` picks another browser.

The test works on a temporary copy of ``notebooks/`` (the committed notebooks are never opened, autosave is
off, and each check fails if the file it opened changed), starts one JupyterLab server (127.0.0.1, free port,
random token, temporary config, settings and workspace folders) and one Chromium (fresh profile, every host
but localhost unresolvable) for the whole module, and a fresh page and kernel per notebook. On a 2-core
machine a lesson takes 9-17 s and the whole module about 5 minutes.
"""

from __future__ import annotations

import copy
import os

import nbformat
import pytest
from browser.check import check_notebook, link_problems, read_links
from browser.lab import (
    LabBrowser,
    LabServer,
    browser_problem,
    lesson_notebooks,
)
from ipykernel.ipkernel import IPythonKernel

LESSONS = lesson_notebooks()
#: What each lesson's check saw (its links and anchors), for the cross-notebook link test at the end.
CHECKED: dict = {}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, chromium):
    """One JupyterLab server and one browser for the whole module: ``(server, browser)``."""
    if os.environ.get("COURSE_SKIP_BROWSER") == "1":
        pytest.skip("COURSE_SKIP_BROWSER=1: the browser test was skipped on purpose")
    if browser_problem():  # said once, by test_the_browser_is_available, not once per test
        pytest.skip("no browser: see test_the_browser_is_available")
    workdir = tmp_path_factory.mktemp("browser")
    with LabServer(workdir) as server, LabBrowser(workdir, executable=chromium) as browser:
        yield server, browser


#: The metadata JupyterLab writes as the kernel starts (what ``course.py execute`` stores): a scratch notebook with
#: it opens unmodified.
KERNEL_METADATA = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                   "language_info": IPythonKernel.language_info}
#: What notebooks stored before: JupyterLab rewrites both as the kernel starts, and the notebook opens modified.
OLD_METADATA = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "language_info": {"name": "python"}}


def write_notebook(server: LabServer, name: str, *sources: str, metadata: dict = KERNEL_METADATA) -> str:
    """Write a scratch notebook into the server's (temporary) root; returns its name.

    Each source is a code cell, or a markdown cell when it starts with ``md:``.
    """
    nb = nbformat.v4.new_notebook()
    nb.metadata.update(copy.deepcopy(metadata))
    nb.cells = [nbformat.v4.new_markdown_cell(source.removeprefix("md:")) if source.startswith("md:")
                else nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, server.root / name)
    return name


def test_the_browser_is_available(chromium):
    """The one failure (with what to do) when the browser test cannot run; the other tests then skip."""
    if os.environ.get("COURSE_SKIP_BROWSER") == "1":
        pytest.skip("COURSE_SKIP_BROWSER=1: the browser test was skipped on purpose")
    problem = browser_problem()
    if problem:
        pytest.fail(f"The browser test cannot run: {problem}", pytrace=False)


def test_lessons_exist():
    assert LESSONS, "no numbered lessons notebooks/NN_*.ipynb were found"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_cleanly_in_jupyterlab(lab, lesson):
    """The lesson opens unmodified, runs from the menu without a problem, and its explorers work by keyboard."""
    server, browser = lab
    report = check_notebook(browser, server, lesson.name)
    CHECKED[lesson.name] = report
    print(report.summary())
    assert not report.problems, "\n" + report.summary()
    assert report.explorers_checked == report.explorers
    assert report.screenshots, "no screenshot was saved"
    assert all(path.is_file() for path in report.screenshots)


def test_every_link_between_notebooks_reaches_its_section(lab):
    """Each lesson's links to other notebooks (``11_word_order.ipynb#self-attention-and-cross-attention``) and to
    its own sections, followed in JupyterLab: the notebook exists and has an element with that id."""
    server, browser = lab
    reports = {name: report for name, report in CHECKED.items()}
    for lesson in LESSONS:  # lessons whose run was not part of this session are opened just to read them
        if lesson.name not in reports:
            reports[lesson.name] = read_links(browser, server, lesson.name)
    checked = sum(1 for r in list(reports.values()) for link in r.links if link["path"].endswith(".ipynb")
                  or (link["fragment"] and not link["path"]))
    problems = link_problems(reports, lambda relative: read_links(browser, server, relative)
                             if (server.root / relative).is_file() else None)
    print(f"{checked} link(s) between notebooks or to a section followed; {len(problems)} broken")
    assert checked, "no link between notebooks was found: the check checks nothing"
    assert not problems, "\n" + "\n".join(problems)


def test_a_broken_section_link_is_reported(lab):
    """A link whose fragment is the website's lower-case id misses in JupyterLab, and the check says so."""
    server, browser = lab
    write_notebook(server, "scratch_target.ipynb", "md:# Scratch target\n\n## Self Attention Again\n\ntext")
    name = write_notebook(server, "scratch_links.ipynb",
                          "md:[fine](scratch_target.ipynb#Self-Attention-Again), "
                          "[missed](scratch_target.ipynb#self-attention-again), [gone](no_such_notebook.ipynb)")
    reports = {name: read_links(browser, server, name)}
    problems = link_problems(reports, lambda relative: read_links(browser, server, relative)
                             if (server.root / relative).is_file() else None)
    print(problems)
    assert len(problems) == 2, problems
    assert "#self-attention-again: no such section in JupyterLab; JupyterLab's id is" in problems[0] + problems[1]
    assert any("no such notebook" in p for p in problems)


EXPLORER = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt

from attention_lib.widgets import make_explorer


def render(n, kind, grid):
    fig, ax = plt.subplots(figsize=(3, 2))
    if kind == "line":
        ax.plot(range(n))
    else:
        ax.bar(range(n), range(n))
    ax.grid(grid)
    return fig


controls = {"n": widgets.IntSlider(value=3, min=1, max=9), "kind": widgets.Dropdown(options=["line", "bar"]),
            "grid": widgets.Checkbox(value=False, description="grid")}
make_explorer(render, controls, title="a working explorer")
"""


def test_a_working_explorer_is_checked(lab):
    """The explorer check itself works: a make_explorer whose figure follows its controls passes, and each of
    its controls (a slider, a drop-down, a checkbox) is reached with Tab and changed from the keyboard."""
    server, browser = lab
    name = write_notebook(server, "scratch_good_explorer.ipynb", EXPLORER)
    report = check_notebook(browser, server, name, screenshot_dir=None)
    print(report.summary())
    assert report.problems == []
    assert (report.explorers, report.explorers_checked) == (1, 1)
    kinds = [line.split(": ", 1)[1].split()[0] for line in report.keyboard]
    assert kinds == ["slider", "dropdown", "checkbox"], report.keyboard


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

KEYBOARD_DEAD_EXPLORER = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt

from attention_lib.widgets import make_explorer


def render(n):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(range(n))
    return fig


# Its only control cannot be changed (disabled): the keyboard finds nothing to operate.
make_explorer(render, {"n": widgets.IntSlider(value=3, min=1, max=9, disabled=True)})
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

def test_a_notebook_that_opens_modified_is_reported(lab):
    """A notebook stored with metadata that JupyterLab rewrites as the kernel starts (what notebooks stored before)
    opens with the dot on its tab, and the check names what was rewritten."""
    server, browser = lab
    name = write_notebook(server, "scratch_modified.ipynb", "x = 1", metadata=OLD_METADATA)
    report = check_notebook(browser, server, name, screenshot_dir=None)
    print(report.summary())
    assert any("opens as modified (jp-mod-dirty) before any edit" in p and "kernelspec" in p
               for p in report.problems), report.summary()
    unmodified = check_notebook(browser, server, write_notebook(server, "scratch_unmodified.ipynb", "x = 1"),
                                screenshot_dir=None)
    assert unmodified.problems == [], unmodified.summary()


@pytest.mark.parametrize(("sources", "expected"), [
    pytest.param([BROKEN_WIDGET], "widget error: Error displaying widget", id="broken-widget"),
    pytest.param(["x = 1", "raise ValueError('deliberate')", "y = 2"], "error output: ValueError: deliberate",
                 id="exception"),
    pytest.param([PRINTED_TRACEBACK], "traceback shown", id="printed-traceback"),
    pytest.param(["md:# A picture\n\n![diagram](no_such_picture.png)", "x = 1"], "broken image: no_such_picture.png",
                 id="broken-image"),
    pytest.param(["md:A fraction with a missing argument: $\\frac{1}$", "x = 1"],
                 "LaTeX error: Missing argument for \\frac", id="latex-error"),
    pytest.param([FROZEN_EXPLORER], "explorer figure did not change", id="frozen-explorer"),
    pytest.param([KEYBOARD_DEAD_EXPLORER], "from the keyboard", id="no-keyboard"),
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

