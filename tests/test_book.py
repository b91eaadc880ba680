"""The course website (``python3 course.py book``): built from the stored outputs, checked in a real browser.

The first tests need no build: how a notebook is prepared for its static page (explorers become their stored
static view, the Colab badge gives way to the launch button) and that the repository slug is written only in
``pyproject.toml``. Then the site is built once for the module (``tools/build_book.py``) and its HTML is
checked: a page for every notebook, lessons then solutions in file order, previous/next links along the
lessons, nothing loaded from the web, the committed notebooks untouched.

The browser tests open every page from a local server in headless Chromium (the same browser and
Playwright as ``tests/test_browser.py``: Debian's Chromium, every host but localhost unresolvable) and fail
on a console error, a failed request, a missing image, a broken internal link or anchor, a LaTeX error or
unrendered math, a widget or an error shown, a figure whose ``alt`` is missing or a file name, a finding of
axe-core's accessibility audit of impact critical, serious or moderate (minor ones are listed in the output,
and ``test_the_accessibility_audit_covered_every_page`` prints the audit's summary line), or a Colab button
that does not open that page's notebook. They
save ``artifacts/screenshots/book-04_scaler.png`` and ``book-08_masking-dark.png`` (dark mode). Each check is
shown to fail on a deliberately broken scratch page. Without Chromium or playwright they fail and say how to
install them (``python tools/install_browser.py``); ``COURSE_SKIP_BROWSER=1`` skips them on purpose.
"""

from __future__ import annotations

import doctest
import hashlib
import os
import re
import sys
import time
import types
from pathlib import Path

import nbformat
import pytest
from browser.book import (
    FAILING_IMPACTS,
    SiteServer,
    axe_version,
    broken_links,
    check_page,
    expected_colab_link,
    site_browser_problem,
)
from browser.lab import SCREENSHOTS, LabBrowser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_book  # noqa: E402
import colab_sync  # noqa: E402

NOTEBOOKS = build_book.all_notebooks()
LESSONS = [p for p in NOTEBOOKS if p.parent == ROOT / "notebooks"]
SOLUTIONS = [p for p in NOTEBOOKS if p.parent != ROOT / "notebooks"]
PAGES = ["index.html", *[p.relative_to(ROOT).with_suffix(".html").as_posix() for p in NOTEBOOKS]]
WITH_EXPLORER = [p for p in NOTEBOOKS if build_book.WIDGET_VIEW in p.read_text()]
#: The two screenshots: (page, dark mode, element to scroll to, file name).
SCREENSHOT_PAGES = [
    ("notebooks/04_scaler.html", False, ".cell:has(.course-explorer-note)", "book-04_scaler.png"),
    ("notebooks/08_masking.html", True, ".cell:has(.cell_output img)", "book-08_masking-dark.png"),
]


def page_of(notebook: Path) -> str:
    return notebook.relative_to(ROOT).with_suffix(".html").as_posix()


# -- preparing a notebook for its page (no build) -----------------------------------------------------------


