"""A throw-away JupyterLab server and a headless Chromium that opens lessons in it and checks what a learner sees.

Used by ``tests/test_browser.py``; nothing here imports Playwright until a browser is started, so the module
can be collected (and its doctests run) on a machine without one.

* :class:`LabServer` copies ``notebooks/`` to a temporary folder and serves it with the environment's own
  ``jupyter lab`` on ``127.0.0.1`` (free port, random token, temporary config, settings, workspaces, data and
  runtime folders; autosave, news and update checks off; notebook windowing off so that every cell is in the
  page). The committed notebooks are never opened, so nothing the browser does can change them.
* :class:`LabBrowser` starts Debian's Chromium through Playwright (``executable_path``; Playwright's own
  browser download is not used) with a fresh profile and every host name but ``localhost`` unresolvable, so
  the test never reaches the internet (the Colab badge, for one, simply does not load).
* :func:`check_notebook` opens one notebook in a fresh page, runs *Run → Run All Cells* from the menu bar,
  waits for the kernel to finish, collects every problem a learner would see (tracebacks, error outputs,
  cells that did not run, "Error displaying widget", widgets stuck loading, LaTeX errors), moves one control
  of every explorer and checks that its figure changed, and saves screenshots.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = Path(os.environ.get("COURSE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))
INSTALL_HINT = "install it with `bash tools/install_browser.sh` (or set COURSE_SKIP_BROWSER=1 to skip this test)"

#: Where to look for Chromium, first match wins; COURSE_CHROMIUM overrides.
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: The flags the issue asks for; Playwright adds ``--headless`` and its own automation flags.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # No DNS for anything but localhost: external requests (the Colab badge, fonts, CDNs) fail at once.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]

#: JupyterLab settings for the test (written to the temporary user-settings folder).
LAB_SETTINGS = {
    # Never write the (temporary) notebooks back to disk.
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # No news or update checks (no internet here, and no pop-up over the screenshots).
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
    # Keep every cell in the page, so that every output is rendered and can be inspected.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

LAB_CONFIG = """\
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.extension_manager = "readonly"
c.LabApp.expose_app_in_browser = True
c.ServerApp.open_browser = False
"""


def find_chromium() -> str | None:
    """The path of a Chromium/Chrome executable, or None.

    Example:
        >>> path = find_chromium()
        >>> path is None or Path(path).is_file()
        True
    """
    explicit = os.environ.get("COURSE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_problem() -> str | None:
    """Why the browser test cannot run here (with how to fix it), or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"the Python package `playwright` is not installed: {INSTALL_HINT}"
    if find_chromium() is None:
        return f"no Chromium found (looked for {', '.join(CHROMIUM_CANDIDATES)}): {INSTALL_HINT}"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Example:
        >>> 1024 <= free_port() <= 65535
        True
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lesson_notebooks() -> list[Path]:
    """The numbered lessons, ``notebooks/NN_*.ipynb``, in course order.

    Example:
        >>> [p.name for p in lesson_notebooks()][:1]
        ['00_welcome.ipynb']
    """
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _load_run_env() -> dict[str, str]:
    """``course.RUN_ENV`` (threads, hash seed): the kernel runs as under ``course.py execute``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_course_for_browser_test", ROOT / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.RUN_ENV)


class LabServer:
    """``jupyter lab`` on a temporary copy of ``notebooks/``; use as a context manager.

    Attributes: ``root`` (the copy the server serves), ``url`` (``http://127.0.0.1:PORT``), ``token``.
    """

    def __init__(self, workdir: Path, source: Path = NOTEBOOKS, *, start_timeout: float = 90.0):
        self.workdir = Path(workdir)
        self.source = Path(source)
        self.root = self.workdir / "notebooks"
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "jupyter-lab.log"
        self.start_timeout = start_timeout
        self._process: subprocess.Popen | None = None
        self._log = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> LabServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        shutil.copytree(self.source, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        dirs = {name: self.workdir / name for name in ("config", "data", "runtime", "settings", "workspaces",
                                                       "ipython")}
        for path in dirs.values():
            path.mkdir()
        (dirs["config"] / "jupyter_lab_config.py").write_text(LAB_CONFIG)
        for relative, values in LAB_SETTINGS.items():
            path = dirs["settings"] / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {
            **os.environ,
            **_load_run_env(),
            "JUPYTER_CONFIG_DIR": str(dirs["config"]),
            "JUPYTER_DATA_DIR": str(dirs["data"]),
            "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
            "IPYTHONDIR": str(dirs["ipython"]),
            "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
            "JUPYTERLAB_WORKSPACES_DIR": str(dirs["workspaces"]),
        }
        env.pop("MPLBACKEND", None)  # the kernel draws inline, as for a learner
        command = [
            sys.executable, "-m", "jupyter", "lab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            f"--LabApp.user_settings_dir={dirs['settings']}", f"--LabApp.workspaces_dir={dirs['workspaces']}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI machines often run as root
            command.append("--allow-root")
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop())
        self._process = subprocess.Popen(command, cwd=self.root, env=env, stdout=self._log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with code {self._process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                self.api("GET", "status")
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- REST API ----------------------------------------------------------------------------------------
    def api(self, method: str, path: str):
        """Call the server's REST API (``/api/<path>``) with the token; returns the decoded JSON or None."""
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Stop every session and kernel, so that the next notebook starts on a quiet machine."""
        for session in self.api("GET", "sessions") or []:
            with contextlib.suppress(OSError):
                self.api("DELETE", f"sessions/{session['id']}")
        for kernel in self.api("GET", "kernels") or []:
            with contextlib.suppress(OSError):
                self.api("DELETE", f"kernels/{kernel['id']}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def lab_url(self, relative: str, workspace: str) -> str:
        """The URL that opens ``relative`` (a path under :attr:`root`) in a fresh, named workspace."""
        return f"{self.url}/lab/workspaces/{workspace}/tree/{relative}?token={self.token}"


class LabBrowser:
    """Headless Chromium (the system's, via Playwright) with a fresh profile; use as a context manager."""

    def __init__(self, workdir: Path, *, executable: str | None = None, viewport=(1280, 900)):
        self.workdir = Path(workdir)
        self.executable = executable or find_chromium()
        self.viewport = {"width": viewport[0], "height": viewport[1]}
        self._playwright = None
        self.context = None

    def __enter__(self) -> LabBrowser:
        from playwright.sync_api import sync_playwright

        if self.executable is None:
            raise RuntimeError(browser_problem() or "no Chromium")
        self._playwright = sync_playwright().start()
        try:
            self.context = self._playwright.chromium.launch_persistent_context(
                str(self.workdir / "chromium-profile"), executable_path=self.executable, headless=True,
                args=CHROMIUM_ARGS, viewport=self.viewport, device_scale_factor=1, service_workers="block",
                accept_downloads=False,
            )
        except Exception:
            self._playwright.stop()
            raise
        self.context.set_default_timeout(30_000)
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            self.context.close()
        with contextlib.suppress(Exception):
            self._playwright.stop()


@dataclass
class NotebookReport:
    """What :func:`check_notebook` saw: ``problems`` is empty when a learner would see nothing wrong."""

    name: str
    problems: list[str] = field(default_factory=list)
    explorers: int = 0  #: explorers found (cells with a control and a widget ``Output``)
    explorers_checked: int = 0  #: explorers whose figure changed after a control moved
    cells: int = 0
    seconds: float = 0.0
    screenshots: list[Path] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)  #: uncaught JavaScript errors (reported only)
    timings: dict[str, float] = field(default_factory=dict)  #: seconds per step

    def summary(self) -> str:
        lines = [f"{self.name}: {len(self.problems)} problem(s), {self.cells} cells, "
                 f"{self.explorers_checked}/{self.explorers} explorer(s) checked, {self.seconds:.1f} s {self.timings}"]
        lines += [f"  - {p}" for p in self.problems]
        if self.page_errors:
            lines.append("  JavaScript errors in the page:")
            lines += [f"    {e}" for e in self.page_errors[:10]]
        lines += [f"  screenshot: {s}" for s in self.screenshots]
        return "\n".join(lines)


# --- JavaScript run inside JupyterLab (``window.jupyterapp`` is exposed by LAB_CONFIG) -------------------
_JS_PANEL = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext || !panel.content.widgets.length) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {kernel: kernel ? kernel.status : 'none', ready: panel.context.isReady, cells: panel.content.widgets.length};
}"""

_JS_RUN_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const prompts = [...panel.content.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent);
  return {kernel: kernel ? kernel.status : 'none', pending: prompts.filter(t => t.includes('*')).length};
}"""

