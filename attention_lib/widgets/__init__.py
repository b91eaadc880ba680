"""Interactive explorers for the lessons: thin ipywidgets wrappers over tested plotting functions.

Import them from here (``from attention_lib.widgets import ...``); ``import attention_lib`` does not load
ipywidgets. Each explorer's cell ignores its output under nbval; the functions it wraps are checked in
plain cells and in the tests.
"""

from .blend import blend_explorer, render_blend
from .cocktail_party import cocktail_party_explorer, render_cocktail_party
from .explorer import make_explorer
from .library_search import library_search_explorer, render_library_search
from .masking import masking_explorer, render_masking
from .multihead import detective_team_explorer, render_detective_team
from .online_softmax import online_softmax_explorer, render_online_softmax
from .percentages import percentages_explorer, render_percentages
from .scaler import render_scaler, scaler_explorer

__all__ = ["blend_explorer", "render_blend", "detective_team_explorer", "render_detective_team",
           "percentages_explorer", "render_percentages", "render_scaler", "scaler_explorer",
           "cocktail_party_explorer", "library_search_explorer", "make_explorer", "masking_explorer",
           "render_cocktail_party", "render_library_search", "render_masking",
           "online_softmax_explorer", "render_online_softmax"]
