"""A throw-away JupyterLab server and a headless Chromium for ``tests/test_browser.py``.

Nothing here imports Playwright until a browser is started, so the module can be collected (and its doctests
run) on a machine without one.

* :class:`LabServer` copies ``notebooks/`` to a temporary folder and serves it with the environment's own
  ``jupyter lab`` on ``127.0.0.1`` (free port, random token, temporary config, settings, workspaces, data and
  runtime folders; autosave, news and update checks off; notebook windowing off so that every cell is in the
  page). The committed notebooks are never opened, so nothing the browser does can change them.
* :class:`LabBrowser` starts Debian's Chromium through Playwright (``executable_path``; Playwright's own
  browser download is not used) with a fresh profile and every host name but ``localhost`` unresolvable, so
  the test never reaches the internet (the Colab badge, for one, simply does not load).

``check.check_notebook`` opens a notebook in them and reports what is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tools.chromium import CHROMIUM_NAMES, find_chromium
from tools.project import RUN_ENV

__all__ = ["LabBrowser", "LabServer", "browser_problem", "find_chromium", "free_port", "lesson_notebooks"]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = Path(os.environ.get("COURSE_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))
INSTALL_HINT = ("`python3 course.py test` installs it when it can (or set COURSE_SKIP_BROWSER=1 to skip this test: "
                "`COURSE_SKIP_BROWSER=1 python3 course.py test`)")

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


def browser_problem() -> str | None:
    """Why the browser test cannot run here (with how to fix it), or None when it can."""
    import importlib.util

    if importlib.util.find_spec("jupyterlab") is None:
        return "JupyterLab is not installed in this environment: pip install -e '.[lab]'"
    if importlib.util.find_spec("playwright") is None:
        return f"the Python package `playwright` is not installed: {INSTALL_HINT}"
    if os.environ.get("COURSE_CHROMIUM") and find_chromium() is None:
        return f"COURSE_CHROMIUM={os.environ['COURSE_CHROMIUM']} is not a file: {INSTALL_HINT}"
    if find_chromium() is None:
        return f"no Chromium found (looked for {', '.join(CHROMIUM_NAMES)}): {INSTALL_HINT}"
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
            **RUN_ENV,  # threads and hash seed: the kernel runs as under `course.py execute`
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