# One entry per problem: {cell, kind, text}. Cell numbers count every cell from 1, as a learner would.
_JS_PROBLEMS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const found = [];
  const first = (s) => (s || '').trim().split('\\n').filter(l => l.trim())[0] || '';
  panel.content.widgets.forEach((cell, i) => {
    const where = {cell: i + 1, source: first(cell.model.sharedModel.getSource()).slice(0, 80)};
    const add = (kind, text) => found.push({...where, kind, text: (text || '').slice(0, 600)});
    if (cell.model.type === 'code') {
      const outputs = cell.model.outputs.toJSON();
      for (const o of outputs) {
        if (o.output_type === 'error') add('error output', o.ename + ': ' + o.evalue);
      }
      if (cell.model.sharedModel.getSource().trim() && cell.model.executionCount === null) add('did not run', '');
      for (const el of cell.node.querySelectorAll(
          '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) {
        if (el.textContent.includes('Traceback')) add('traceback shown', el.textContent);
      }
      const area = cell.node.querySelector('.jp-Cell-outputWrapper');
      const text = area ? area.textContent : '';
      const bad = text.match(/Error displaying widget[^\\n]*/);
      if (bad) add('widget error', bad[0]);
      // ipywidgets 8 draws a view that failed to load as a broken-file icon; a click reveals the message.
      for (const el of cell.node.querySelectorAll('.jupyter-widgets-error-widget')) {
        if (el.classList.contains('icon-error') && el.parentElement) el.parentElement.click();
        const lines = el.innerText.split('\\n').map(l => l.trim()).filter(l => l && !l.startsWith('['));
        add('widget error', 'Error displaying widget: ' + (lines[0] || 'a widget view failed to load'));
      }
      if (text.includes('Loading widget...')) add('widget never loaded', 'still "Loading widget..."');
    } else if (cell.model.type === 'markdown') {
      for (const el of cell.node.querySelectorAll('mjx-merror, .MathJax_Error')) add('LaTeX error', el.textContent);
    }
  });
  return found;
}"""

# Marks every explorer (a code cell whose output has a widget Output and a control) and returns their count.
_JS_MARK_EXPLORERS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  let count = 0;
  panel.content.widgets.forEach((cell, i) => {
    if (cell.model.type !== 'code') return;
    const area = cell.node.querySelector('.jp-Cell-outputWrapper');
    if (!area || !area.querySelector('.widget-output')) return;
    if (!area.querySelector('.widget-slider, .widget-hslider, .widget-dropdown, .widget-checkbox, '
                            + '.widget-toggle-buttons, .widget-radio-box')) return;
    cell.node.setAttribute('data-course-explorer', String(count));
    cell.node.setAttribute('data-course-cell', String(i + 1));
    count += 1;
  });
  return count;
}"""


