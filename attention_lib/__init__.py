"""Attention, Step by Step: the tested package behind the notebooks.

Every public name is re-exported here; each docstring names the lesson that builds it.
"""

from .attention import blend, calculate_attention, matchmaker, percentages, scaler
from .checks import DtypeMismatchError
from .device import environment_report, get_device
from .loops import loop_attention

__all__ = [
    "DtypeMismatchError",
    "blend",
    "calculate_attention",
    "environment_report",
    "get_device",
    "loop_attention",
    "matchmaker",
    "percentages",
    "scaler",
]
