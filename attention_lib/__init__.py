"""Attention, Step by Step: the tested package behind the notebooks.

Every public name is re-exported here; each docstring names the lesson that builds it.
"""

from .attention import blend, calculate_attention, matchmaker, percentages, scaler
from .checks import DtypeMismatchError
from .device import environment_report, get_device
from .lookup import hard_lookup
from .loops import loop_attention
from .masks import causal_mask, padding_mask
from .measure import median_time, time_over_sizes
from .memory import memory_efficient_attention
from .model import TinyTransformer
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .positions import LearnedPositions, sinusoidal_encoding
from .shipped import TrainedModel, load_trained
from .tasks import get_task, make_batch
from .training import evaluate, train

__all__ = [
    "DtypeMismatchError",
    "LearnedPositions",
    "MultiHeadAttention",
    "TinyTransformer",
    "TrainedModel",
    "blend",
    "calculate_attention",
    "causal_mask",
    "environment_report",
    "evaluate",
    "get_device",
    "get_task",
    "hard_lookup",
    "load_trained",
    "loop_attention",
    "make_batch",
    "matchmaker",
    "median_time",
    "memory_efficient_attention",
    "merge_heads",
    "padding_mask",
    "percentages",
    "scaler",
    "sinusoidal_encoding",
    "split_heads",
    "time_over_sizes",
    "train",
]