def _figure_signature(explorer) -> str:
    """What the explorer's figure looks like now: the image sources (or markup) in its widget Output."""
    return explorer.evaluate("""(cell) => {
      const outs = [...cell.querySelectorAll('.widget-output')];
      const imgs = outs.flatMap(o => [...o.querySelectorAll('img')].map(i => i.getAttribute('src') || ''));
      if (imgs.length) return imgs.join('|');
      return outs.map(o => o.querySelector('svg, canvas, .jp-OutputArea') ? o.innerHTML : '').join('|');
    }""")


def _move_control(page, explorer) -> str | None:
    """Change one control of the explorer the way a learner would; returns what was done, or None."""
    for handle in explorer.locator(".widget-slider .noUi-handle, .widget-hslider .noUi-handle").all():
        before = handle.get_attribute("aria-valuenow")
        handle.focus()
        for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):
            page.keyboard.press(key)
            if handle.get_attribute("aria-valuenow") != before:
                return f"slider {before} -> {handle.get_attribute('aria-valuenow')} ({key})"
    for select in explorer.locator(".widget-dropdown select").all():
        values = select.evaluate("(s) => [...s.options].map(o => o.value)")
        current = select.input_value()
        others = [v for v in values if v != current]
        if others:
            select.select_option(others[0])
            return f"dropdown {current!r} -> {others[0]!r}"
    for box in explorer.locator(".widget-checkbox input[type=checkbox]").all():
        box.click()
        return "checkbox toggled"
    for button in explorer.locator(".widget-toggle-buttons button:not(.mod-active)").all():
        button.click()
        return f"toggle button {button.inner_text()!r}"
    for radio in explorer.locator(".widget-radio-box input[type=radio]:not(:checked)").all():
        radio.check()
        return "radio button"
    return None


