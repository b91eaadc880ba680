"""Open a notebook in JupyterLab, run it all from the menu, and report everything a learner would see go wrong.

:func:`check_notebook` checks that the notebook opens unmodified (no dot on its tab: JupyterLab changed nothing
while the kernel started), clears the outputs (*Edit → Clear Outputs of All Cells*), runs *Run → Run All Cells*,
waits for the kernel to finish, collects the problems (tracebacks, error outputs, cells that did not run,
"Error displaying widget", widgets stuck loading, LaTeX errors, pictures that do not load, tracebacks in the
log console, dialogs), operates every control of every explorer with the keyboard only (Tab to it, then the
arrow keys or the space bar) and checks that its figure changed each time, and saves screenshots.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from .lab import SCREENSHOTS, LabBrowser, LabServer
from .scripts import (
    JS_EXPLORER_BOX,
    JS_FIGURE_SIGNATURE,
    JS_FOCUS,
    JS_FOCUS_EXPLORER,
    JS_LINKS_AND_ANCHORS,
    JS_MARK_EXPLORERS,
    JS_MARKDOWN_RENDERED,
    JS_PANEL,
    JS_PROBLEMS,
    JS_RUN_STATE,
)

#: The lesson also photographed in JupyterLab's dark theme (``<name>-dark.png``), to show its figures read there.
DARK_THEME_LESSON = "08_masking"

JS_SET_THEME = "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})"

# Whether the open notebook is marked as modified (the model's flag, and the tab's jp-mod-dirty), and its metadata.
JS_OPENED = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const metadata = panel.context.model.toJSON().metadata;
  return {dirty: panel.context.model.dirty, tab: panel.title.className.includes('jp-mod-dirty'), metadata,
          started: Boolean(metadata.language_info && metadata.language_info.version)};
}"""


@dataclass
class NotebookReport:
    """What :func:`check_notebook` saw: ``problems`` is empty when a learner would see nothing wrong."""

    name: str
    problems: list[str] = field(default_factory=list)
    explorers: int = 0  #: explorers found (cells with a control and a widget ``Output``)
    explorers_checked: int = 0  #: explorers whose figure changed after each of their controls moved
    keyboard: list[str] = field(default_factory=list)  #: what the keyboard did, one line per control
    anchors: set[str] = field(default_factory=set)  #: the ids in the rendered notebook (heading ids, <a id>)
    links: list[dict] = field(default_factory=list)  #: its markdown links: {cell, path, fragment, text}
    cells: int = 0
    seconds: float = 0.0
    screenshots: list[Path] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)  #: uncaught JavaScript errors (reported only)
    notes: list[str] = field(default_factory=list)  #: what is worth saying but is no problem
    timings: dict[str, float] = field(default_factory=dict)  #: seconds per step

    def summary(self) -> str:
        lines = [f"{self.name}: {len(self.problems)} problem(s), {self.cells} cells, "
                 f"{self.explorers_checked}/{self.explorers} explorer(s) checked, {self.seconds:.1f} s {self.timings}"]
        lines += [f"  - {p}" for p in self.problems]
        lines += [f"  keyboard: {k}" for k in self.keyboard]
        lines += [f"  note: {n}" for n in self.notes]
        if self.page_errors:
            lines.append("  JavaScript errors in the page:")
            lines += [f"    {e}" for e in self.page_errors[:10]]
        lines += [f"  screenshot: {s}" for s in self.screenshots]
        return "\n".join(lines)


def _figure_signature(explorer) -> str:
    """What the explorer's figure looks like now: the image sources (or markup) in its widget Output."""
    return explorer.evaluate(JS_FIGURE_SIGNATURE)


#: The keys that change a focused control of each kind, tried in order until its value changes. A drop-down
#: is opened with the space bar and its list is walked with the arrows: arrow keys pressed on the closed
#: drop-down would reach JupyterLab's notebook shortcuts (ArrowDown selects the next cell) instead.
KEYS = {"slider": (("ArrowRight",), ("ArrowLeft",)),
        "dropdown": (("Space", "ArrowDown", "Enter"), ("Space", "ArrowUp", "Enter")),
        "checkbox": (("Space",),), "radio": (("ArrowDown",), ("ArrowUp",)), "button": (("Space",),)}


