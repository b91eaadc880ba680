"""Helpers for ``tests/test_browser.py``: a throw-away JupyterLab server driven by Debian's Chromium."""
