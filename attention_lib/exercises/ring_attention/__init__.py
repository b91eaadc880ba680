"""The exercises of ``notebooks/16_ring_attention.ipynb``: one rank's hop loop (:mod:`.hop_loop`), the zigzag
positions and the bug gallery predicted (:mod:`.zigzag`)."""

from .hop_loop import SLIPS, check_ring_forward
from .zigzag import MISTAKES, WHY, check_ring_bug_predictions, check_zigzag_positions

__all__ = ["MISTAKES", "SLIPS", "WHY", "check_ring_bug_predictions", "check_ring_forward", "check_zigzag_positions"]