def _keyboard_controls(page, explorer, figure_timeout: float):
    """Operate each control of the explorer with the keyboard only, as a learner without a mouse would.

    The focus starts on the explorer's box (where it lands when the learner tabs into the explorer); Tab moves
    it from control to control, and each control is changed with its keys (:data:`KEYS`): the arrow keys for a
    slider or a drop-down, the space bar for a checkbox. After each change the figure must change.

    Yields ``(action, changed)`` per control operated: ``action`` says what was done, e.g.
    ``"slider 'd_k' 64 -> 68 (Tab x1, ArrowRight)"``, and ``changed`` whether the figure changed; or
    ``(problem, None)`` when a control cannot be changed from the keyboard.
    """
    if not explorer.evaluate(JS_FOCUS_EXPLORER):
        yield "cannot be reached: the keyboard focus cannot reach it", None
        return
    tabs = 0
    for _ in range(24):  # enough for several controls and the focusable readouts beside the sliders
        page.keyboard.press("Tab")
        tabs += 1
        focus = explorer.evaluate(JS_FOCUS)
        if not focus["inside"]:
            return
        if focus["kind"] not in KEYS or focus["fixed"] or (focus["kind"] == "button" and focus["value"] == "true"):
            continue
        before_figure = _figure_signature(explorer)
        if focus["kind"] == "button":  # a button has no value to change: pressing it must redraw the figure
            page.keyboard.press("Space")
            yield (f"button {focus['label']!r} pressed (Tab x{tabs}, Space)",
                   _wait_for_new_figure(page, explorer, before_figure, figure_timeout))
            tabs = 0
            continue
        for keys in KEYS[focus["kind"]]:
            for key in keys:
                page.keyboard.press(key)
                page.wait_for_timeout(100)
            after = explorer.evaluate(JS_FOCUS)
            if after["inside"] and after["kind"] == focus["kind"] and after["value"] != focus["value"]:
                action = (f"{focus['kind']} {focus['label']!r} {focus['value']} -> {after['value']} "
                          f"(Tab x{tabs}, {' '.join(keys)})")
                yield action, _wait_for_new_figure(page, explorer, before_figure, figure_timeout)
                break
        else:
            keys = " or ".join(" ".join(k) for k in KEYS[focus["kind"]])
            yield f"{focus['kind']} {focus['label']!r} did not change from the keyboard ({keys})", None
        tabs = 0


