"""The machinery behind every exercise checker: run the learner's function, compare, and give a hint.

A checker never raises and never prints a traceback: it returns a :class:`CheckResult` whose text is shown
by the notebook. Chapters define their checkers in the sibling modules with :func:`check_function`.

The learner's function runs under a watch (:mod:`attention_lib.exercises._running`) that counts its PyTorch
operations, notices calls an exercise forbids, and remembers the operation that raised; every error goes
through :func:`~attention_lib.exercises._crashes.explain_crash`, the one place that turns an error inside the
learner's code into a hint. The hint texts live in :mod:`attention_lib.exercises._hints`. Answers are compared
with :func:`torch.testing.assert_close`, whose report (how many numbers differ, the largest difference and
where) the message passes on in a few words.
"""

from __future__ import annotations

import inspect
import re
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

#: Says what is wrong with an answer that matches no listed mistake: ``(answer, expected, inputs) -> text``
#: (or ``None`` for the general message).
Explain = Callable[[object, object, tuple], str | None]


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


def difference(got, expected, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """How ``got`` differs from ``expected`` in a few words, or ``None`` when they match.

    Tensors are compared with :func:`torch.testing.assert_close` (any float dtype, NaN equal to NaN); other
    answers (a tuple of sizes) must match in type too, so ``(4.0, 5)`` or ``("4", "5")`` is not ``(4, 5)``.

    Example:
        >>> difference(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
        '1 of 2 numbers differ, largest difference 0.5 at index (1,)'
        >>> difference((4, 5), (4, 5)) is None, difference((4.0, 5), (4, 5)) is None
        (True, False)
    """
    tensor = _holds_tensors(expected)
    try:
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol, equal_nan=True, check_dtype=not tensor,
                                   check_device=False, check_layout=False)
    except AssertionError as mismatch:
        return _in_a_few_words(str(mismatch), got, expected)
    except Exception:  # noqa: BLE001 - an answer of another kind (a str, a tensor for a tuple) is no match
        return f"a {type(got).__name__} where a {type(expected).__name__} is expected"
    return None


def _holds_tensors(x) -> bool:
    return isinstance(x, torch.Tensor) or (isinstance(x, tuple | list) and any(map(_holds_tensors, x)))


def _in_a_few_words(report: str, got, expected) -> str:
    """assert_close's report, shortened: ``"3 of 12 numbers differ, largest difference 0.5 at index (0, 1)"``."""
    counted = re.search(r"Mismatched elements: (\d+) / (\d+)", report)
    largest = re.search(r"Greatest absolute difference: (\S+) at index (\([^)]*\))", report)
    if counted and largest:
        size = float(largest.group(1))
        return (f"{counted.group(1)} of {counted.group(2)} numbers differ, largest difference {size:.3g} at index "
                f"{largest.group(2)}")
    length = re.search(r"length of the sequences mismatch: (\d+) != (\d+)", report)
    if length:
        return f"{length.group(1)} items where {length.group(2)} are expected"
    first = report.strip().splitlines()[0] if report.strip() else "they differ"
    return first.rstrip(".!").lower() if isinstance(expected, torch.Tensor) else first.rstrip(".!")


def _params(fn: Callable, count: int) -> list[str]:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return names[:count] if len(names) >= count else [f"argument {i}" for i in range(count)]


