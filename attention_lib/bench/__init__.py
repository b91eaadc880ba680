"""The benchmark and its measuring: ``python -m attention_lib.bench`` and the stopwatch the lessons use.

- :mod:`~attention_lib.bench.measure`: timing you can trust (warm-up, synchronize, paired repeats, medians) and
  the peak memory of a call; used by ``notebooks/07_no_loops.ipynb`` and ``notebooks/10_memory_efficient.ipynb``;
- :mod:`~attention_lib.bench.memory_tables`: the benchmark's peak-memory tables;
- :mod:`~attention_lib.bench.targets`: the course's targets, printed as met, missed or not measured, and the
  ``exp2`` / ``exp`` comparison (information, not a target);
- :mod:`~attention_lib.bench.decoding`: the one per-token timer, :func:`time_per_token` (lesson 15 and the benchmark),
  and :mod:`~attention_lib.bench.grouped_query`: one decoding step for 16, 4 and 1 KV heads;
- :mod:`~attention_lib.bench.machine`: where it ran (CPU, torch's kernels, caches, threads, load) and ``--json``;
- :mod:`~attention_lib.bench.run`: the benchmark itself (``python -m attention_lib.bench [--quick]``).
"""

from .decoding import time_per_token
from .grouped_query import time_grouped_query
from .measure import growth_exponent, median_time, peak_memory, synchronize, time_over_sizes, time_paired
from .memory_tables import with_gradients
from .run import sdpa_implementation

__all__ = ["growth_exponent", "median_time", "peak_memory", "sdpa_implementation", "synchronize", "time_over_sizes",
           "time_grouped_query", "time_paired", "time_per_token", "with_gradients"]
