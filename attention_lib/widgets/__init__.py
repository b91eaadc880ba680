"""Interactive explorers for the lessons: thin ipywidgets wrappers over tested plotting functions.

Import them from here (``from attention_lib.widgets import ...``); ``import attention_lib`` does not load
ipywidgets. Each explorer's cell ignores its output under nbval; the functions it wraps are checked in
plain cells and in the tests.
"""

from .explorer import make_explorer

__all__ = ["make_explorer"]
