"""The machinery behind every exercise checker: run the learner's function, compare, and give a hint.

A checker never raises and never prints a traceback: it returns a :class:`CheckResult` whose text is shown
by the notebook. Chapters define their checkers in the sibling modules with :func:`check_function`.

The learner's function runs under a watch (:mod:`attention_lib.exercises._running`) that counts its PyTorch
operations, notices calls an exercise forbids, and remembers the operation that raised; every error goes
through :func:`~attention_lib.exercises._crashes.explain_crash`, the one place that turns an error inside the
learner's code into a hint. The hint texts live in :mod:`attention_lib.exercises._hints`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ._crashes import explain_crash
from ._hints import HINTS
from ._running import Forbidden, Run, run_learner

#: A typical mistake: a function that computes the wrong answer the way learners often do, and its hint.
Mistake = tuple[Callable[..., object], str]

#: A hint for a result of the wrong shape: ``(the inputs, the shape the learner got) -> hint``.
ShapeHint = Callable[[tuple, tuple | None], str]


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a checker: ``status`` is ``"passed"``, ``"not attempted"``, ``"failed"`` or ``"error"``.

    It is truthy only when passed, and shows its friendly ``message`` in a notebook.
    """

    status: str
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__


def _shape(x):
    return tuple(x.shape) if isinstance(x, torch.Tensor) else None


def _close(a, b, atol: float, rtol: float) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.allclose(a.detach().to(b.dtype), b.detach(), atol=atol, rtol=rtol,
                                                     equal_nan=True)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_close(x, y, atol, rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor | tuple | list) or isinstance(b, torch.Tensor | tuple | list):
        return False  # a tensor against a tuple (or the reverse): not the same kind of answer
    try:
        return abs(float(a) - float(b)) <= atol + rtol * abs(float(b))
    except (TypeError, ValueError):
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - an answer we cannot compare is not a match
            return False


def _params(fn: Callable, count: int) -> list[str]:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return names[:count] if len(names) >= count else [f"argument {i}" for i in range(count)]


def check_function(learner_fn: Callable, reference_fn: Callable, make_inputs: Callable[[int], tuple], *,
                   name: str, mistakes: Sequence[Mistake] = (), shape_hint: str | ShapeHint = "",
                   trials: int = 3, atol: float = 1e-5, rtol: float = 1e-4,
                   forbidden: Forbidden | None = None, no_loops: bool = False,
                   clues: Mapping[str, str] | None = None) -> CheckResult:
    """Check ``learner_fn`` against ``reference_fn`` on ``trials`` fresh inputs from ``make_inputs(seed)``.

    Args:
        learner_fn: the learner's function.
        reference_fn: the correct function (from ``attention_lib``).
        make_inputs: ``seed -> tuple of arguments``; fresh random inputs for each trial.
        name: what the exercise asks for, used in the messages.
        mistakes: typical wrong implementations with the hint each one deserves.
        shape_hint: the hint to give when the result has the wrong shape; or a function ``(inputs, shape) ->
            hint`` that names the mistake the learner's shape reveals (falling back to a general hint).
        trials: how many random inputs to try.
        atol, rtol: the tolerance of the comparison.
        forbidden: shortcuts the exercise forbids, ``PyTorch operation name or Python function -> hint``
            (see :data:`~attention_lib.exercises._running.Forbidden`); a call to one fails the check even when
            the answer is right.
        no_loops: fail a correct answer whose number of PyTorch calls grows with the input (a Python loop).
        clues: ``PyTorch operation name -> hint`` for a wrong answer that matches no listed mistake but called
            that operation (e.g. ``clamp`` in a softmax).

    Returns:
        A :class:`CheckResult`.

    Example:
        >>> ref = lambda x: 2 * x
        >>> inputs = lambda seed: (torch.randn(3, generator=torch.Generator().manual_seed(seed)),)
        >>> check_function(ref, ref, inputs, name="doubling").status
        'passed'
        >>> check_function(lambda x: x + x + 1, ref, inputs, name="doubling",
        ...                mistakes=[(lambda x: x + x + 1, "drop the + 1")]).message
        '❌ doubling: not quite. Hint: drop the + 1'
    """
    calls = []
    for trial in range(trials):
        args = make_inputs(trial)
        expected = reference_fn(*args)
        run = run_learner(learner_fn, args, forbidden)
        got = run.result
        # The stub's own `raise NotImplementedError`; PyTorch raises NotImplementedError too (since torch 2.14,
        # for example, for `1 - mask` on a bool mask), and that is a crash to explain, not an empty exercise.
        if isinstance(run.error, NotImplementedError) and run.failed_op is None:
            return CheckResult("not attempted", f"📝 {name}: not attempted yet. Replace `raise "
                               f"NotImplementedError` with your code and run this cell again.")
        if run.error is not None:
            return CheckResult("error", explain_crash(name, run.error, args, failed_op=run.failed_op,
                                                      params=_params(reference_fn, len(args))))
        if got is None or got is Ellipsis:
            return CheckResult("not attempted", f"📝 {name}: not attempted yet (your function returned "
                               f"{got!r}). Fill in the body and return the result.")
        if run.forbidden is not None:
            return CheckResult("failed", f"❌ {name}: not allowed here. Hint: {run.forbidden}")
        calls.append(run.calls)
        if _close(got, expected, atol, rtol):
            continue
        if isinstance(expected, torch.Tensor) and not isinstance(got, torch.Tensor):
            return CheckResult("failed", f"❌ {name}: expected a torch.Tensor, but got {type(got).__name__}.")
        if _shape(expected) is not None and _shape(got) != _shape(expected):
            said = shape_hint(args, _shape(got)) if callable(shape_hint) else shape_hint
            hint = f" Hint: {said}" if said else ""
            return CheckResult("failed", f"❌ {name}: expected shape {_shape(expected)}, but got "
                               f"{_shape(got)}.{hint}")
        for wrong_fn, hint in mistakes:
            try:
                if _close(got, wrong_fn(*args), atol, rtol):
                    return CheckResult("failed", f"❌ {name}: not quite. Hint: {hint}")
            except Exception:  # noqa: BLE001, S112 - a mistake that does not apply to these inputs
                continue
        return CheckResult("failed", f"❌ {name}: the shape is right but the values differ from the "
                           f"reference (largest difference {_max_diff(got, expected)}).{_clue(got, run, clues or {})}")
    if no_loops and len(set(calls)) > 1:
        few, many = min(calls), max(calls)
        return CheckResult("failed", f"❌ {name}: right numbers, but " + HINTS["python_loop"].format(
            few=few, many=many))
    return CheckResult("passed", f"✅ {name}: correct on {trials} random inputs. Well done!")


def _clue(got, run: Run, clues: Mapping[str, str]) -> str:
    """A hint for a wrong answer that matches no listed mistake, from what the run left behind."""
    for op, hint in clues.items():
        if op in run.ops:
            return f" Hint: {hint}"
    if any("x.T" in w for w in run.warnings):
        return f" Hint: {HINTS['dot_T']}"
    if isinstance(got, torch.Tensor) and got.is_floating_point() and not bool(got.isfinite().all()):
        return (" Hint: your result contains NaN or inf; look for exp of a large number, 0 / 0, or "
                "-inf - (-inf).")
    return ""


def _max_diff(got, expected) -> str:
    try:
        return f"{(got.detach().double() - expected.detach().double()).abs().max().item():.3g}"
    except Exception:  # noqa: BLE001 - only used inside a message
        return "unknown"
