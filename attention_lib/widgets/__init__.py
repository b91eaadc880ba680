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
from .induction_heads import induction_heads_explorer, render_induction_heads
from .learning_to_attend import learning_to_attend_explorer, render_learning_to_attend
from .library_search import library_search_explorer, render_library_search
from .masking import masking_explorer, render_masking
from .memory_efficient import memory_efficient_explorer, render_memory_efficient
from .percentages import percentages_explorer, render_percentages
from .scaler import render_scaler, scaler_explorer

__all__ = [
    "blend_explorer",
    "cocktail_party_explorer",
    "detective_team_explorer",
    "generation_explorer",
    "induction_heads_explorer",
    "learning_to_attend_explorer",
    "library_search_explorer",
    "make_explorer",
    "masking_explorer",
    "memory_efficient_explorer",
    "percentages_explorer",
    "render_blend",
    "render_cocktail_party",
    "render_detective_team",
    "render_generation",
    "render_induction_heads",
    "render_learning_to_attend",
    "render_library_search",
    "render_masking",
    "render_memory_efficient",
    "render_percentages",
    "render_scaler",
    "scaler_explorer",
]
