"""Run the learner's function under a watch: count its PyTorch calls, spot forbidden ones, catch its errors.

The watch is a ``TorchFunctionMode``: PyTorch hands it every function, method and operator the learner's code
calls (``torch.softmax``, ``x.view``, ``@``, ``.T``, ...), but not the calls made inside them. It remembers
the one that raised, so that :func:`~attention_lib.exercises._checker.explain_crash` can name the shapes that
met there.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

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
        hint = self.ops.get(name.rstrip("_"))
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


def run_learner(fn: Callable, args: tuple, forbidden: Forbidden | None = None) -> Run:
    """Call ``fn`` on copies of ``args`` (an in-place slip cannot spoil the comparison) under the watch.

    Never raises: an error is returned in :attr:`Run.error`, and warnings are recorded, not shown.

    Example:
        >>> run = run_learner(lambda x: torch.softmax(x @ x.T, dim=-1), (torch.ones(2, 3),),
        ...                   forbidden={"softmax": "build it by hand instead of {call}"})
        >>> run.calls, run.forbidden
        (3, 'build it by hand instead of `softmax`')
    """
    run, copies = Run(), _clone(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _Watch(run, forbidden or {}):
                run.result = fn(*copies)
        except Exception as error:  # noqa: BLE001 - explained by explain_crash, never re-raised
            run.error = error
    run.warnings = [str(w.message) for w in caught]
    return run
