"""The project's tools. ``course.py`` is made of the standard-library-only modules here, so that it runs with a bare
``python3 course.py ...`` before anything is installed:

- :mod:`tools.project`: where things are, the one list of notebooks, and how notebooks run (environment, nbval flags);
- :mod:`tools.steps`: install steps, each announced with its command and timed;
- :mod:`tools.environment`: the project's environment (``.venv``): what to install, and installing it;
- :mod:`tools.chromium`: the browser tests' Chromium: finding it, or installing it.

The other files are scripts that ``course.py`` runs inside the environment (``execute_notebooks.py``,
``colab_sync.py``, ``gpu_check.py``, ``build_book.py``), or helpers run by hand or by the tests.
"""
