"""Interactive explorers for the lessons: thin ipywidgets wrappers over tested plotting functions.

The numbers an explorer draws come from the public package (:mod:`attention_lib.experiments` for the lessons'
small experiments, :mod:`attention_lib.plotting` for the pictures); a widget module only wires them to controls.

Import them from here (``from attention_lib.widgets import ...``); ``import attention_lib`` does not load
ipywidgets. Each explorer's cell ignores its output under nbval; the functions it wraps are checked in
plain cells and in the tests.
"""

from .blend import blend_explorer, render_blend
from .cocktail_party import cocktail_party_explorer, render_cocktail_party
from .detective_team import detective_team_explorer, render_detective_team
from .explorer import make_explorer
from .generation import generation_explorer, render_generation
from .induction_heads import induction_explorer, render_induction
from .learning_to_attend import render_trained, trained_explorer
from .library_search import library_search_explorer, render_library_search
from .masking import masking_explorer, render_masking
from .memory_efficient import online_softmax_explorer, render_online_softmax
from .percentages import percentages_explorer, render_percentages
from .scaler import render_scaler, scaler_explorer

__all__ = [
    "blend_explorer",
    "cocktail_party_explorer",
    "detective_team_explorer",
    "generation_explorer",
    "induction_explorer",
    "library_search_explorer",
    "make_explorer",
    "masking_explorer",
    "online_softmax_explorer",
    "percentages_explorer",
    "render_blend",
    "render_cocktail_party",
    "render_detective_team",
    "render_generation",
    "render_induction",
    "render_library_search",
    "render_masking",
    "render_online_softmax",
    "render_percentages",
    "render_scaler",
    "render_trained",
    "scaler_explorer",
    "trained_explorer",
]
