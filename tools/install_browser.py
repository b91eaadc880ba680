#!/usr/bin/env python3
"""Install the browser test's Chromium now, the way ``python course.py test`` does when it finds none.

    python tools/install_browser.py

Debian's Chromium through apt when run as root or with passwordless sudo, otherwise Playwright's own download
(``python -m playwright install chromium`` in the course's environment). Nothing happens when a Chromium is
found already (``COURSE_CHROMIUM``, ``PATH``, or Playwright's download folder). Standard library only.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import course  # noqa: E402  (course.py lives in the repository root)

if __name__ == "__main__":
    python = course.venv_python()
    if not course.ensure_browser(python):
        sys.exit(1)
    print(f"Chromium: {course.find_chromium()}\nRun the browser test with: python course.py test tests/test_browser.py")