def _menu(page, menu: str, command: str) -> None:
    """Click ``menu`` in JupyterLab's menu bar, then the item that runs ``command``."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{menu}$")).click()
    page.locator(f".lm-Menu-item[data-command='{command}']").click()


def _wait_for_run(page, timeout: float) -> str | None:
    """Wait until no cell is queued or running and the kernel is idle (twice in a row); None or what hung."""
    deadline = time.monotonic() + timeout
    calm = 0
    state = {}
    while time.monotonic() < deadline:
        state = page.evaluate(JS_RUN_STATE)
        calm = calm + 1 if state["kernel"] == "idle" and state["pending"] == 0 else 0
        if calm >= 3:
            return None
        if state["kernel"] in {"dead", "none"}:
            return f"the kernel is {state['kernel']}"
        time.sleep(0.4)
    return f"still running after {timeout:.0f} s (kernel {state.get('kernel')}, {state.get('pending')} cell(s) queued)"


def _wait_until(predicate, timeout: float, step: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def check_notebook(browser: LabBrowser, server: LabServer, relative: str, *, screenshot_dir: Path | None = SCREENSHOTS,
                   run_timeout: float = 240.0, figure_timeout: float = 30.0) -> NotebookReport:
    """Open ``relative`` (a path under ``server.root``) in a fresh page, run it all, and report what is wrong.

    Args:
        browser: a started :class:`LabBrowser`.
        server: a started :class:`LabServer`.
        relative: the notebook's path under ``server.root``, e.g. ``"03_matchmaker.ipynb"``.
        screenshot_dir: where ``<stem>.png`` (and ``<stem>-explorer.png``) go; None for no screenshots.
        run_timeout: seconds allowed for *Run All Cells*.
        figure_timeout: seconds allowed for an explorer's figure to change after a control moves.

    Returns:
        A :class:`NotebookReport`; ``report.problems`` is empty when the notebook is fine.
    """
    report = NotebookReport(name=Path(relative).stem)
    start = last = time.monotonic()
    original = (server.root / relative).read_bytes()
    page = browser.context.new_page()
    page.on("pageerror", lambda error: report.page_errors.append(str(error).splitlines()[0][:300]))
    phase = "opening the notebook"

    def done(step: str) -> None:
        nonlocal last
        now = time.monotonic()
        report.timings[step] = round(now - last, 1)
        last = now

    try:
        page.goto(server.lab_url(relative, workspace=f"check-{secrets.token_hex(4)}"), wait_until="load")
        page.wait_for_function(JS_PANEL, timeout=60_000)
        done("open")
        phase = "waiting for the kernel to start"
        # Wait for the kernel to be started and idle before running, as a learner waits for "Idle".
        page.wait_for_function(f"() => {{ const s = ({JS_PANEL})(); return s && s.ready && s.kernel === 'idle'; }}",
                               timeout=90_000)
        report.cells = page.evaluate(JS_PANEL)["cells"]
        done("kernel")
        phase = "checking that the notebook opened unmodified"
        _check_opened_unmodified(page, original, report)
        # Give the notebook the whole width, as in the screenshots a learner would take.
        page.evaluate("() => { const app = window.jupyterapp; if (!app.shell.leftCollapsed) "
                      "return app.commands.execute('application:toggle-left-area'); }")

        # Edit → Clear Outputs of All Cells, then Run → Run All Cells, from the menu bar. Clearing first means
        # that every output inspected below is fresh, and a cell without an execution count did not run.
        phase = "Edit → Clear Outputs of All Cells"
        _menu(page, "Edit", "editmenu:clear-all")
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.widgets.every("
                               "c => c.model.type !== 'code' || c.model.executionCount === null)", timeout=10_000)
        phase = "Run → Run All Cells"
        _menu(page, "Run", "runmenu:run-all")
        hung = _wait_for_run(page, run_timeout)
        if hung:
            report.problems.append(f"Run All Cells: {hung}")
        # Widgets render asynchronously after the kernel is idle: give them a moment.
        _wait_until(lambda: not page.locator(".jp-Notebook :text('Loading widget...')").count(), 10)
        done("run all")

        phase = "inspecting the outputs"
        for problem in page.evaluate(JS_PROBLEMS):
            text = f": {problem['text']}" if problem["text"] else ""
            report.problems.append(f"cell {problem['cell']} ({problem['source']!r}) {problem['kind']}{text}")

        seen = page.evaluate(JS_LINKS_AND_ANCHORS)
        report.anchors, report.links = set(seen["ids"]), seen["links"]

        phase = "operating the explorers' controls from the keyboard"
        report.explorers = page.evaluate(JS_MARK_EXPLORERS)
        for index in range(report.explorers):
            problem = _check_explorer(page, page.locator(f"[data-course-explorer='{index}']"), figure_timeout,
                                      report.keyboard)
            if problem:
                report.problems.append(problem)
            else:
                report.explorers_checked += 1
        done("explorers")
    except Exception as error:  # a browser step failed: say which, and keep the screenshot
        report.problems.append(f"{phase}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
    try:
        _report_dialogs(page, report)
        if screenshot_dir is not None:
            report.screenshots = _screenshots(page, Path(screenshot_dir), report)
            done("screenshots")
        report.problems += _log_console_problems(page)  # after the screenshots: it opens a panel
    finally:
        with contextlib.suppress(Exception):
            page.close(run_before_unload=False)
        with contextlib.suppress(OSError):
            server.shutdown_kernels()
    if (server.root / relative).read_bytes() != original:
        report.problems.append("the notebook file was saved by JupyterLab while the test ran")
    report.seconds = time.monotonic() - start
    return report


def _check_opened_unmodified(page, original: bytes, report: NotebookReport) -> None:
    """A problem when JupyterLab shows the notebook as modified (the dot on its tab, ``jp-mod-dirty``) before
    anything was done, naming the metadata JupyterLab rewrote as the kernel started. JupyterLab writes the kernel's
    ``kernelspec`` and ``language_info``, Python version included: a notebook executed under another Python
    release than this kernel's opens modified for that reason alone, which is said in a note, not as a problem."""
    _wait_until(lambda: page.evaluate(JS_OPENED)["started"], 10)
    state = page.evaluate(JS_OPENED)
    if not (state["dirty"] or state["tab"]):
        return
    stored, shown = json.loads(original).get("metadata", {}), state["metadata"]
    changed = sorted(key for key in set(stored) | set(shown) if stored.get(key) != shown.get(key))
    stored_language, shown_language = dict(stored.get("language_info") or {}), dict(shown.get("language_info") or {})
    stored_version, shown_version = stored_language.pop("version", None), shown_language.pop("version", None)
    if changed == ["language_info"] and stored_language == shown_language:
        report.notes.append(f"opens as modified only because it was executed under Python {stored_version} and "
                            f"this kernel runs Python {shown_version}")
        return
    what = "; ".join(f"{key}: stored {json.dumps(stored.get(key))[:160]}, JupyterLab's "
                     f"{json.dumps(shown.get(key))[:160]}" for key in changed) or "its metadata is unchanged"
    report.problems.append(f"opens as modified (jp-mod-dirty) before any edit, as JupyterLab rewrote {what}: "
                           f"run `python3 course.py execute` on it")


