#!/usr/bin/env python3
"""Install the browser tests' Chromium now, the way ``python3 course.py test`` does when it finds none.

    python tools/install_browser.py

Debian's Chromium through apt when run as root or with passwordless sudo, otherwise Playwright's own download
(``python -m playwright install chromium`` in the course's environment). Nothing happens when a Chromium is
found already (``COURSE_CHROMIUM``, ``PATH``, or Playwright's download folder). Standard library only.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.chromium import ensure_browser, find_chromium  # noqa: E402
from tools.environment import venv_python  # noqa: E402

if __name__ == "__main__":
    if not ensure_browser(venv_python()):
        sys.exit(1)
    print(f"Chromium: {find_chromium()}\nRun the browser test with: python3 course.py test tests/test_browser.py")
