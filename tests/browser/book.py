"""The course website in a real browser: a local server for the built site and a check of one page.

``tests/test_book.py`` builds the site (``tools/build_book.py``), serves it with :class:`SiteServer` on
``127.0.0.1`` and opens every page in the same headless Chromium as the JupyterLab test
(:class:`browser.lab.LabBrowser`: Debian's Chromium, every host but localhost unresolvable, so anything the
site would fetch from the web fails and shows up as a console error). :func:`check_page` reports what a
reader would see go wrong on a page.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

from tools.chromium import find_chromium

from .lab import INSTALL_HINT, ROOT, free_port

COLAB = "https://colab.research.google.com/github/"

# Everything the page shows that could be wrong, collected once MathJax has finished.
JS_PAGE = """() => {
  const found = [];
  const add = (kind, text) => found.push(kind + ': ' + String(text || '').slice(0, 300));
  const same = (u) => new URL(u, location.href).origin === location.origin;
  for (const img of document.querySelectorAll('img')) {
    const src = img.getAttribute('src') || '';
    if (!same(src)) add('image from the web', src);
    else if (img.complete && !img.naturalWidth) add('missing image', src);
    // A figure's text alternative: present, and a sentence, never a file name (Sphinx's fallback).
    const alt = (img.getAttribute('alt') || '').trim();
    const file = src.split('/').pop();
    if (img.closest('.cell_output, article') && (!alt || alt === src || alt.endsWith(file) ||
        /\\.(png|jpe?g|gif|svg|webp)$/i.test(alt) || /^[0-9a-f]{32,}$/i.test(alt))) {
      add('figure without a text alternative', src + (alt ? ' (alt="' + alt + '")' : ' (no alt)'));
    }
  }
  for (const el of document.querySelectorAll('mjx-merror, .MathJax_Error')) {
    add('LaTeX error', (el.getAttribute('data-mjx-error') || 'error') + ' in ' + el.textContent);
  }
  for (const el of document.querySelectorAll('.math')) {
    if (!el.querySelector('mjx-container')) add('unrendered math', el.textContent);
  }
  // Dollar math that was never parsed: "$...$" left in the text of the article (code excluded).
  const article = document.querySelector('article') || document.body;
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest('pre, code, .highlight, .output, .cell_output, mjx-container')) continue;
    const m = node.textContent.match(/\\$[^$\\s][^$]*\\$/);
    if (m) add('unrendered math', m[0]);
  }
  for (const el of document.querySelectorAll('.jupyter-widgets, .widget-area')) {
    add('widget shown', el.className);
  }
  for (const el of document.querySelectorAll('script[type^="application/vnd.jupyter.widget"]')) {
    add('widget shown', el.type);
  }
  const text = article.innerText;
  if (/Error displaying widget|Loading widget\\.\\.\\.|Traceback \\(most recent call last\\)/.test(text)) {
    add('error text shown', text.match(/Error displaying widget|Loading widget\\.\\.\\.|Traceback[^\\n]*/)[0]);
  }
  const hrefs = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const prev = document.querySelector('.prev-next-area a.left-prev');
  const next = document.querySelector('.prev-next-area a.right-next');
  return {
    problems: found,
    links: hrefs.filter(h => same(h)),
    colab: hrefs.filter(h => h.startsWith('https://colab.research.google.com/')),
    prev: prev ? prev.href : null,
    next: next ? next.href : null,
    theme: document.documentElement.dataset.theme || '',
    explorers: document.querySelectorAll('.course-explorer-note').length,
    math: document.querySelectorAll('mjx-container').length,
    code: document.querySelectorAll('div.highlight pre span').length,
    figures: [...document.querySelectorAll('.cell_output img')].filter(i => i.complete && i.naturalWidth).length,
    alts: [...document.querySelectorAll('.cell_output img')].map(i => i.getAttribute('alt') || ''),
    title: document.title,
  };
}"""

# Resolves once MathJax (when the page loads it) has typeset the page.
JS_MATH_DONE = """async () => {
  for (let i = 0; i < 200 && document.querySelector('script[src*="mathjax"]') &&
                  !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) {
    await new Promise(r => setTimeout(r, 50));
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  return true;
}"""


def site_browser_problem() -> str | None:
    """Why the site's browser test cannot run here (with how to fix it), or None when it can."""
    import importlib.util

    if importlib.util.find_spec("playwright") is None:
        return f"the Python package `playwright` is not installed: {INSTALL_HINT}"
    if find_chromium() is None:
        return f"no Chromium found: {INSTALL_HINT}"
    return None


@dataclass
class PageReport:
    """What :func:`check_page` saw on one page; ``problems`` is empty when a reader sees nothing wrong."""

    path: str  #: the page, relative to the site's root (``notebooks/04_scaler.html``)
    problems: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  #: internal links (absolute URLs on the local server)
    colab: list[str] = field(default_factory=list)  #: links to Colab
    prev: str | None = None
    next: str | None = None
    theme: str = ""
    explorers: int = 0  #: explorer notes (an explorer's static view)
    math: int = 0  #: formulas typeset by MathJax
    code: int = 0  #: highlighted code tokens
    figures: int = 0  #: pictures in cell outputs that loaded
    alts: list[str] = field(default_factory=list)  #: the text alternatives of those pictures
    audited: bool = False  #: whether axe-core ran on the page
    minor: list[str] = field(default_factory=list)  #: axe-core's violations of impact "minor" (listed, allowed)
    screenshot: Path | None = None

    def summary(self) -> str:
        lines = [f"{self.path}: {len(self.problems)} problem(s), {self.figures} figure(s), {self.math} formula(s), "
                 f"{self.explorers} explorer(s), {len(self.links)} internal link(s), theme {self.theme or '?'}"
                 + (f", accessibility audit: {len(self.minor)} minor finding(s)" if self.audited else "")]
        lines += [f"  - {p}" for p in self.problems]
        lines += [f"  minor (allowed): {m}" for m in self.minor]
        return "\n".join(lines)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Cache-Control", "no-store")  # a page rewritten between two checks is fetched anew
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002  (the base class's name)
        pass


class SiteServer:
    """A static HTTP server for ``directory`` on ``127.0.0.1`` (free port), in a thread; a context manager."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = None
        self._thread = None

    def __enter__(self) -> SiteServer:
        handler = functools.partial(_QuietHandler, directory=str(self.directory))
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def path_of(self, url: str) -> str:
        """The path under the site's root that ``url`` names (no fragment; ``index.html`` for a folder)."""
        path = urlsplit(urldefrag(url)[0]).path.lstrip("/")
        return path + "index.html" if path == "" or path.endswith("/") else path


def expected_colab_link(page: str, colab: dict[str, str]) -> str | None:
    """The Colab link a notebook page must carry (from ``[tool.course.colab]``), or None for other pages.

    Example:
        >>> expected_colab_link("notebooks/04_scaler.html", {"repository": "me/course", "ref": "main"})
        'https://colab.research.google.com/github/me/course/blob/main/notebooks/04_scaler.ipynb'
        >>> expected_colab_link("index.html", {"repository": "me/course", "ref": "main"}) is None
        True
    """
    notebook = ROOT / Path(page).with_suffix(".ipynb")
    if not page.startswith("notebooks/") or not notebook.is_file():
        return None
    return f"{COLAB}{colab['repository']}/blob/{colab['ref']}/{Path(page).with_suffix('.ipynb').as_posix()}"


def check_page(browser, server: SiteServer, page: str, colab: dict[str, str], *, dark: bool = False,
               screenshot: Path | None = None, scroll_to: str | None = None, audit: bool = True) -> PageReport:
    """Open ``page`` (a path under the site's root) in a fresh tab and report what is wrong on it.

    Problems: a console error or an uncaught exception (anything fetched from the web fails here, so it shows
    as one), a request that failed or answered 4xx/5xx, a missing image or one from the web, a LaTeX error or
    math left unrendered, a widget or an error shown, and on a notebook page a Colab link missing or pointing
    at another notebook, a figure whose ``alt`` is missing or a file name, and (with ``audit``) every violation
    of impact critical, serious or moderate that axe-core finds (:func:`accessibility_audit`; the minor ones
    are listed in ``report.minor``). Internal links are returned for :func:`broken_links`. With ``dark``, the page is
    opened with the reader's system set to dark mode (the theme's default "auto" follows it). With
    ``screenshot``, the viewport is saved there, scrolled to the first element matching ``scroll_to``.
    """
    report = PageReport(page)
    tab = browser.context.new_page()
    try:
        tab.on("console", lambda m: m.type == "error" and report.problems.append(f"console error: {m.text}"))
        tab.on("pageerror", lambda e: report.problems.append(f"JavaScript error: {e}"))
        tab.on("requestfailed", lambda r: report.problems.append(f"request failed: {r.url} ({r.failure})"))
        tab.on("response", lambda r: r.status >= 400 and report.problems.append(f"HTTP {r.status}: {r.url}"))
        tab.emulate_media(color_scheme="dark" if dark else "light")
        tab.goto(f"{server.url}/{page}", wait_until="load")
        tab.evaluate(JS_MATH_DONE)
        seen = tab.evaluate(JS_PAGE)
        report.problems += seen["problems"]
        for name in ("links", "colab", "prev", "next", "theme", "explorers", "math", "code", "figures", "alts"):
            setattr(report, name, seen[name])
        if audit:
            serious, report.minor = accessibility_audit(tab)
            report.problems += serious
            report.audited = True
        expected = expected_colab_link(page, colab)
        if expected is not None and expected not in report.colab:
            report.problems.append(f"no Colab link to this notebook ({expected}); found {report.colab or 'none'}")
        for link in report.colab:
            if expected is None or link != expected:
                report.problems.append(f"Colab link to another notebook: {link}")
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            if scroll_to:
                with contextlib.suppress(Exception):
                    tab.locator(scroll_to).first.evaluate(
                        "el => { el.scrollIntoView({block: 'start'}); window.scrollBy(0, -90); }")
                    tab.wait_for_timeout(300)
            tab.screenshot(path=str(screenshot))
            report.screenshot = screenshot
    finally:
        tab.close()
    return report


#: axe-core's impacts that fail the audit; "minor" findings are listed in the test's output only.
FAILING_IMPACTS = ("critical", "serious", "moderate")


def accessibility_audit(tab) -> tuple[list[str], list[str]]:
    """Run axe-core (``axe-playwright-python``) on the open page: ``(failing, minor)`` findings, one line each.

    axe-core checks the page against WCAG 2.0/2.1 A and AA and its best practices (text alternatives,
    contrast, landmarks, headings, names of links and buttons, table headers, ...). A finding of impact
    critical, serious or moderate fails; a minor one is only listed.
    """
    from axe_playwright_python.sync_playwright import Axe

    # preload=False: axe-core would fetch the stylesheets' @import (the theme's "../basic.css") relative to the
    # page instead of the stylesheet, a 404 that the page never makes; only the rule css-orientation-lock uses them.
    results = Axe().run(tab, options={"resultTypes": ["violations"], "preload": False}).response
    failing, minor = [], []
    for violation in results["violations"]:
        targets = ", ".join(" ".join(map(str, node["target"])) for node in violation["nodes"][:3])
        more = f" and {len(violation['nodes']) - 3} more" if len(violation["nodes"]) > 3 else ""
        line = (f"accessibility ({violation['impact']}) {violation['id']}: {violation['help']} "
                f"[{len(violation['nodes'])} element(s): {targets}{more}]")
        (failing if violation["impact"] in FAILING_IMPACTS else minor).append(line)
    return failing, minor


def axe_version() -> str:
    """The version of axe-core that :func:`accessibility_audit` runs (read from the bundled script)."""
    from axe_playwright_python.base import AXE_SCRIPT

    found = re.search(r"axe v(\d+\.\d+\.\d+)", AXE_SCRIPT[:2000]) or re.search(r'version:"(\d+\.\d+\.\d+)"',
                                                                                 AXE_SCRIPT)
    return found.group(1) if found else "?"


_ID = re.compile(r'\bid="([^"]+)"')


def broken_links(server: SiteServer, links: dict[str, set[str]], cache: dict | None = None) -> list[str]:
    """The internal links that lead nowhere: ``{link: pages it is on}`` -> problems.

    A link is broken when its page does not answer 200, or when its fragment (``#name``) names no element of
    the page it points to. ``cache`` (``{url: ids or error}``) lets several calls share what was fetched.
    """
    problems = []
    cache = {} if cache is None else cache
    for link in sorted(links):
        url, fragment = urldefrag(link)
        fragment = unquote(fragment)
        if url not in cache:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read().decode("utf-8", "replace")
                cache[url] = set(_ID.findall(body)) if server.path_of(url).endswith(".html") else set()
            except (urllib.error.URLError, OSError) as error:
                cache[url] = error
        where = ", ".join(sorted(links[link])[:3])
        if isinstance(cache[url], Exception):
            problems.append(f"broken link {server.path_of(url)} on {where}: {cache[url]}")
        elif fragment and server.path_of(url).endswith(".html") and fragment not in cache[url]:
            problems.append(f"broken link {server.path_of(url)}#{fragment} on {where}: no such anchor")
    return problems
