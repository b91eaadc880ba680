"""The browser tests' Chromium: the one place that finds it, or installs one (apt as root or with passwordless sudo,
else Playwright's download).

Standard library only. The test suite provides Chromium when what pytest collected holds a browser test (a test that
uses the ``chromium`` fixture of ``tests/conftest.py``), before the first test runs; the browser tests
(``tests/browser/``) find it here; ``tools/install_browser.py`` installs it on its own.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from .steps import Step, StepFailed, dry_run, run_steps, say

#: Where the browser tests look for Chromium on PATH (first match wins; COURSE_CHROMIUM overrides).
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SKIP_HINT = "COURSE_SKIP_BROWSER=1 python3 course.py test"


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, or None: COURSE_CHROMIUM, then PATH, then Playwright's own
    download (``python -m playwright install chromium``, what is done without root or sudo)."""
    explicit = os.environ.get("COURSE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        if shutil.which(name):
            return shutil.which(name)
    cache = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright"
    found = sorted(glob.glob(str(Path(cache) / "chromium-*" / "chrome-linux*" / "chrome")))
    return found[-1] if found else None


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def has_sudo() -> bool:
    """Passwordless sudo works (``sudo -n true`` never asks for a password)."""
    if not shutil.which("sudo"):
        return False
    return subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0


def browser_plan(python: Path) -> list[list[Step]]:
    """The ways to get Chromium here, in order of preference; the first that works is enough."""
    apt = ["-o", "DPkg::Lock::Timeout=300", "-q"]
    plans = []
    if shutil.which("apt-get") and (is_root() or has_sudo()):
        sudo = [] if is_root() else ["sudo", "-n"]
        plans.append([Step("update apt's package lists", [*sudo, "apt-get", *apt, "update"]),
                      Step("install Debian's Chromium with apt",
                           [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", *apt, "install", "-y",
                            "--no-install-recommends", "chromium", "fonts-dejavu-core"])])
    plans.append([Step("download Playwright's Chromium", [str(python), "-m", "playwright", "install", "chromium"])])
    return plans


def ensure_browser(python: Path) -> bool:
    """Find or install Chromium for the browser tests; False (after one message) when none can be had."""
    if find_chromium():
        return True
    if os.environ.get("COURSE_CHROMIUM"):
        print(f"COURSE_CHROMIUM={os.environ['COURSE_CHROMIUM']} is not a file: point it at a Chrome or Chromium, "
              f"or leave it unset to have one found or installed, or skip the browser test: `{SKIP_HINT}`.")
        return False
    say("The browser test needs Chromium and none was found: installing it.")
    tried = []
    for plan in browser_plan(python):
        try:
            run_steps(plan)
        except StepFailed as error:
            tried.append(f"{plan[-1].title}: {error}")
            continue
        if dry_run() or find_chromium():
            return True
        tried.append(f"{plan[-1].title}: done, but no Chromium was found afterwards")
    if not (is_root() or has_sudo()):
        tried.insert(0, "apt: not run (needs root or passwordless sudo)")
    print("\nThe browser test (tests/test_browser.py) needs Chromium: none was found, and none could be "
          "installed:\n" + "".join(f"  - {line}\n" for line in tried) + "Choose one:\n"
          "  - install it as root (Debian/Ubuntu: `sudo apt-get install chromium`), then `python3 course.py test`;\n"
          "  - with internet access, `python3 course.py test` downloads Playwright's Chromium;\n"
          "  - use a Chrome or Chromium you have: `COURSE_CHROMIUM=/path/to/chrome python3 course.py test`;\n"
          f"  - skip the browser test: `{SKIP_HINT}`.", flush=True)
    return False