def check_function(learner_fn: Callable, reference_fn: Callable, make_inputs: Callable[[int], tuple], *,
                   name: str, mistakes: Sequence[Mistake] = (), shape_hint: str | ShapeHint = "",
                   trials: int = 3, atol: float = 1e-5, rtol: float = 1e-4,
                   forbidden: Forbidden | None = None, no_loops: bool = False, loop_hint: str | None = None,
                   clues: Mapping[str, str] | None = None, explain: Explain | None = None,
                   inputs_said: str | None = None) -> CheckResult:
    """Check ``learner_fn`` against ``reference_fn`` on the inputs ``make_inputs(0)`` .. ``make_inputs(trials - 1)``.

    Args:
        learner_fn: the learner's function.
        reference_fn: the correct function (from ``attention_lib``).
        make_inputs: ``trial -> tuple of arguments``, the same for the same trial (seeded), so that a hint never
            depends on luck.
        name: what the exercise asks for, used in the messages.
        mistakes: typical wrong implementations with the hint each one deserves. A mistake is named only when
            the learner's answers equal it on every input where both run, so that a slip which happens to agree
            with another on one input never gets the other's hint.
        shape_hint: the hint to give when the result has the wrong shape; or a function ``(inputs, shape) ->
            hint`` that names the mistake the learner's shape reveals (falling back to a general hint).
        trials: how many inputs to try.
        atol, rtol: the tolerance of the comparison.
        forbidden: shortcuts the exercise forbids, ``PyTorch operation name or Python function -> hint``
            (see :data:`~attention_lib.exercises._running.Forbidden`); a call to one fails the check even when
            the answer is right, and even when the function then crashes.
        no_loops: fail a correct answer whose number of PyTorch calls grows with the input (a Python loop).
        loop_hint: the hint for such a loop (``{few}`` and ``{many}`` are the counts); lesson 07's by default.
        clues: ``PyTorch operation name -> hint`` for a wrong answer that matches no listed mistake but called
            that operation (e.g. ``clamp`` in a softmax).
        explain: says what is wrong with an answer that matches no listed mistake (see :data:`Explain`).
        inputs_said: what the inputs are, for the message of a correct answer (``"3 fixed test inputs"`` by
            default).

    Returns:
        A :class:`CheckResult`.

    Example:
        >>> ref = lambda x: 2 * x
        >>> inputs = lambda seed: (torch.randn(3, generator=torch.Generator().manual_seed(seed)),)
        >>> check_function(ref, ref, inputs, name="doubling").message
        '✅ doubling: correct on 3 fixed test inputs. Well done!'
        >>> check_function(lambda x: x + x + 1, ref, inputs, name="doubling",
        ...                mistakes=[(lambda x: x + x + 1, "drop the + 1")]).message
        '❌ doubling: not quite. Hint: drop the + 1'
    """
    calls, answers = [], {}
    for trial in range(trials):
        args = make_inputs(trial)
        expected = reference_fn(*args)
        run = run_learner(learner_fn, args, forbidden)
        answers[trial] = run
        got = run.result
        if run.forbidden is not None:
            return CheckResult("failed", f"❌ {name}: not allowed here. Hint: {run.forbidden}")
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
        calls.append(run.calls)
        differs = difference(got, expected, atol, rtol)
        if differs is None:
            continue
        if isinstance(expected, torch.Tensor) and not isinstance(got, torch.Tensor):
            return CheckResult("failed", f"❌ {name}: expected a torch.Tensor, but got {type(got).__name__}.")
        if _shape(expected) is not None and _shape(got) != _shape(expected):
            said = shape_hint(args, _shape(got)) if callable(shape_hint) else shape_hint
            hint = f" Hint: {said}" if said else ""
            return CheckResult("failed", f"❌ {name}: expected shape {_shape(expected)}, but got "
                               f"{_shape(got)}.{hint}")
        for wrong_fn, hint in mistakes:
            if _agrees_everywhere(wrong_fn, trial, answers, learner_fn, make_inputs, trials, atol, rtol):
                return CheckResult("failed", f"❌ {name}: not quite. Hint: {hint}")
        said = explain(got, expected, args) if explain is not None else None
        if said:
            return CheckResult("failed", f"❌ {name}: {said}")
        if not _holds_tensors(expected):
            return CheckResult("failed", f"❌ {name}: for the inputs {', '.join(map(repr, args))}, your function "
                               f"returned {got!r}, which is not the answer ({differs}).")
        if not isinstance(expected, torch.Tensor):  # a tuple of tensors: its checker says which one is off
            return CheckResult("failed", f"❌ {name}: the shape is right but the values differ from the reference "
                               f"(largest difference unknown).")
        return CheckResult("failed", f"❌ {name}: the shape is right but the values differ from the "
                           f"reference: {differs}.{_clue(got, run, clues or {})}")
    if no_loops and len(set(calls)) > 1:
        few, many = min(calls), max(calls)
        return CheckResult("failed", f"❌ {name}: right numbers, but " + (loop_hint or HINTS["python_loop"]).format(
            few=few, many=many))
    return CheckResult("passed", f"✅ {name}: correct on {inputs_said or f'{trials} fixed test inputs'}. Well done!")


