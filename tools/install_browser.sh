#!/usr/bin/env bash
# Install what tests/test_browser.py needs on a Debian/Ubuntu machine:
#   * Chromium from the distribution (the test drives /usr/bin/chromium; Playwright's own browser
#     download is not used, so no access to Playwright's CDN is needed),
#   * the Python `playwright` package into the active environment (the course's .venv by default).
#
#   bash tools/install_browser.sh            # as root, or with sudo available
#
# Set PYTHON to install playwright into another interpreter (default: .venv/bin/python if it exists,
# otherwise the `python3` on PATH). Learners without a browser can skip the test with COURSE_SKIP_BROWSER=1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON="python3"; fi
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install_browser.sh: need root (or sudo) to apt-get install chromium" >&2; exit 1
    fi
fi

if ! command -v chromium >/dev/null 2>&1; then
    $SUDO apt-get update
    # Debian ships the real browser as `chromium`; fonts so that screenshots show text.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
fi

"$PYTHON" -m pip install --quiet "playwright>=1.45,<2"

echo "Browser:    $(command -v chromium) ($(chromium --version 2>/dev/null || echo 'version unknown'))"
echo "Playwright: $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("playwright"))')"
echo "Run the test with: $PYTHON -m pytest tests/test_browser.py -q"
