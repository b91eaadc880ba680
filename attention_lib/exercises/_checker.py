"""The machinery behind every exercise checker: run the learner's function, compare, and give a hint.

A checker never raises and never prints a traceback: it returns a :class:`CheckResult` whose text is shown
by the notebook. Chapters define their checkers in the sibling modules with :func:`check_function`.

The learner's function runs under a watch (:mod:`attention_lib.exercises._running`) that records its PyTorch
operations, refuses any call outside what the exercise allows (:mod:`~attention_lib.exercises._allowed`), and
remembers the operation that raised; every error goes
through :func:`~attention_lib.exercises._crashes.explain_crash`, the one place that turns an error inside the
learner's code into a hint. The hint texts live in :mod:`attention_lib.exercises._hints`, the words of a failure
(on which input, which item, a clue) in :mod:`attention_lib.exercises._messages`. Answers are compared
with :func:`torch.testing.assert_close`, whose report (how many numbers differ, the largest difference and
where) the message passes on in a few words.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ._again import KEPT_ANY, Awkward, later_slip, later_trials, remembered, widest
from ._allowed import Allowed
from ._compare import _agrees_everywhere, _holds_tensors, difference
from ._crashes import explain_crash
from ._hints import HINTS
from ._kept import kept_slip
from ._messages import clue, dtype_differs, roles_said, shapes_said, which_item
from ._running import checkers_own, run_learner
from ._trials import CHANGED_INPUT, backward_slip, float64_slip

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


def _params(fn: Callable, count: int) -> list[str]:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return names[:count] if len(names) >= count else [f"argument {i}" for i in range(count)]


def check_function(learner_fn: Callable, reference_fn: Callable, make_inputs: Callable[[int], tuple], *,
                   name: str, mistakes: Sequence[Mistake] = (), shape_hint: str | ShapeHint = "",
                   trials: int = 3, atol: float = 1e-5, rtol: float = 1e-4,
                   allowed: Allowed | None = None, no_loops: bool = False, loop_hint: str | None = None,
                   clues: Mapping[str, str] | None = None, explain: Explain | None = None,
                   inputs_said: str | None = None, float64: bool = False, backward: bool = False,
                   keep_inputs: bool = False, awkward: Sequence[Awkward] = (), again: bool = True,
                   fresh_result: bool = False) -> CheckResult:
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
        allowed: what the exercise may use (see :class:`~attention_lib.exercises._allowed.Allowed`); a call
            outside it fails the check even when the answer is right, and even when the function then crashes.
            ``None`` allows anything.
        no_loops: fail a correct answer whose number of PyTorch calls grows with the input (a Python loop).
        loop_hint: the hint for such a loop (``{few}`` and ``{many}`` are the counts); lesson 07's by default.
        clues: ``PyTorch operation name -> hint`` (or a :data:`Clue`) for a wrong answer that matches no listed
            mistake but called that operation (e.g. ``clamp`` in a softmax); otherwise the hint says how the numbers
            differ (:func:`~attention_lib.exercises._where.how_it_differs`).
        explain: says what is wrong with an answer that matches no listed mistake (see :data:`Explain`).
        inputs_said: what the inputs are, for the message of a correct answer (``"3 fixed test inputs"`` by
            default); the float64 and backward trials are added to it.
        float64: also run the first input in float64: the result must be float64 and float64-accurate.
        backward: also run backward through the answer on every input, and compare the gradients with the
            reference's (see :func:`~attention_lib.exercises._trials.backward_slip`).
        keep_inputs: a right answer must also leave the caller's tensors as they were (no ``q.div_()``,
            ``x.t_()``, ``state -= ...``): the learner's function gets copies, whose numbers, shapes and strides are
            compared after the call.
        awkward: the exercise's own awkward trials (:class:`~attention_lib.exercises._again.Awkward`: loud scores,
            a window of 1, ...), run once the fixed inputs are right.
        again: also call the answer on the first input's shape with new values (twice, the second time after every
            other trial), on a non-contiguous and a broadcast view of the last input, then compare every result
            again (see :mod:`~attention_lib.exercises._again`); ``False`` for answers that take no tensors. Last,
            every checker looks for a result remembered by the tensors' ids (:mod:`~attention_lib.exercises._kept`).
        fresh_result: a right answer must also return a new tensor each call, not one it keeps and hands out again
            (``functools.lru_cache``): a caller may change the result in place (a mask).

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
        >>> check_function(ref, ref, inputs, name="doubling", float64=True, backward=True).message
        '✅ doubling: correct on 3 fixed test inputs, the first again in float64, and backward through it. Well done!'
    """
    calls, answers, dtype = [], {}, None
    own = checkers_own(learner_fn.__code__) if hasattr(learner_fn, "__code__") else None
    if own is not None and allowed is not None and not allowed.own_helpers and learner_fn not in [
            wrong for wrong, _ in mistakes]:
        return CheckResult("failed", f"❌ {name}: not allowed here. Hint: "
                           + allowed.library_hint.replace("{call}", f"`{own}` (the checker's own function)"))
    for trial in range(trials):
        args = make_inputs(trial)
        expected = reference_fn(*args)
        run = run_learner(learner_fn, args, allowed)
        answers[trial] = run
        got = run.result
        if run.refused is not None:
            return CheckResult("failed", f"❌ {name}: not allowed here. Hint: {run.refused}")
        # The stub's own `raise NotImplementedError`; PyTorch raises NotImplementedError too (since torch 2.14,
        # for example, for `1 - mask` on a bool mask), and that is a crash to explain, not an empty exercise.
        if isinstance(run.error, NotImplementedError) and run.failed_op is None:
            return CheckResult("not attempted", f"📝 {name}: not attempted yet. Replace `raise "
                               f"NotImplementedError` with your code and run this cell again.")
        if run.error is not None:
            return CheckResult("error", explain_crash(name, run.error, args, failed_op=run.failed_op,
                                                      params=_params(reference_fn, len(args))))
        if (got is None or got is Ellipsis) and trial > 0:
            return CheckResult("failed", f"❌ {name}: your function returned {got!r} for {shapes_said(args)}, "
                               f"though it returned a result for other inputs: a branch (if/elif) or a loop misses "
                               f"this case.")
        if got is None or got is Ellipsis:
            return CheckResult("not attempted", f"📝 {name}: not attempted yet (your function returned "
                               f"{got!r}). Fill in the body and return the result.")
        calls.append(run.calls)
        differs = difference(got, expected, atol, rtol)
        if differs is None:  # a dtype other than the input's is said once the numbers are right everywhere
            floats = any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in args)
            dtype = dtype or (dtype_differs(got, expected) if floats else None)
            continue
        if isinstance(expected, torch.Tensor) and not isinstance(got, torch.Tensor):
            return CheckResult("failed", f"❌ {name}: expected a torch.Tensor, but got {type(got).__name__}.")
        if _shape(expected) is not None and _shape(got) != _shape(expected):
            kept = next((t for t in range(trial) if _shape(answers[t].result) == _shape(got)
                         and difference(got, answers[t].result, 0.0, 0.0) is None), None)
            if kept is not None:  # another call's result, handed back for these inputs
                return CheckResult("failed", f"❌ {name}: for {shapes_said(args)} your function returned its result "
                                   f"for the fixed input {kept + 1}, of other shapes. Hint: {KEPT_ANY}")
            said = HINTS["dot_T"] if run.batched_T else (
                shape_hint(args, _shape(got)) if callable(shape_hint) else shape_hint)
            hint = f" Hint: {said}" if said else ""
            return CheckResult("failed", f"❌ {name}: expected shape {_shape(expected)}, but got "
                               f"{_shape(got)}.{hint}")
        for wrong_fn, hint in mistakes:
            if _agrees_everywhere(wrong_fn, trial, answers, learner_fn, make_inputs, trials, atol, rtol):
                return CheckResult("failed", f"❌ {name}: not quite. Hint: {hint}")
        if run.batched_T:
            return CheckResult("failed", f"❌ {name}: not quite. Hint: {HINTS['dot_T']}")
        said = (explain(got, expected, args) if explain is not None else None) or remembered(
            got, args, [(make_inputs(t), answers[t].result) for t in range(trial)], atol, rtol) or roles_said(
            got, reference_fn, args, _params(reference_fn, len(args)), atol, rtol)
        if said:
            return CheckResult("failed", f"❌ {name}: {said}")
        if not _holds_tensors(expected):
            return CheckResult("failed", f"❌ {name}: for the inputs {', '.join(map(repr, args))}, your function "
                               f"returned {got!r}, which is not the answer ({differs}).")
        if not isinstance(expected, torch.Tensor):  # a tuple of tensors: say which one is off, and how
            return CheckResult("failed", f"❌ {name}: {which_item(got, expected, atol, rtol, run.ops)}")
        return CheckResult("failed", f"❌ {name}: the shape is right but the values differ from the "
                           f"reference for {shapes_said(args)}: {differs}."
                           + clue(got, expected, args, run, clues, _params(learner_fn, len(args))))
    if dtype is not None:
        return CheckResult("failed", f"❌ {name}: right numbers, but {dtype}")
    if no_loops and len(set(calls)) > 1:
        few, many = min(calls), max(calls)
        return CheckResult("failed", f"❌ {name}: right numbers, but " + (loop_hint or HINTS["python_loop"]).format(
            few=few, many=many))
    later = later_trials(make_inputs(0), widest([make_inputs(t) for t in range(trials)]), awkward) if again else list(
        awkward)
    earlier = [(make_inputs(t), answers[t].result) for t in range(trials)]

    def run_later(part: list[Awkward], keep: bool) -> tuple[str, str] | None:
        return later_slip(learner_fn, reference_fn, part, earlier, name=name, allowed=allowed, atol=atol, rtol=rtol,
                          mistakes=mistakes, params=_params(reference_fn, len(make_inputs(0))),
                          keep_inputs=keep) if part else None

    verdict = run_later(later[:1], False)  # the second call first (or the exercise's first): a memorised answer
    if verdict is not None:
        return CheckResult(*verdict)
    slip = float64_slip(learner_fn, reference_fn, make_inputs(0), allowed) if float64 else None
    for trial in range(trials if backward else 0):  # every input: a fully masked row may be in any of them
        if slip is not None:
            break
        args = make_inputs(trial)
        slip = backward_slip(learner_fn, args, allowed, _params(reference_fn, len(args)), reference_fn)
    if slip is not None:
        return CheckResult("failed", f"❌ {name}: not quite. Hint: {slip}")
    changed = next(((trial, run) for trial, run in answers.items() if run.changed), None) if keep_inputs else None
    if changed is not None:  # right numbers, but the caller's tensors did not come back as they were
        trial, run = changed
        ops = ", ".join(dict.fromkeys(run.in_place)) or "an in-place operation"
        said = CHANGED_INPUT.format(name=_params(reference_fn, len(make_inputs(trial)))[run.changed[0]], ops=ops)
        return CheckResult("failed", f"❌ {name}: right numbers, but {said}")
    verdict = run_later(later[1:], keep_inputs)
    if verdict is not None:
        return CheckResult(*verdict)
    kept = kept_slip(learner_fn, reference_fn, make_inputs, allowed, atol, rtol, fresh_result)
    if kept is not None:
        return CheckResult("failed", f"❌ {name}: right numbers, but {kept}")
    return CheckResult("passed", f"✅ {name}: correct on {inputs_said or f'{trials} fixed test inputs'}"
                       f"{also_checked(float64, backward)}. Well done!")


def also_checked(float64: bool, backward: bool) -> str:
    """What the extra trials checked, for a pass message: ``", the first again in float64, and backward through
    it"``."""
    return (", the first again in float64" if float64 else "") + (", and backward through it" if backward else "")
