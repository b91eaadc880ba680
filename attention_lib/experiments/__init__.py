"""The small experiments the lessons run and their explorers redraw, one module per lesson, each a plain, tested
function.

Every function here computes through the package's own steps (``matchmaker``, ``scaler``, ``percentages``,
``calculate_attention``, ``MultiHeadAttention``), so what a lesson prints and what its explorer draws come from
the same code. The explorers in :mod:`attention_lib.widgets` only wire these to controls.
"""

from .detective_team import detective_projections, detective_team
from .masking import MASK_KINDS, batch_mask
from .no_loops import CallBreakdown, timing_breakdown
from .percentages import temperature_weights
from .scaler import scaler_weights

__all__ = ["MASK_KINDS", "CallBreakdown", "batch_mask", "detective_projections", "detective_team", "scaler_weights",
           "temperature_weights", "timing_breakdown"]