def _check_explorer(page, explorer, figure_timeout: float, keyboard: list[str]) -> str | None:
    """Operate each control of an explorer from the keyboard and wait for its figure to change each time.

    Returns None when every control worked, else the problem; what the keyboard did is appended to
    ``keyboard``.
    """
    cell = explorer.get_attribute("data-course-cell")
    explorer.scroll_into_view_if_needed()
    _wait_until(lambda: _figure_signature(explorer), 10)
    if not _figure_signature(explorer):
        return f"cell {cell}: explorer shows no figure"
    operated = 0
    for action, changed in _keyboard_controls(page, explorer, figure_timeout):
        keyboard.append(f"cell {cell}: {action}")
        if changed is None:
            return f"cell {cell}: explorer {action}"
        tracebacks = explorer.locator(".widget-output [data-mime-type='application/vnd.jupyter.stderr']",
                                      has_text="Traceback")
        if tracebacks.count():
            return f"cell {cell}: explorer shows a traceback after {action}: {tracebacks.first.inner_text()[:600]}"
        if not changed:
            return f"cell {cell}: explorer figure did not change after {action}"
        operated += 1
    if not operated:
        return f"cell {cell}: explorer has no control that changes from the keyboard (Tab, then arrows or space)"
    return None


def _wait_for_new_figure(page, explorer, before: str, timeout: float, quiet: float = 3.0) -> bool:
    """Wait for the explorer's figure to differ from ``before``; give up early once the kernel has been idle
    for ``quiet`` seconds (it has nothing more to draw), or after ``timeout`` seconds."""
    start = time.monotonic()
    idle_since = None
    while time.monotonic() - start < timeout:
        if _figure_signature(explorer) not in ("", before):
            return True
        now = time.monotonic()
        if page.evaluate(JS_RUN_STATE)["kernel"] == "idle":
            idle_since = idle_since or now
            if now - idle_since >= quiet:
                break
        else:
            idle_since = None
        time.sleep(0.25)
    _wait_for_run(page, timeout)
    return _figure_signature(explorer) not in ("", before)


def _log_console_problems(page) -> list[str]:
    """Tracebacks in JupyterLab's log console, where errors with no cell to show them in go, e.g. an
    exception in an explorer's callback after a control moved (its cell shows nothing)."""
    status = page.locator(".jp-LogConsoleStatusItem")
    if not status.count() or status.first.inner_text().strip() in ("", "0"):
        return []
    page.evaluate("() => window.jupyterapp.commands.execute('logconsole:open')")
    panel = page.locator(".jp-LogConsolePanel")
    _wait_until(lambda: panel.count() and panel.first.inner_text().strip(), 10)
    text = panel.first.inner_text() if panel.count() else ""
    if "Traceback" not in text:
        return []
    errors = re.findall(r"^\s*([A-Za-z_.]*(?:Error|Exception)\b:?.*)$", text, flags=re.MULTILINE)
    last = next((e for e in reversed(errors) if ":" in e), errors[-1] if errors else "")
    return [f"log console shows a traceback (an error outside any cell, e.g. in an explorer callback): "
            f"{last.strip()[:300]}"]


def _report_dialogs(page, report: NotebookReport) -> None:
    """A dialog a learner would have to answer (e.g. "Select Kernel" for a notebook without a kernelspec)."""
    with contextlib.suppress(Exception):
        for dialog in page.locator(".jp-Dialog").all():
            if dialog.is_visible():
                text = " ".join(dialog.inner_text().split())[:300]
                report.problems.append(f"JupyterLab shows a dialog: {text}")


