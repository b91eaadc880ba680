"""Run the learner's function under a watch: count its PyTorch calls, spot forbidden ones, catch its errors.

The watch is a ``TorchFunctionMode``: PyTorch hands it every function, method and operator the learner's code
calls (``torch.softmax``, ``x.view``, ``@``, ``.T``, ...), but not the calls made inside them. It remembers
the one that raised, so that :func:`~attention_lib.exercises._checker.explain_crash` can name the shapes that
met there.

The no-loops rule (:func:`loop_growth`): a function without a Python loop runs as many PyTorch operations and
as many lines of the learner's own Python on a small input as on a large one. A loop over words, sentences or
features shows up as a count that grows with the input, whether it loops over tensors, over ``.tolist()`` or
over a NumPy array; :data:`LEAVING_TORCH` names the calls that leave PyTorch for such a detour.
"""

from __future__ import annotations

import sys
import sysconfig
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

#: Shortcuts an exercise forbids: a PyTorch operation's name (``"softmax"``) or a Python function
#: (``al.split_heads``, caught also when called through a helper), each with the hint to give. A hint may
#: name the call with ``{call}``.
Forbidden = Mapping[str | Callable, str]


@dataclass
class Run:
    """What happened when the learner's function ran once."""

    result: object = None
    error: Exception | None = None
    calls: int = 0  # PyTorch operations called by the learner's own code
    ops: set[str] = field(default_factory=set)  # their names
    failed_op: tuple[str, list] | None = None  # (name, arguments) of the operation that raised
    forbidden: str | None = None  # the hint for the first forbidden call made
    warnings: list[str] = field(default_factory=list)
    lines: int | None = None  # lines of the learner's own Python executed, when counted (``count_lines=True``)


#: The calls that take a tensor out of PyTorch, into Python lists or NumPy arrays (where loops hide), with
#: the hint to give when an exercise forbids them; ``{call}`` names the call.
LEAVING_TORCH: dict[str, str] = {
    name: "stay in PyTorch: your function called {call}, which turns the tensor into " + what + ", and the "
          "rule of this exercise is every word at once, in tensor operations."
    for name, what in (("tolist", "Python lists"), ("numpy", "a NumPy array"), ("__array__", "a NumPy array"))
}


class _Watch(TorchFunctionMode):
    def __init__(self, run: Run, forbidden: Forbidden):
        super().__init__()
        self.run = run
        self.ops = {k: v for k, v in forbidden.items() if isinstance(k, str)}
        self.codes = {k.__code__: v for k, v in forbidden.items() if hasattr(k, "__code__")}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = op_name(func)
        self.run.calls += 1
        self.run.ops.add(name.rstrip("_"))
        if self.run.forbidden is None:
            self._note_forbidden(name)
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            self.run.failed_op = (name, [*args, *(kwargs or {}).values()])
            raise

    def _note_forbidden(self, name: str) -> None:
        hint = self.ops.get(name, self.ops.get(name.rstrip("_")))  # `exp_` is `exp`; `__array__` is itself
        frame = sys._getframe(2) if self.codes and hint is None else None
        while frame is not None and hint is None:  # is a forbidden Python function on the call stack?
            hint = self.codes.get(frame.f_code)
            name = frame.f_code.co_name if hint is not None else name
            frame = frame.f_back
        if hint is not None:
            self.run.forbidden = hint.replace("{call}", f"`{name}`")


def op_name(func) -> str:
    """A readable name for a function PyTorch hands to a ``TorchFunctionMode`` (``"matmul"``, ``"T"``, ...)."""
    owner = getattr(func, "__self__", None)  # a property such as .T is seen through its descriptor's __get__
    name = getattr(owner, "__name__", None) if getattr(func, "__name__", "") == "__get__" else None
    return name or getattr(func, "__name__", repr(func))


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    return type(x)(_clone(y) for y in x) if isinstance(x, tuple | list) else x


def run_learner(fn: Callable, args: tuple, forbidden: Forbidden | None = None, *, count_lines: bool = False) -> Run:
    """Call ``fn`` on copies of ``args`` (an in-place slip cannot spoil the comparison) under the watch.

    Never raises: an error is returned in :attr:`Run.error`, and warnings are recorded, not shown. With
    ``count_lines``, :attr:`Run.lines` counts the lines of the learner's own Python that ran (see
    :func:`loop_growth`).

    Example:
        >>> run = run_learner(lambda x: torch.softmax(x @ x.T, dim=-1), (torch.ones(2, 3),),
        ...                   forbidden={"softmax": "build it by hand instead of {call}"})
        >>> run.calls, run.forbidden
        (3, 'build it by hand instead of `softmax`')
    """
    run, copies = Run(), _clone(args)
    counter = _LineCounter() if count_lines else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _Watch(run, forbidden or {}), counter or _nothing():
                run.result = fn(*copies)
        except Exception as error:  # noqa: BLE001 - explained by explain_crash, never re-raised
            run.error = error
    run.warnings = [str(w.message) for w in caught]
    run.lines = counter.lines if counter else None
    return run


def loop_growth(fn: Callable, inputs: Sequence[tuple]) -> tuple[str, int, int] | None:
    """Whether ``fn`` loops in Python: what grows with the input, as ``(what, smallest, largest)``, or ``None``.

    ``fn`` runs once on each argument tuple of ``inputs`` (inputs of different sizes), counting the PyTorch
    operations it calls and the lines of its own Python that run. Code without a Python loop runs the same
    counts on every input; a loop over words, sentences or features (over tensors, ``.tolist()`` or a NumPy
    array, in a comprehension or a helper of the learner's) makes them grow. ``what`` is ``"PyTorch
    operations"`` or ``"lines of Python"``; a run that raises is left out.

    Example:
        >>> inputs = [(torch.ones(2, 3),), (torch.ones(4, 3),)]
        >>> loop_growth(lambda x: x.sum(dim=-1), inputs) is None
        True
        >>> what, smallest, largest = loop_growth(lambda x: torch.tensor([sum(r) for r in x.tolist()]), inputs)
        >>> what, smallest < largest
        ('lines of Python', True)
    """
    runs = [run for run in (run_learner(fn, args, count_lines=True) for args in inputs) if run.error is None]
    for what, counts in (("PyTorch operations", [run.calls for run in runs]),
                         ("lines of Python", [run.lines for run in runs])):
        if len(set(counts)) > 1:
            return what, min(counts), max(counts)
    return None


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _library_dirs() -> tuple[str, ...]:
    """Where code that is not the learner's lives: the standard library, installed packages, torch, this package."""
    paths = sysconfig.get_paths()
    dirs = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    dirs |= {str(Path(torch.__file__).parent), str(Path(__file__).parents[1])}
    return tuple(sorted(dirs))


_LIBRARY_DIRS = _library_dirs()


class _LineCounter:
    """Counts the lines of the learner's own Python (any code outside :func:`_library_dirs`) run inside it."""

    def __init__(self):
        self.lines = 0
        self._previous = None

    def _call(self, frame, event, arg):
        filename = frame.f_code.co_filename
        if filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen"):
            return None
        return self._line

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self._line

    def __enter__(self):
        self._previous = sys.gettrace()
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._previous)
        return False
