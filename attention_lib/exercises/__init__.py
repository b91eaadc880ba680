"""Exercise checkers, one module per concept; each checker returns a friendly :class:`CheckResult`.

Each lesson states an exercise, gives a stub, and calls its checker here; the runnable solutions live in
``notebooks/solutions/``.
"""

from .checker import CheckResult, check_function

__all__ = ["CheckResult", "check_function"]