def _screenshots(page, folder: Path, report: NotebookReport) -> list[Path]:
    """``<name>.png``: the page at the first problem, else the first explorer, else the first figure, else the
    top; ``<name>-explorer.png``: just the first explorer (title, controls, figure), a small README picture."""
    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    focus = None
    match = re.match(r"cell (\d+)", report.problems[0]) if report.problems else None
    if match:
        focus = page.locator(".jp-Notebook .jp-Cell").nth(int(match.group(1)) - 1)
    elif report.explorers:
        focus = page.locator("[data-course-explorer='0'] .jp-Cell-outputWrapper")
    elif page.locator(".jp-Notebook .jp-OutputArea-output img").count():
        focus = page.locator(".jp-Notebook .jp-OutputArea-output img").first
    if focus is not None:
        with contextlib.suppress(Exception):
            focus.scroll_into_view_if_needed(timeout=5_000)
    page.mouse.move(0, 0)  # no hover highlight
    path = folder / f"{report.name}.png"
    page.screenshot(path=str(path))
    saved.append(path)
    if report.explorers:
        explorer = page.locator("[data-course-explorer='0']")
        explorer.scroll_into_view_if_needed()
        clip = explorer.evaluate(JS_EXPLORER_BOX)
        if clip:
            path = folder / f"{report.name}-explorer.png"
            page.screenshot(path=str(path), clip=clip)
            saved.append(path)
    if report.name == DARK_THEME_LESSON:
        saved += _dark_screenshot(page, folder, report)
    return saved


def _dark_screenshot(page, folder: Path, report: NotebookReport) -> list[Path]:
    """``<name>-dark.png``: the same view in the JupyterLab Dark theme; the theme is set back to Light after."""
    path = folder / f"{report.name}-dark.png"
    try:
        page.evaluate(JS_SET_THEME, "JupyterLab Dark")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=15_000)
        page.wait_for_timeout(500)  # let the new colours paint
        page.mouse.move(0, 0)
        page.screenshot(path=str(path))
    except Exception as error:  # noqa: BLE001 - a missing screenshot is reported, not fatal
        report.problems.append(f"dark-theme screenshot: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
        return []
    finally:
        with contextlib.suppress(Exception):
            page.evaluate(JS_SET_THEME, "JupyterLab Light")
    return [path]


def read_links(browser: LabBrowser, server: LabServer, relative: str) -> NotebookReport:
    """Open ``relative`` in JupyterLab without running it: its markdown links and anchor ids (``report.anchors``)."""
    report = NotebookReport(name=Path(relative).stem)
    page = browser.context.new_page()
    try:
        page.goto(server.lab_url(relative, workspace=f"links-{secrets.token_hex(4)}"), wait_until="load")
        page.wait_for_function(JS_PANEL, timeout=60_000)
        page.wait_for_function(f"() => {{ const s = ({JS_PANEL})(); return s && s.ready; }}", timeout=60_000)
        page.wait_for_function(JS_MARKDOWN_RENDERED, timeout=60_000)
        seen = page.evaluate(JS_LINKS_AND_ANCHORS)
        report.anchors, report.links = set(seen["ids"]), seen["links"]
    finally:
        with contextlib.suppress(Exception):
            page.close(run_before_unload=False)
        with contextlib.suppress(OSError):
            server.shutdown_kernels()
    return report


def link_problems(reports: dict[str, NotebookReport], read=None) -> list[str]:
    """The notebook links that lead nowhere in JupyterLab: a missing notebook, or a ``#fragment`` that no
    element of the target notebook carries as its id (JupyterLab scrolls to the element with that id; its
    heading ids keep the heading's capitals and punctuation, spaces become ``-``).

    Cells are counted from 1, as a learner counts them in JupyterLab.

    Args:
        reports: ``{notebook path relative to the server's root: its report}``, with ``anchors`` and ``links``.
        read: ``read(relative) -> NotebookReport | None`` for a target not in ``reports`` (None: missing).
    """
    problems = []
    for source, report in sorted(reports.items()):
        for link in report.links:
            path, fragment = link["path"], link["fragment"]
            if path and not path.endswith(".ipynb"):
                continue  # a picture or another file: the broken-image check covers pictures
            target = path or source  # JupyterLab gives the path from the server's root
            if target not in reports and read is not None:
                found = read(target)
                if found is not None:
                    reports[target] = found
            where = f"{Path(source).name} cell {link['cell']} ({link['text']!r})"
            if target not in reports:
                problems.append(f"{where} links to {path}: no such notebook")
            elif fragment and fragment not in reports[target].anchors:
                near = sorted(a for a in reports[target].anchors if a.lower() == fragment.lower())
                hint = f"; JupyterLab's id is {near[0]!r}" if near else ""
                problems.append(f"{where} links to {path or ''}#{fragment}: no such section in JupyterLab{hint}")
    return problems
