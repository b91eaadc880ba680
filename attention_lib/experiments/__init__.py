"""The small experiments the lessons run and their explorers redraw, one module per lesson, each a plain, tested
function.

Every function here computes through the package's own steps (``matchmaker``, ``scaler``, ``percentages``,
``calculate_attention``, ``MultiHeadAttention``), so what a lesson prints and what its explorer draws come from
the same code. The explorers in :mod:`attention_lib.widgets` only wire these to controls.
"""

from .detective_team import detective_projections, detective_team
from .generation import BUGS, bug_gallery, generate_with_bug, logit_error, watch_generation
from .masking import MASK_KINDS, batch_mask
from .no_loops import CallBreakdown, timing_breakdown
from .percentages import temperature_weights
from .scaler import scaler_weights

__all__ = ["BUGS", "MASK_KINDS", "CallBreakdown", "batch_mask", "bug_gallery", "detective_projections",
           "detective_team", "generate_with_bug", "logit_error", "scaler_weights", "temperature_weights",
           "timing_breakdown", "watch_generation"]