def _wait_for_run(page, timeout: float) -> str | None:
    """Wait until no cell is queued or running and the kernel is idle (twice in a row); None or what hung."""
    deadline = time.monotonic() + timeout
    calm = 0
    state = {}
    while time.monotonic() < deadline:
        state = page.evaluate(_JS_RUN_STATE)
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
        page.wait_for_function(_JS_PANEL, timeout=60_000)
        done("open")
        phase = "waiting for the kernel to start"
        # Wait for the kernel to be started and idle before running, as a learner waits for "Idle".
        page.wait_for_function(f"() => {{ const s = ({_JS_PANEL})(); return s && s.ready && s.kernel === 'idle'; }}",
                               timeout=90_000)
        report.cells = page.evaluate(_JS_PANEL)["cells"]
        done("kernel")
        # Give the notebook the whole width, as in the screenshots a learner would take.
        page.evaluate("() => { const app = window.jupyterapp; if (!app.shell.leftCollapsed) "
                      "return app.commands.execute('application:toggle-left-area'); }")

        phase = "Run → Run All Cells"
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        hung = _wait_for_run(page, run_timeout)
        if hung:
            report.problems.append(f"Run All Cells: {hung}")
        # Widgets render asynchronously after the kernel is idle: give them a moment.
        _wait_until(lambda: not page.locator(".jp-Notebook :text('Loading widget...')").count(), 10)
        done("run all")

        phase = "inspecting the outputs"
        for problem in page.evaluate(_JS_PROBLEMS):
            text = f": {problem['text']}" if problem["text"] else ""
            report.problems.append(f"cell {problem['cell']} ({problem['source']!r}) {problem['kind']}{text}")

        phase = "moving the explorers' controls"
        report.explorers = page.evaluate(_JS_MARK_EXPLORERS)
        for index in range(report.explorers):
            problem = _check_explorer(page, page.locator(f"[data-course-explorer='{index}']"), figure_timeout)
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


def _check_explorer(page, explorer, figure_timeout: float) -> str | None:
    """Move one control of an explorer and wait for its figure to change; None when it did, else the problem."""
    cell = explorer.get_attribute("data-course-cell")
    explorer.scroll_into_view_if_needed()
    _wait_until(lambda: _figure_signature(explorer), 10)
    before = _figure_signature(explorer)
    if not before:
        return f"cell {cell}: explorer shows no figure"
    action = _move_control(page, explorer)
    if action is None:
        return f"cell {cell}: explorer has no control the test can move"
    changed = _wait_for_new_figure(page, explorer, before, figure_timeout)
    tracebacks = explorer.locator(".widget-output [data-mime-type='application/vnd.jupyter.stderr']",
                                  has_text="Traceback")
    if tracebacks.count():
        return f"cell {cell}: explorer shows a traceback after {action}: {tracebacks.first.inner_text()[:600]}"
    if not changed:
        return f"cell {cell}: explorer figure did not change after {action}"
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
        if page.evaluate(_JS_RUN_STATE)["kernel"] == "idle":
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


_JS_EXPLORER_BOX = """(cell) => {
  // The smallest rectangle around what the explorer draws (title, controls, figure), for a README picture.
  const root = cell.querySelector('.jp-OutputArea-output .jupyter-widgets') || cell;
  let box = null;
  for (const el of root.querySelectorAll('*')) {
    if (el.children.length && el.tagName !== 'SELECT') continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    box = box ? {l: Math.min(box.l, r.left), t: Math.min(box.t, r.top), r: Math.max(box.r, r.right),
                 b: Math.max(box.b, r.bottom)} : {l: r.left, t: r.top, r: r.right, b: r.bottom};
  }
  return box && {x: Math.max(box.l - 8, 0), y: Math.max(box.t - 8, 0), width: box.r - box.l + 16,
                 height: box.b - box.t + 16};
}"""


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
        clip = explorer.evaluate(_JS_EXPLORER_BOX)
        if clip:
            path = folder / f"{report.name}-explorer.png"
            page.screenshot(path=str(path), clip=clip)
            saved.append(path)
    return saved