def _agrees_everywhere(wrong_fn: Callable, failing: int, answers: dict[int, Run], learner_fn: Callable,
                       make_inputs: Callable[[int], tuple], trials: int, atol: float, rtol: float) -> bool:
    """Does the learner's function give ``wrong_fn``'s answer on the failing input, and agree with it on every other
    input where both run? (``answers`` holds the runs so far; the others are run here, once.)"""
    for trial in (failing, *(t for t in range(trials) if t != failing)):
        args = make_inputs(trial)
        if trial not in answers:
            answers[trial] = run_learner(learner_fn, args)
        run = answers[trial]
        if run.error is not None or run.result is None:
            continue
        try:
            wrong = wrong_fn(*args)
        except Exception:  # noqa: BLE001 - a mistake that cannot be made on these inputs
            if trial == failing:
                return False
            continue
        agrees = difference(run.result, wrong, atol, rtol) is None if trial == failing else _finite_parts_agree(
            run.result, wrong, atol, rtol)
        if not agrees:
            return False
    return True


def _finite_parts_agree(got, wrong, atol: float, rtol: float) -> bool:
    """Do ``got`` and ``wrong`` agree wherever both are finite? On the inputs other than the failing one, a mistake
    is ruled out by numbers that differ, not by a NaN where its recipe happens to guard a 0 / 0."""
    if isinstance(got, torch.Tensor) and isinstance(wrong, torch.Tensor):
        if got.shape != wrong.shape or not (got.is_floating_point() and wrong.is_floating_point()):
            return difference(got, wrong, atol, rtol) is None
        both = got.detach().isfinite() & wrong.detach().isfinite()
        return difference(got.detach()[both], wrong.detach()[both].to(got.dtype), atol, rtol) is None
    if isinstance(got, tuple | list) and isinstance(wrong, tuple | list) and _holds_tensors(wrong):
        return len(got) == len(wrong) and all(_finite_parts_agree(g, w, atol, rtol)
                                              for g, w in zip(got, wrong, strict=True))
    return difference(got, wrong, atol, rtol) is None


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


def library_shortcuts(hint: str, *, also: Sequence[str] = ("scaled_dot_product_attention",
                                                            "multi_head_attention_forward")) -> dict:
    """Every function of ``attention_lib`` (its steps, its whole recipe, its experiments) and PyTorch's fused
    attention, each with ``hint``: for an exercise that asks the learner to write the thing themselves.

    ``{call}`` in ``hint`` names the call, as ``al.calculate_attention``. Only
    :func:`~attention_lib.get_device` is left out: it computes nothing.

    Example:
        >>> import attention_lib as al
        >>> shortcuts = library_shortcuts("write it yourself; you called {call}.")
        >>> shortcuts[al.calculate_attention], shortcuts["scaled_dot_product_attention"]
        ('write it yourself; you called `al.calculate_attention`.', 'write it yourself; you called {call}.')
    """
    import attention_lib as al
    from attention_lib import experiments

    found: dict = {}
    for module, prefix in ((al, "al."), (experiments, "attention_lib.experiments.")):
        for name in module.__all__:
            obj = getattr(module, name)
            function = obj.forward if isinstance(obj, type) and hasattr(obj, "forward") else obj
            if obj is not al.get_device and hasattr(function, "__code__"):
                found[function] = hint.replace("{call}", f"`{prefix}{name}`")
    found[torch.nn.MultiheadAttention.forward] = hint.replace("{call}", "`nn.MultiheadAttention`")
    return {**found, **dict.fromkeys(also, hint)}