def test_build_book_examples():
    """The ``>>>`` examples in tools/build_book.py run (tools/ is not collected for doctests)."""
    result = doctest.testmod(build_book, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 3
    assert result.failed == 0


def test_some_lessons_have_explorers():
    assert WITH_EXPLORER, "no notebook stores an explorer: the explorer checks below check nothing"


@pytest.mark.parametrize("notebook", WITH_EXPLORER, ids=[p.stem for p in WITH_EXPLORER])
def test_an_explorer_becomes_its_stored_static_view(notebook):
    nb = nbformat.read(notebook, as_version=4)
    before = nbformat.writes(nb)
    site = build_book.prepare_notebook(nb)
    assert nbformat.writes(nb) == before, "prepare_notebook changed the notebook it was given"
    assert "widgets" not in site.metadata, "the saved widget state would make the page load a CDN script"
    assert build_book.WIDGET_VIEW not in nbformat.writes(site)
    explorers = [c for c in nb.cells if c.cell_type == "code" and build_book.WIDGET_VIEW in str(c.outputs)]
    for original in explorers:
        cell = next(c for c in site.cells if c.get("id") == original.get("id"))
        note = cell.outputs[0]["data"]["text/html"]
        assert build_book.EXPLORER_NOTE_CLASS in note
        assert build_book.EXPLORER_NOTE in note
        figures = [o for o in cell.outputs[1:] if "image/png" in o.get("data", {})]
        assert figures, f"{notebook.name}: the explorer's stored figure was not found in its widget state"


def test_an_explorer_without_saved_state_becomes_a_note():
    outputs = build_book.explorer_static_view("no-such-model", {})
    assert len(outputs) == 1
    assert build_book.EXPLORER_NOTE in outputs[0]["data"]["text/html"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_colab_badge_gives_way_to_the_launch_button(notebook):
    site = build_book.prepare_notebook(nbformat.read(notebook, as_version=4))
    tags = [c.get("metadata", {}).get("tags", []) for c in site.cells]
    assert not any(colab_sync.BADGE_TAG in t for t in tags)
    assert all("remove-cell" in t for t in tags if colab_sync.SETUP_TAG in t)
    setup = colab_sync.setup_source(colab_sync.colab_config())
    assert all("remove-cell" in c.metadata.get("tags", []) for c in site.cells if c.source == setup)
    assert "colab-badge.svg" not in nbformat.writes(site), "the badge picture would be fetched from the web"


def test_figures_get_their_text_alternative_through_myst_nbs_render_plugin():
    """book/conf.py chooses the ``course`` renderer (myst-nb's documented plug-in point, not a patch of myst-nb),
    the entry point finds it, and an image output's ``alt`` comes from its output's metadata."""
    from myst_nb.core.render import MimeData, NbElementRenderer, load_renderer

    conf = (ROOT / "book" / "conf.py").read_text()
    assert 'nb_render_plugin = "course"' in conf
    assert "NbElementRenderer" not in conf, "conf.py must not patch myst-nb's renderer"
    renderer = load_renderer("course")
    assert issubclass(renderer, NbElementRenderer)
    assert renderer.render_image is not NbElementRenderer.render_image
    site = types.SimpleNamespace(get_cell_level_config=lambda *args, **kwargs: {})
    element = renderer(site, logger=None)
    element.write_file = lambda path, content, overwrite=False, exists_ok=False: "_images/figure.png"
    png = "iVBORw0KGgo="
    data = MimeData("image/png", png, output_metadata={"image/png": {"alt": "Two bars: cat 0.7, dog 0.3."}})
    (image,) = element.render_image(data)
    assert image["alt"] == "Two bars: cat 0.7, dog 0.3."
    (plain,) = element.render_image(MimeData("image/png", png))
    assert "alt" not in plain.attributes or not plain["alt"]


def test_the_repository_slug_is_written_only_in_pyproject():
    """The site reads ``[tool.course.colab]``; no file of the site's build spells the slug a second time."""
    slug = colab_sync.colab_config()["repository"]
    files = [*(p for p in (ROOT / "book").rglob("*") if p.is_file() and "_build" not in p.parts),
             ROOT / "tools" / "build_book.py", ROOT / ".github" / "workflows" / "pages.yml"]
    assert [p.relative_to(ROOT) for p in files if slug in p.read_text(errors="replace")] == []


def test_readme_links_to_the_site_of_this_repository():
    owner, name = colab_sync.colab_config()["repository"].split("/")
    assert f"https://{owner}.github.io/{name}/" in (ROOT / "README.md").read_text()


# -- the built site -------------------------------------------------------------------------------------------


def _digest(paths) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()


@pytest.fixture(scope="module")
def site():
    """Build the site once for the module; yields its HTML folder."""
    before = _digest(NOTEBOOKS)
    start = time.perf_counter()
    try:
        index = build_book.build()
    except RuntimeError as error:
        pytest.fail(f"the website did not build: {error}", pytrace=False)
    print(f"built in {time.perf_counter() - start:.1f} s")  # reported, never asserted (a shared machine)
    assert _digest(NOTEBOOKS) == before, "building the site changed a committed notebook"
    return index.parent


def test_every_notebook_has_a_page(site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.glob("notebooks/**/*.html"))
    assert pages == sorted(PAGES[1:])
    assert (site / "index.html").is_file()


def test_the_sidebar_lists_lessons_then_solutions_in_file_order(site):
    index = (site / "index.html").read_text()
    nav = index[index.index("bd-sidenav"):index.index("</nav>", index.index("bd-sidenav"))]
    captions = re.findall(r'<span class="caption-text">([^<]+)</span>', nav)
    links = re.findall(r'href="(notebooks/[^"#]+\.html)"', nav)
    assert captions == ["Lessons", "Solutions"]
    assert links == [page_of(p) for p in LESSONS + SOLUTIONS]


def test_previous_and_next_follow_the_lessons(site):
    chain = ["index.html", *[page_of(p) for p in LESSONS + SOLUTIONS]]
    for before, page, after in zip([None, *chain[:-1]], chain, [*chain[1:], None], strict=True):
        text = (site / page).read_text()
        found = {kind: re.search(rf'<a class="{kind}"\s+href="([^"]+)"', text) for kind in ("left-prev", "right-next")}
        for kind, expected in (("left-prev", before), ("right-next", after)):
            target = found[kind] and (Path(page).parent / found[kind].group(1)).as_posix()
            assert (os.path.normpath(target) if target else None) == expected, f"{page}: {kind}"


@pytest.mark.parametrize("page", PAGES)
def test_nothing_is_loaded_from_the_web(site, page):
    text = (site / page).read_text()
    external = re.findall(r'<(?:script|img|iframe)[^>]*\bsrc="(https?:[^"]*)"', text)
    external += [h for tag in re.findall(r"<link[^>]*>", text) for h in re.findall(r'href="(https?:[^"]*)"', tag)
                 if "stylesheet" in tag or "preload" in tag]
    assert external == []


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_page_launches_its_notebook_on_colab(site, notebook):
    text = (site / page_of(notebook)).read_text()
    expected = expected_colab_link(page_of(notebook), colab_sync.colab_config())
    assert re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', text) == [expected]


def test_the_download_button_gives_the_committed_notebook(site):
    for notebook in NOTEBOOKS:
        assert (site / "_sources" / notebook.relative_to(ROOT)).read_bytes() == notebook.read_bytes()


# -- in the browser -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory, chromium):
    if os.environ.get("COURSE_SKIP_BROWSER") == "1":
        pytest.skip("COURSE_SKIP_BROWSER=1: the browser test was skipped on purpose")
    problem = site_browser_problem()
    if problem:
        pytest.fail(f"The browser test cannot run: {problem}", pytrace=False)
    with LabBrowser(tmp_path_factory.mktemp("book-browser"), executable=chromium) as running:
        yield running


@pytest.fixture(scope="module")
def server(site):
    with SiteServer(site) as running:
        yield running


_LINK_CACHE: dict = {}
#: What the accessibility audit found on each page: ``{page: (failing findings, minor findings)}``.
_AUDIT: dict[str, tuple[list[str], list[str]]] = {}


@pytest.mark.parametrize("page", PAGES)
def test_every_page_reads_cleanly_in_the_browser(browser, server, page):
    report = check_page(browser, server, page, colab_sync.colab_config())
    report.problems += broken_links(server, {link: {page} for link in report.links}, _LINK_CACHE)
    _AUDIT[page] = ([p for p in report.problems if p.startswith("accessibility (")], report.minor)
    print(report.summary())
    assert report.problems == [], "\n" + report.summary()
    assert report.theme == "light"
    assert report.links, "no internal link found: the page did not load"
    notebook = ROOT / Path(page).with_suffix(".ipynb")
    if notebook in WITH_EXPLORER:
        assert report.explorers >= 1, "an explorer's static view is missing"
    if notebook.is_file():
        assert report.code > 0, "the page's code was not highlighted"
        site_copy = build_book.prepare_notebook(nbformat.read(notebook, as_version=4))
        shown = [c for c in site_copy.cells
                 if c.cell_type == "code" and "remove-cell" not in c.metadata.get("tags", [])]
        stored = [o for c in shown for o in c.outputs if "image/png" in o.get("data", {})]
        assert report.figures == len(stored), "not every stored figure is shown"
        assert all(report.alts), "a figure has no text alternative"
    if page == "index.html":
        assert report.math >= 1, "the landing page's formula was not typeset"
        assert report.code > 0, "the landing page's code was not highlighted"


def test_the_accessibility_audit_covered_every_page():
    """The audit's summary line: every page audited, no finding of impact critical, serious or moderate."""
    if not _AUDIT:
        pytest.skip("the pages were not checked in this run (run the whole module)")
    failing = sorted({line.split(":")[0] for found, _ in _AUDIT.values() for line in found})
    minor = sorted({line.split(":")[0] for _, found in _AUDIT.values() for line in found})
    print(f"accessibility audit (axe-core {axe_version()}): {len(_AUDIT)} of {len(PAGES)} pages, "
          f"{sum(len(f) for f, _ in _AUDIT.values())} finding(s) of impact {'/'.join(FAILING_IMPACTS)}"
          f"{' ' + str(failing) if failing else ''}, {sum(len(m) for _, m in _AUDIT.values())} minor"
          f"{' ' + str(minor) if minor else ''}")
    assert not failing


def test_search_finds_a_lesson(browser, server):
    tab = browser.context.new_page()
    try:
        tab.goto(f"{server.url}/search.html?q=softmax", wait_until="load")
        tab.wait_for_selector("#search-results li a", timeout=30_000)
        found = tab.eval_on_selector_all("#search-results li a", "els => els.map(e => e.getAttribute('href'))")
    finally:
        tab.close()
    assert any("05_percentages" in href for href in found), found


@pytest.mark.parametrize(("page", "dark", "scroll_to", "name"), SCREENSHOT_PAGES,
                         ids=[s[3].removesuffix(".png") for s in SCREENSHOT_PAGES])
def test_screenshots(browser, server, page, dark, scroll_to, name):
    report = check_page(browser, server, page, colab_sync.colab_config(), dark=dark, screenshot=SCREENSHOTS / name,
                        scroll_to=scroll_to)
    assert report.problems == [], "\n" + report.summary()
    assert report.theme == ("dark" if dark else "light")
    assert report.screenshot.is_file()
    print(f"screenshot: {report.screenshot}")


# -- each check fails on a deliberately broken page -----------------------------------------------------------

SCRATCH = {
    "console-error": ("<script>console.error('deliberate')</script>", "console error: deliberate"),
    "javascript-error": ("<script>undefinedFunction()</script>", "JavaScript error"),
    "missing-image": ('<img src="no_such_picture.png">', "missing image: no_such_picture.png"),
    "image-from-the-web": ('<img src="https://example.org/x.png">', "image from the web"),
    "unrendered-dollar-math": ("<p>Attention is $softmax(QK^T)V$.</p>", "unrendered math: $softmax(QK^T)V$"),
    "unrendered-math": (r'<span class="math">\(x^2\)</span>', "unrendered math"),
    "latex-error": (r'<script src="../_static/mathjax/tex-chtml.js"></script><p>\(\frac{1}\)</p>',
                    "LaTeX error: Missing argument for \\frac"),
    "widget": ('<script type="application/vnd.jupyter.widget-view+json">{"model_id": "x"}</script>',
               "widget shown"),
    "error-text": ("<article><pre>Error displaying widget: model not found</pre></article>", "error text shown"),
    "no-colab-link": ("<p>no launch button</p>", "no Colab link to this notebook"),
    "colab-link-to-another-notebook": (
        '<a href="https://colab.research.google.com/github/someone/else/blob/main/notebooks/01_x.ipynb">Colab</a>',
        "Colab link to another notebook"),
    "figure-alt-is-its-file-name": (
        '<div class="cell_output"><img src="../_static/favicon.svg" alt="../_images/4443b4cd1e32.png"></div>',
        "figure without a text alternative"),
    "figure-without-alt": ('<div class="cell_output"><img src="../_static/favicon.svg"></div>',
                           "accessibility (critical) image-alt"),
    "low-contrast-text": ('<p style="color: #bbb; background: #fff">hard to read</p>',
                          "accessibility (serious) color-contrast"),
    "content-outside-landmarks": ("</main><p>outside every landmark</p><main>", "accessibility (moderate) region"),
}


@pytest.fixture(scope="module")
def scratch(site, tmp_path_factory):
    """A scratch site beside the real one: its ``_static`` (MathJax) and a notebook page to break."""
    root = tmp_path_factory.mktemp("scratch-site")
    (root / "_static").symlink_to(site / "_static", target_is_directory=True)
    (root / "notebooks").mkdir()
    with SiteServer(root) as running:
        yield root, running


def _scratch_page(root: Path, body: str) -> str:
    page = f"notebooks/{LESSONS[0].stem}.html"  # a lesson's page: it must launch that lesson on Colab
    (root / page).write_text(f'<!doctype html><html lang="en"><head><title>scratch</title></head>'
                             f"<body><main><h1>A scratch page</h1>{body}</main></body></html>")
    return page


@pytest.mark.parametrize("case", SCRATCH)
def test_a_broken_page_is_reported(browser, scratch, case):
    root, running = scratch
    body, expected = SCRATCH[case]
    page = _scratch_page(root, body)
    report = check_page(browser, running, page, colab_sync.colab_config())
    print(report.summary())
    assert any(expected in problem for problem in report.problems), report.summary()


def test_a_minor_accessibility_finding_is_listed_not_failed(browser, scratch):
    root, running = scratch
    colab = expected_colab_link(f"notebooks/{LESSONS[0].stem}.html", colab_sync.colab_config())
    table = "<table><tr><th></th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
    page = _scratch_page(root, f'<a href="{colab}">Colab</a>{table}')
    report = check_page(browser, running, page, colab_sync.colab_config())
    print(report.summary())
    assert report.problems == []
    assert any("empty-table-header" in line for line in report.minor), report.minor


@pytest.mark.parametrize(("href", "expected"), [
    ("no_such_page.html", "broken link notebooks/no_such_page.html"),
    ("#nowhere", "no such anchor"),
])
def test_a_broken_link_is_reported(browser, scratch, href, expected):
    root, running = scratch
    colab = expected_colab_link(f"notebooks/{LESSONS[0].stem}.html", colab_sync.colab_config())
    page = _scratch_page(root, f'<a href="{colab}">Colab</a><a href="{href}">a link</a>')
    report = check_page(browser, running, page, colab_sync.colab_config())
    assert report.problems == []
    problems = broken_links(running, {link: {page} for link in report.links})
    assert any(expected in problem for problem in problems), problems
